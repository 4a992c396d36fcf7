package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
)

func TestLeaseTemplateRendersWhatEncodingDoes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 1, 12, 0, 0, 123456789, time.FixedZone("CEST", 2*60*60))
	tests := []struct {
		nodes   []string
		expired int
	}{
		{nodes: nil},
		{nodes: []string{"n-0"}},
		{nodes: []string{"n-0"}, expired: 1},
		{nodes: []string{"n-0", "n-1", "n-2"}, expired: 2},
		{nodes: []string{"ip-10-250-0-1.eu-west-1.compute.internal", "n-1"}, expired: 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d nodes, %d expired", len(tt.nodes), tt.expired), func(t *testing.T) {
			got := newLeaseTemplate(tt.nodes).render(tt.expired, now, 10*time.Minute)
			assert.Equal(t, string(leaseListJSON(tt.nodes, tt.expired, now, 10*time.Minute)), string(got))
		})
	}
}

func TestSplitShootPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, wantName string
		wantEndpoint   Endpoint
	}{
		{path: "/shoots/a/version", wantName: "a", wantEndpoint: EndpointVersion},
		{path: "/shoots/a/api/v1/nodes", wantName: "a", wantEndpoint: EndpointNodes},
		{path: "/shoots/a/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", wantName: "a", wantEndpoint: EndpointLeases},
		{path: "/shoots/a/apis/coordination.k8s.io/v1/namespaces/default/leases", wantName: "a", wantEndpoint: EndpointOther},
		{path: "/shoots/a/api/v1/nodes/", wantName: "a", wantEndpoint: EndpointOther},
		{path: "/shoots/a", wantName: "a", wantEndpoint: EndpointOther},
		{path: "/version", wantName: "", wantEndpoint: EndpointOther},
		{path: "/shoots//version", wantName: "", wantEndpoint: EndpointVersion},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			name, path := splitShootPath(tt.path)
			assert.Equal(t, tt.wantName, name)
			assert.Equal(t, tt.wantEndpoint, endpointOf(path))
		})
	}
}

func TestScenarioKindString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"Healthy", "Meltdown", "Down", "Slow", "Throttled", "ScenarioKind(5)"},
		[]string{Healthy.String(), Meltdown.String(), Down.String(), Slow.String(), Throttled.String(), ScenarioKind(5).String()})
}

func TestShootServerLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("Close without Start releases the listener", func(t *testing.T) {
		s, err := NewShootServer(ShootServerOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		assert.Error(t, s.Start(t.Context()))
		_, err = net.Listen("tcp", s.listener.Addr().String())
		assert.NoError(t, err)
	})
	t.Run("negative ExpiredAge", func(t *testing.T) {
		_, err := NewShootServer(ShootServerOptions{ExpiredAge: -time.Minute})
		assert.ErrorContains(t, err, "expiredAge -1m0s is negative")
	})
	t.Run("Start twice", func(t *testing.T) {
		s := startShootServer(t, ShootServerOptions{})
		assert.Error(t, s.Start(t.Context()))
	})
	t.Run("the end of the context stops serving", func(t *testing.T) {
		s, err := NewShootServer(ShootServerOptions{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, s.Start(ctx))
		cancel()
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", s.listener.Addr().String())
			if err == nil {
				_ = conn.Close()
			}
			return err != nil
		}, 5*time.Second, time.Millisecond)
		assert.NoError(t, s.Close())
	})
	t.Run("Close ends a Slow answer in flight", func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		s, err := NewShootServer(ShootServerOptions{Clock: clk})
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		s.AddShoot("a", []string{"a-0"})
		require.NoError(t, s.SetScenario("a", Scenario{Kind: Slow, Delay: time.Hour}))
		listed := make(chan error, 1)
		go func() { listed <- getNodesOnce(t.Context(), clientFor(t, restConfig(t, s, "a"))) }()
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		require.NoError(t, s.Close())
		assert.Error(t, <-listed)
		assert.Equal(t, uint64(1), s.Stats().Abandoned)
	})
}

// TestShootServerConcurrentChanges probes shoots while they are added, removed and change scenario;
// run with -race.
func TestShootServerConcurrentChanges(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		s.AddShoot(name, []string{name + "-0", name + "-1"})
	}
	kinds := []Scenario{{Kind: Healthy}, {Kind: Meltdown, ExpiredFraction: 0.5}, {Kind: Throttled}, {Kind: Slow}}
	var wg sync.WaitGroup
	for _, name := range names {
		cfg := restConfig(t, s, name)
		cfg.QPS = -1 // no client-side rate limit
		cs := clientFor(t, cfg)
		wg.Go(func() {
			for range 50 {
				err := cs.CoordinationV1().RESTClient().Get().Namespace(nodeLeaseNamespace).Resource("leases").
					MaxRetries(0).Do(t.Context()).Error()
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
					t.Errorf("listing the leases of %s: %v", name, err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			name := names[i%len(names)]
			if err := s.SetScenario(name, kinds[i%len(kinds)]); err != nil {
				s.AddShoot(name, []string{name + "-0"})
			}
			if i%7 == 0 {
				s.RemoveShoot(name)
			}
			_ = s.Requests()
			_ = s.Stats()
		}
	})
	wg.Wait()
	stats := s.Stats()
	var answered uint64
	for _, n := range stats.ByCode {
		answered += n
	}
	assert.Equal(t, stats.Total, answered+stats.Closed+stats.Abandoned)
	assert.Positive(t, stats.ByCode[http.StatusOK])
}
