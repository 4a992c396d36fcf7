package weeder_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

func TestPodWatchClosedByGoneIsReopened(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	setSlice(t, ns, "etcd-main-client", false)
	gone := newGoneInjector(ns)
	r := startReplicaThrough(t, gone.config(env.Config), env.Namespace(t), "dwd-0", weederConfig(t, time.Minute))
	require.Eventually(t, func() bool { return r.Owns(ns) }, 20*time.Second, 10*time.Millisecond)

	setSlice(t, ns, "etcd-main-client", true)
	require.Eventually(t, func() bool { return gone.openWatches() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the window watches the pods of its one selector")
	gone.expire()
	require.Eventually(t, func() bool { return gone.goneServed.Load() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the RetryWatcher re-watched and was told 410 Gone, which ends it")

	late := createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff")
	require.Eventually(t, func() bool { return !exists(t, late) }, 10*time.Second, 20*time.Millisecond,
		"a pod that crash-loops after the watch was closed is still weeded")
	assert.Len(t, windowsIn(r, ns), 1, "in the same window")
	// The re-list may weed the pod before the new watch is open.
	require.Eventually(t, func() bool { return gone.openWatches() == 1 }, 10*time.Second, 10*time.Millisecond,
		"by one watch again")
	assert.Equal(t, 1, gone.openWatches(), "not more")
}

// startReplicaThrough is startReplica (integration_test.go) with the weeder's seed client config
// restConfig; the member's leases go straight to the API server.
func startReplicaThrough(t *testing.T, restConfig *rest.Config, leaseNS, member string, cfg *config.WeederConfig) *replica {
	return startReplicaWith(t, restConfig, leaseNS, member, weeder.Options{Config: cfg, MaxWindows: 10})
}

// goneInjector stands between a client and the API server for the pod watches of one namespace:
// expire ends every such watch stream open now and answers the next such watch with a 410 Gone
// event, as the API server does when a watch's resource version has been compacted away. A
// RetryWatcher re-watches after a stream ends, but a 410 ends it for good.
type goneInjector struct {
	namespace  string
	goneServed atomic.Int32

	mu    sync.Mutex
	armed bool
	open  map[*cuttableBody]struct{}
}

func newGoneInjector(namespace string) *goneInjector {
	return &goneInjector{namespace: namespace, open: map[*cuttableBody]struct{}{}}
}

// config returns a copy of cfg whose requests pass through g.
func (g *goneInjector) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return &goneTransport{g: g, next: next} })
	return cfg
}

func (g *goneInjector) openWatches() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

func (g *goneInjector) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	for b := range g.open {
		b.cutOff()
	}
}

// takeArmed reports whether the next pod watch is to be told 410 Gone, and disarms.
func (g *goneInjector) takeArmed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	armed := g.armed
	g.armed = false
	return armed
}

func (g *goneInjector) track(b *cuttableBody, open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open {
		g.open[b] = struct{}{}
	} else {
		delete(g.open, b)
	}
}

type goneTransport struct {
	g    *goneInjector
	next http.RoundTripper
}

// goneEvent is the watch event the API server sends for a resource version that is too old.
const goneEvent = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
	`"message":"too old resource version","reason":"Expired","code":410}}` + "\n"

func (t *goneTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" || req.URL.Path != "/api/v1/namespaces/"+t.g.namespace+"/pods" {
		return t.next.RoundTrip(req)
	}
	if t.g.takeArmed() {
		t.g.goneServed.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: req.Proto, Request: req,
			Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(goneEvent))}, nil
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body := &cuttableBody{ReadCloser: resp.Body, g: t.g}
	t.g.track(body, true)
	resp.Body = body
	return resp, nil
}

// cuttableBody is a watch stream that ends, as if the server had closed it, once cut off.
type cuttableBody struct {
	io.ReadCloser
	g   *goneInjector
	cut atomic.Bool
}

func (b *cuttableBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.cut.Load() {
		return n, io.EOF
	}
	return n, err
}

func (b *cuttableBody) Close() error {
	b.g.track(b, false)
	return b.ReadCloser.Close()
}

// cutOff ends the stream; the caller holds g.mu.
func (b *cuttableBody) cutOff() {
	b.cut.Store(true)
	_ = b.ReadCloser.Close()
}
