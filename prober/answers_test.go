package prober

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestCountJSONListItems(t *testing.T) {
	lease := `{"metadata":{"name":"n","annotations":{"items":"[1,2,3]"}},"spec":{"holderIdentity":"n"}}`
	tests := []struct {
		name string
		json string
		want int // -1: an error
	}{
		{"empty", `{"kind":"LeaseList","items":[]}`, 0},
		{"no items", `{"kind":"LeaseList","metadata":{}}`, 0},
		{"null items", `{"kind":"LeaseList","items":null}`, 0},
		{"three", `{"kind":"LeaseList","metadata":{"resourceVersion":"1"},"items":[` + lease + `,` + lease + `,` + lease + `]}`, 3},
		{"items before the metadata", `{"items":[` + lease + `],"metadata":{"items":[1,2,3,4,5]}}`, 1},
		{"items of any kind", `{"items":[1,"two",null,[3],{"four":4}]}`, 5},
		{"every items array counts", `{"items":[1,2],"items":[3,4,5]}`, 5},
		{"an escaped key", `{"\u0069tems":[1,2,3]}`, 3},
		{"whitespace", " \n{ \"items\" : [ 1 , 2 ] }\n", 2},
		{"over the bound, counted no further", `{"items":[1,2,3,4,5,6,7,8,9,10,11,12]}`, 11},
		{"over the bound before a syntax error", `{"items":[1,2,3,4,5,6,7,8,9,10,11,12,}`, 11},
		{"not an object", `[1,2,3]`, -1},
		{"items not an array", `{"items":{"a":1}}`, -1},
		{"cut off", `{"items":[1,2,`, -1},
		{"garbage in an item", `{"items":[1,{"a":tru}]}`, -1},
		{"nested deeper than encoding/json goes", `{"items":[` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]}`, -1},
		{"empty body", ``, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := countJSONListItems([]byte(tt.json), 10)
			if tt.want < 0 {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, n)
		})
	}
}

// leaseListJSON encodes n leases as an API server's JSON list.
func leaseListJSON(t *testing.T, n int) []byte {
	list := leaseListOf(n)
	list.Kind, list.APIVersion = "LeaseList", "coordination.k8s.io/v1"
	var buf bytes.Buffer
	require.NoError(t, json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{}).Encode(list, &buf))
	return buf.Bytes()
}

// A JSON list over the item bound is refused before it is decoded, as a protobuf one is: a server
// that ignores Accept (an aggregated APIService in the shoot) would otherwise cost the decoding of a
// list up to the byte bound.
func TestJSONListsAreCountedBeforeDecoding(t *testing.T) {
	const maxItems = 20000
	body := leaseListJSON(t, maxItems+1)
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 10 * time.Second, MaxItems: maxItems, MaxBytes: 32 << 20}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	_, _, err = c.NodeLeases(context.Background(), false)
	goruntime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrAnswerTooLarge)
	assert.Contains(t, err.Error(), "more than 20000 items")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d KiB answer, %d KiB allocated", len(body)>>10, allocated>>10)
	// Reading costs two to five times the body (more under -race); decoding it, twenty times.
	assert.Less(t, allocated, uint64(8*len(body)), "read and counted, not decoded")
}

func TestListAnswersThatCannotBeCountedAreRefused(t *testing.T) {
	var contentType, body string
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 5 * time.Second, MaxItems: 10, MaxBytes: 1 << 20}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	for _, tt := range []struct{ name, contentType, body, want string }{
		{"YAML, which client-go would decode", "application/yaml", "kind: LeaseList\napiVersion: coordination.k8s.io/v1\nitems: []\n", `Content-Type "application/yaml"`},
		{"JSON that does not parse", "application/json", `{"kind":"LeaseList","items":[{"metadata":`, "cannot be counted"},
		{"JSON with a charset", "application/json; charset=utf-8", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[{},{},{},{},{},{},{},{},{},{},{}]}`, "more than 10 items"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			contentType, body = tt.contentType, tt.body
			_, _, err := c.NodeLeases(context.Background(), true)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	contentType, body = "application/json; charset=utf-8", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[{"metadata":{"name":"a"}}]}`
	leases, _, err := c.NodeLeases(context.Background(), true)
	require.NoError(t, err, "a JSON list within the bound is decoded")
	require.Len(t, leases, 1)
	assert.Equal(t, "a", leases[0].Name)
}
