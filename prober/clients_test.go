package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// httptestCA is, in PEM, the certificate every httptest TLS server serves unless told otherwise: its
// own CA, valid for 127.0.0.1.
var httptestCA = sync.OnceValue(func() []byte {
	server := httptest.NewTLSServer(http.NotFoundHandler())
	defer server.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
})

// kubeconfig builds a kubeconfig for server, an httptest TLS server (verified against httptestCA),
// whose user is given as its JSON object.
func kubeconfig(server string, user map[string]any) []byte {
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": server, "certificate-authority-data": httptestCA()}}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u"}}},
		"users":    []any{map[string]any{"name": "u", "user": user}},
	})
	return data
}

func secret(rv string, data []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "access", Namespace: "shoot--p--s", UID: "uid-1", ResourceVersion: rv},
		Data: map[string][]byte{KubeconfigKey: data}}
}

func TestShootClientsAreCachedPerSecretVersion(t *testing.T) {
	clients := &ShootClients{Timeout: time.Second}
	cfg := kubeconfig("https://127.0.0.1:1", map[string]any{"token": "t"})
	a, err := clients.For(secret("1", cfg))
	require.NoError(t, err)
	b, err := clients.For(secret("1", cfg))
	require.NoError(t, err)
	assert.Same(t, a, b, "the same Secret version reuses the client and its connections")
	c, err := clients.For(secret("2", cfg))
	require.NoError(t, err)
	assert.NotSame(t, a, c, "a changed Secret builds a new client")
	clients.Forget("shoot--p--s")
	assert.Zero(t, clients.Len())
}

func TestShootClientsRefuseUnusableKubeconfigs(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"missing key", nil, `no "kubeconfig" key`},
		{"not a kubeconfig", []byte("{{{"), "invalid kubeconfig"},
		{"exec plugin", kubeconfig("https://127.0.0.1:1", map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true", "interactiveMode": "Never"}}), "exec plugin"},
		{"token file", kubeconfig("https://127.0.0.1:1", map[string]any{"tokenFile": "/etc/passwd"}), "refers to files"},
		{"missing certificate file", kubeconfig("https://127.0.0.1:1", map[string]any{"client-certificate": "/nonexistent/cert", "client-key": "/nonexistent/key"}), "refers to files"},
		{"no server", kubeconfig("", map[string]any{"token": "secret-token"}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := secret("1", tt.data)
			if tt.data == nil {
				s.Data = nil
			}
			_, err := (&ShootClients{}).For(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "kubeconfig Secret shoot--p--s/access")
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "secret-token", "never the Secret's contents")
			assert.NotContains(t, err.Error(), "/nonexistent", "nothing about the watchdog's own files")
		})
	}
}

func TestShootClientRetriesOnceOnAFreshConnection(t *testing.T) {
	var requests atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) == 1 {
			// A stale connection: it breaks without an answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	require.NoError(t, c.Version(context.Background()), "the second attempt on a fresh connection succeeds")
	assert.Equal(t, int32(2), requests.Load())
}

func TestShootClientDoesNotRetryAnAnswer(t *testing.T) {
	var requests atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`))
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	require.Error(t, c.Version(context.Background()))
	assert.LessOrEqual(t, requests.Load(), int32(2), "an answer from the API server counts; only client-go's own retries may repeat it")
}

// An answer that does not decode is an answer too: not sent again.
func TestShootClientDoesNotRetryAnAnswerItCannotDecode(t *testing.T) {
	var requests atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"LeaseList","items":[`))
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	_, _, err = c.NodeLeases(context.Background(), false)
	require.ErrorAs(t, err, new(answeredError))
	assert.Equal(t, int32(1), requests.Load())
}

// connCounter counts the connections a test server opened and closed.
type connCounter struct{ opened, closed atomic.Int32 }

func (c *connCounter) track(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		c.opened.Add(1)
	case http.StateClosed:
		c.closed.Add(1)
	}
}

func versionServer(t *testing.T, conns *connCounter) *httptest.Server {
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	server.Config.ConnState = conns.track
	server.StartTLS()
	t.Cleanup(server.Close)
	return server
}

func TestForgetClosesTheIdleConnections(t *testing.T) {
	var conns connCounter
	server := versionServer(t, &conns)
	clients := &ShootClients{Timeout: 5 * time.Second}
	c, err := clients.For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	require.NoError(t, c.Version(context.Background()))
	require.Equal(t, int32(1), conns.opened.Load())
	clients.Forget("shoot--p--s")
	require.Eventually(t, func() bool { return conns.closed.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the idle connection is closed, through client-go's wrappers")
}

func TestARetryUsesAFreshConnection(t *testing.T) {
	var conns connCounter
	server := versionServer(t, &conns)
	c, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	require.NoError(t, c.Version(context.Background()))
	calls := 0
	err = c.retryOnce(context.Background(), func() error {
		calls++
		if calls == 1 {
			return io.ErrUnexpectedEOF // a failure on a healthy connection, as a stale one would give
		}
		return c.Version(context.Background())
	})
	require.NoError(t, err)
	assert.Equal(t, int32(2), conns.opened.Load(), "the retry opened a new connection")
}

func TestListsAreBoundedAndNeverPartial(t *testing.T) {
	var body atomic.Value
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Date", "Sun, 22 Nov 2026 10:00:00 GMT")
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 5 * time.Second, MaxItems: 2, MaxBytes: 4096}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	lease := `{"metadata":{"name":"n"}}`
	for _, tt := range []struct {
		name, body string
		err        bool
	}{
		{"within the bounds", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[` + lease + `,` + lease + `]}`, false},
		{"more items than the bound", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[` + lease + `,` + lease + `,` + lease + `]}`, true},
		{"cut short by the server", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"continue":"x"},"items":[` + lease + `]}`, true},
		{"more bytes than the bound", `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[` + lease + `],"padding":"` + strings.Repeat("x", 5000) + `"}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body.Store(tt.body)
			items, read, err := c.NodeLeases(context.Background(), true)
			if tt.err {
				require.ErrorIs(t, err, ErrAnswerTooLarge)
				return
			}
			require.NoError(t, err)
			assert.Len(t, items, 2)
			assert.True(t, read.Consistent)
			assert.Equal(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), read.Date.UTC())
		})
	}
}

// leaseListOf is a list of n leases, renewed now.
func leaseListOf(n int) *coordinationv1.LeaseList {
	list := &coordinationv1.LeaseList{}
	now := metav1.NewMicroTime(time.Now())
	for i := range n {
		list.Items = append(list.Items, coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%d", i), Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x"), RenewTime: &now}})
	}
	return list
}

// leaseListProtobuf encodes n leases as kube's protobuf list.
func leaseListProtobuf(t *testing.T, n int) []byte {
	list := leaseListOf(n)
	list.Kind, list.APIVersion = "LeaseList", "coordination.k8s.io/v1"
	var buf bytes.Buffer
	require.NoError(t, protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf))
	return buf.Bytes()
}

func TestCountListItems(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000} {
		got, err := countListItems(leaseListProtobuf(t, n))
		require.NoError(t, err)
		assert.Equal(t, n, got)
	}
	_, err := countListItems([]byte(`{"items":[]}`))
	assert.Error(t, err)
	_, err = countListItems(append([]byte("k8s\x00"), 0xff, 0xff))
	assert.Error(t, err, "garbage after the magic is an error, never a panic")
}

// A protobuf list over the item bound is refused before it is decoded: the watch cache ignores the
// limit of a resourceVersion=0 list, and decoding costs many times its bytes.
func TestProtobufListsAreCountedBeforeDecoding(t *testing.T) {
	body := leaseListProtobuf(t, 200000)
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(body)
	}))
	t.Cleanup(server.Close)
	c, err := (&ShootClients{Timeout: 10 * time.Second, MaxItems: 20000, MaxBytes: 32 << 20}).For(secret("1", kubeconfig(server.URL, map[string]any{"token": "t"})))
	require.NoError(t, err)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	_, _, err = c.NodeLeases(context.Background(), false)
	goruntime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrAnswerTooLarge)
	t.Logf("%d MiB answer, %d MiB allocated", len(body)>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(6*len(body)), "read and counted, not decoded")
}

// Version calls GET /version, a call that reads nothing, through the client's transport and retry:
// the probes send no such call, the tests use it to check a connection.
func (c *ShootClient) Version(ctx context.Context) error {
	return c.retryOnce(ctx, func() error {
		_, err := c.call(ctx, 0, func(ctx context.Context) error {
			return c.core.Get().AbsPath("/version").MaxRetries(0).Do(ctx).Error()
		})
		return err
	})
}
