package prober

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeconfig builds a kubeconfig for server whose user is given as its JSON object.
func kubeconfig(server string, user map[string]any) []byte {
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": server, "insecure-skip-tls-verify": true}}},
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
