package sim

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	testingclock "k8s.io/utils/clock/testing"
)

// t0 is when the fake clocks of these tests start; whole seconds, so that renewTimes compare exactly.
var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// startShootServer starts a ShootServer that stops when the test ends.
func startShootServer(t *testing.T, opts ShootServerOptions) *ShootServer {
	t.Helper()
	s, err := NewShootServer(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// restConfig parses the kubeconfig the server hands out for a shoot, as the prober does.
func restConfig(t *testing.T, s *ShootServer, name string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Kubeconfig(name))
	require.NoError(t, err)
	return cfg
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func listNodes(ctx context.Context, cs kubernetes.Interface) (*corev1.NodeList, error) {
	return cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
}

func listLeases(ctx context.Context, cs kubernetes.Interface) (*coordinationv1.LeaseList, error) {
	return cs.CoordinationV1().Leases(nodeLeaseNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
}

// getNodesOnce lists the nodes without client-go's retries, which wait a second after a 429 or a
// broken connection.
func getNodesOnce(ctx context.Context, cs kubernetes.Interface) error {
	return cs.CoreV1().RESTClient().Get().Resource("nodes").Param("resourceVersion", "0").MaxRetries(0).Do(ctx).Error()
}

// renewedAt is the renewTime an honest kubelet with the default renew interval shows at a moment.
func renewedAt(lease string, at time.Time) time.Time {
	return lastRenew(at, renewPhase(lease, 10*time.Second), 10*time.Second)
}

func renewTimes(leases []coordinationv1.Lease) []time.Time {
	times := make([]time.Time, len(leases))
	for i, l := range leases {
		times[i] = l.Spec.RenewTime.UTC()
	}
	return times
}

func TestKubeconfig(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{Token: "secret"})
	cfg := restConfig(t, s, "shoot--p--a")
	assert.Equal(t, s.URL()+"/shoots/shoot--p--a", cfg.Host)
	assert.Equal(t, s.CAData(), cfg.CAData)
	assert.Equal(t, "secret", cfg.BearerToken)
	assert.Regexp(t, `^https://127\.0\.0\.1:\d+$`, s.URL())
}

func TestShootServerServesTheProbersEndpoints(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{Clock: testingclock.NewFakeClock(t0)})
	s.AddShoot("a", []string{"a-0", "a-1", "a-2"})
	s.AddShoot("b", []string{"b-0"})
	cs := clientFor(t, restConfig(t, s, "a"))

	info, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.36.3", info.GitVersion)
	assert.Equal(t, []string{"1", "36"}, []string{info.Major, info.Minor})

	nodes, err := listNodes(t.Context(), cs)
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	for i, n := range nodes.Items {
		assert.Equal(t, []string{"a-0", "a-1", "a-2"}[i], n.Name)
		assert.Equal(t, "pool-a", n.Labels["worker.gardener.cloud/pool"])
		require.Len(t, n.Status.Conditions, 1)
		assert.Equal(t, corev1.NodeReady, n.Status.Conditions[0].Type)
		assert.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status)
	}

	leases, err := listLeases(t.Context(), cs)
	require.NoError(t, err)
	require.Len(t, leases.Items, 3)
	for i, l := range leases.Items {
		node := []string{"a-0", "a-1", "a-2"}[i]
		assert.Equal(t, node, l.Name)
		assert.Equal(t, nodeLeaseNamespace, l.Namespace)
		assert.Equal(t, node, *l.Spec.HolderIdentity)
		assert.Equal(t, int32(40), *l.Spec.LeaseDurationSeconds)
		assert.Equal(t, renewedAt(node, t0), l.Spec.RenewTime.UTC())
	}

	// The path prefix chose the shoot: b's client sees b's nodes.
	nodes, err = listNodes(t.Context(), clientFor(t, restConfig(t, s, "b")))
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	assert.Equal(t, "b-0", nodes.Items[0].Name)
	assert.Equal(t, map[string]uint64{"a": 3, "b": 1}, s.Requests())
}

func TestShootServerRenewsLeasesLikeKubelets(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	nodes := NodeNames("a", 20)
	s.AddShoot("a", nodes)
	cs := clientFor(t, restConfig(t, s, "a"))

	var before []time.Time
	for step := range 12 {
		clk.Step(2500 * time.Millisecond)
		now := clk.Now()
		leases, err := listLeases(t.Context(), cs)
		require.NoError(t, err)
		got := renewTimes(leases.Items)
		spread := map[time.Time]bool{}
		for i, renewed := range got {
			assert.Equal(t, renewedAt(nodes[i], now), renewed)
			assert.True(t, renewed.After(now.Add(-10*time.Second)) && !renewed.After(now), "renewed within the last interval: %v at %v", renewed, now)
			if before != nil {
				assert.False(t, renewed.Before(before[i]), "a renewTime never goes back")
			}
			spread[renewed] = true
		}
		assert.Greater(t, len(spread), 10, "step %d: each lease on its own schedule", step)
		before = got
	}
	clk.Step(10 * time.Second)
	leases, err := listLeases(t.Context(), cs)
	require.NoError(t, err)
	for i, renewed := range renewTimes(leases.Items) {
		assert.Equal(t, before[i].Add(10*time.Second), renewed, "renewed again one interval later")
	}
}

func TestShootServerMeltdown(t *testing.T) {
	t.Parallel()
	nodes := []string{"n-0", "n-1", "n-2", "n-3"}
	r := make([]time.Time, len(nodes))     // renewTimes when the shoot melts at t0
	later := make([]time.Time, len(nodes)) // a minute later, had they kept renewing
	for i, n := range nodes {
		r[i], later[i] = renewedAt(n, t0), renewedAt(n, t0.Add(time.Minute))
	}
	tests := []struct {
		fraction float64
		want     []time.Time
	}{
		{fraction: 0, want: []time.Time{later[0], later[1], later[2], later[3]}},
		{fraction: 0.5, want: []time.Time{r[0], r[1], later[2], later[3]}},
		{fraction: 0.3, want: []time.Time{r[0], later[1], later[2], later[3]}},   // round(1.2) = 1
		{fraction: 0.125, want: []time.Time{r[0], later[1], later[2], later[3]}}, // round(0.5) = 1, half away from zero
		{fraction: 1, want: []time.Time{r[0], r[1], r[2], r[3]}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("fraction=%v", tt.fraction), func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			s := startShootServer(t, ShootServerOptions{Clock: clk})
			s.AddShoot("a", nodes)
			cs := clientFor(t, restConfig(t, s, "a"))
			require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: tt.fraction}))
			clk.Step(time.Minute)
			leases, err := listLeases(t.Context(), cs)
			require.NoError(t, err)
			assert.Equal(t, tt.want, renewTimes(leases.Items), "the melted kubelets' leases stand still from their last renewal")
		})
	}
}

func TestShootServerKubeletsStayStoppedUntilTheyResume(t *testing.T) {
	t.Parallel()
	nodes := []string{"n-0", "n-1", "n-2", "n-3"}
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", nodes)
	cs := clientFor(t, restConfig(t, s, "a"))
	frozen := make([]time.Time, len(nodes))
	for i, n := range nodes {
		frozen[i] = renewedAt(n, t0)
	}
	read := func() []time.Time {
		leases, err := listLeases(t.Context(), cs)
		require.NoError(t, err)
		return renewTimes(leases.Items)
	}
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 1}))
	clk.Step(time.Minute)
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 1, ServerClockOffset: 30 * time.Second}))
	clk.Step(time.Minute)
	assert.Equal(t, frozen, read(), "melted again, the kubelets stay stopped since the first melt")
	melt, ok := s.Melted("a")
	require.True(t, ok)
	assert.Equal(t, t0, melt.Stopped)
	assert.Equal(t, slices.MaxFunc(frozen, time.Time.Compare), melt.LastRenewal)

	require.NoError(t, s.SetScenario("a", Scenario{}))
	_, ok = s.Melted("a")
	assert.False(t, ok, "recovered")
	assert.Equal(t, frozen, read(), "no renewal is shown from the time they were stopped")
	clk.Step(10 * time.Second)
	resumed := t0.Add(2 * time.Minute)
	for i, renewed := range read() {
		assert.True(t, !renewed.Before(resumed), "%s renewed at its first renew instant after the resume, got %v", nodes[i], renewed)
	}
}

func TestShootServerExpiredSince(t *testing.T) {
	t.Parallel()
	nodes := []string{"n-0", "n-1", "n-2", "n-3", "n-4"}
	s := startShootServer(t, ShootServerOptions{Clock: testingclock.NewFakeClock(t0)})
	s.AddShoot("a", nodes)
	_, ok := s.ExpiredSince("a", 30*time.Second, 0.6)
	assert.False(t, ok, "not melted")
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 1}))
	at, ok := s.ExpiredSince("a", 30*time.Second, 0.6)
	require.True(t, ok)
	renewed := make([]time.Time, len(nodes))
	for i, n := range nodes {
		renewed[i] = renewedAt(n, t0)
	}
	slices.SortFunc(renewed, time.Time.Compare)
	assert.Equal(t, renewed[2].Add(30*time.Second), at, "3 of 5 leases 30 s old: the third renewal + 30 s")
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 0.4}))
	_, ok = s.ExpiredSince("a", 30*time.Second, 0.6)
	assert.False(t, ok, "2 of 5 leases never reach 0.6")
}

func TestShootServerRenewedAgain(t *testing.T) {
	t.Parallel()
	nodes := []string{"n-0", "n-1", "n-2", "n-3", "n-4"}
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", nodes)
	cs := clientFor(t, restConfig(t, s, "a"))
	_, ok := s.RenewedAgain("a", 0.6)
	assert.False(t, ok, "never melted")
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 1}))
	clk.Step(time.Minute)
	_, ok = s.RenewedAgain("a", 0.6)
	assert.False(t, ok, "melted now")
	require.NoError(t, s.SetScenario("a", Scenario{}))
	resumed := clk.Now()
	at, ok := s.RenewedAgain("a", 0.6)
	require.True(t, ok)
	stale := func() int { // leases still showing a renewal from before the resume
		leases, err := listLeases(t.Context(), cs)
		require.NoError(t, err)
		n := 0
		for _, renewed := range renewTimes(leases.Items) {
			if renewed.Before(resumed) {
				n++
			}
		}
		return n
	}
	clk.SetTime(at.Add(-time.Millisecond))
	assert.Equal(t, 3, stale(), "just before, 3 of 5 leases still prove the meltdown (0.6)")
	clk.SetTime(at)
	assert.Equal(t, 2, stale(), "at it, 2 of 5 do not")
	assert.True(t, at.Before(resumed.Add(10*time.Second)), "within a renew interval of the resume, got %v", at.Sub(resumed))

	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 0.4}))
	clk.Step(time.Minute)
	require.NoError(t, s.SetScenario("a", Scenario{}))
	_, ok = s.RenewedAgain("a", 0.6)
	assert.False(t, ok, "2 of 5 leases stopped never proved a meltdown at 0.6")
}

func TestShootServerTLS(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	s.AddShoot("a", []string{"a-0"})
	other, err := NewShootServer(ShootServerOptions{})
	require.NoError(t, err)
	require.NoError(t, other.Close())

	t.Run("its CA verifies 127.0.0.1", func(t *testing.T) {
		_, err := clientFor(t, restConfig(t, s, "a")).Discovery().ServerVersion()
		assert.NoError(t, err)
	})
	t.Run("its CA verifies localhost", func(t *testing.T) {
		cfg := restConfig(t, s, "a")
		_, port, err := net.SplitHostPort(s.listener.Addr().String())
		require.NoError(t, err)
		cfg.Host = "https://localhost:" + port + "/shoots/a"
		_, err = clientFor(t, cfg).Discovery().ServerVersion()
		assert.NoError(t, err)
	})
	t.Run("another CA fails", func(t *testing.T) {
		cfg := restConfig(t, s, "a")
		cfg.CAData = other.CAData()
		_, err := clientFor(t, cfg).Discovery().ServerVersion()
		var unknownAuthority x509.UnknownAuthorityError
		assert.ErrorAs(t, err, &unknownAuthority)
	})
	t.Run("client-go speaks HTTP/2", func(t *testing.T) {
		httpClient, err := rest.HTTPClientFor(restConfig(t, s, "a"))
		require.NoError(t, err)
		resp, err := httpClient.Get(s.URL() + "/shoots/a/version")
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 2, resp.ProtoMajor)
	})
}

func TestShootServerAuthentication(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{Token: "right"})
	s.AddShoot("a", []string{"a-0"})
	tests := []struct {
		name, token string
		wantErr     func(error) bool
	}{
		{name: "no token", token: "", wantErr: apierrors.IsUnauthorized},
		{name: "wrong token", token: "wrong", wantErr: apierrors.IsUnauthorized},
		{name: "right token", token: "right", wantErr: func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := restConfig(t, s, "a")
			cfg.BearerToken = tt.token
			_, err := listNodes(t.Context(), clientFor(t, cfg))
			assert.True(t, tt.wantErr(err), "unexpected error: %v", err)
		})
	}
	assert.Equal(t, map[int]uint64{http.StatusUnauthorized: 2, http.StatusOK: 1}, s.Stats().ByCode)
}

func TestShootServerThrottled(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	s.AddShoot("a", []string{"a-0"})
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Throttled}))

	err := getNodesOnce(t.Context(), clientFor(t, restConfig(t, s, "a")))
	assert.True(t, apierrors.IsTooManyRequests(err), "unexpected error: %v", err)
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.Equal(t, &metav1.StatusDetails{RetryAfterSeconds: 1}, status.Status().Details)
	delay, ok := apierrors.SuggestsClientDelay(err)
	assert.True(t, ok)
	assert.Equal(t, 1, delay)
	assert.Equal(t, map[int]uint64{http.StatusTooManyRequests: 1}, s.Stats().ByCode)
}

func TestShootServerDown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		nextProto []string
	}{
		{name: "HTTP/2 stream reset", nextProto: nil},
		{name: "HTTP/1.1 connection closed", nextProto: []string{"http/1.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startShootServer(t, ShootServerOptions{})
			s.AddShoot("down", []string{"d-0"})
			s.AddShoot("up", []string{"u-0"})
			require.NoError(t, s.SetScenario("down", Scenario{Kind: Down}))
			down, up := restConfig(t, s, "down"), restConfig(t, s, "up")
			down.NextProtos, up.NextProtos = tt.nextProto, tt.nextProto

			err := getNodesOnce(t.Context(), clientFor(t, down))
			require.Error(t, err)
			var status apierrors.APIStatus
			assert.False(t, errors.As(err, &status), "an API status instead of a transport error: %v", err)
			// Another shoot, on the same client-go transport, is not affected.
			_, err = listNodes(t.Context(), clientFor(t, up))
			assert.NoError(t, err)

			assert.Equal(t, Stats{Total: 2, Closed: 1, ByCode: map[int]uint64{http.StatusOK: 1},
				ByEndpoint: map[Endpoint]uint64{EndpointNodes: 2}, NodeLists: ListReads{Cached: 1}}, s.Stats())
		})
	}
}

func TestShootServerSlow(t *testing.T) {
	t.Parallel()
	t.Run("real clock", func(t *testing.T) {
		const delay = 50 * time.Millisecond
		s := startShootServer(t, ShootServerOptions{})
		s.AddShoot("a", []string{"a-0"})
		require.NoError(t, s.SetScenario("a", Scenario{Kind: Slow, Delay: delay}))
		start := time.Now()
		_, err := listNodes(t.Context(), clientFor(t, restConfig(t, s, "a")))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), delay)
	})
	t.Run("fake clock", func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		s := startShootServer(t, ShootServerOptions{Clock: clk})
		s.AddShoot("a", []string{"a-0"})
		require.NoError(t, s.SetScenario("a", Scenario{Kind: Slow, Delay: time.Hour}))
		listed := make(chan error, 1)
		go func() {
			_, err := listLeases(t.Context(), clientFor(t, restConfig(t, s, "a")))
			listed <- err
		}()
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		assert.Empty(t, listed, "answered before the delay passed")
		clk.Step(time.Hour)
		assert.NoError(t, <-listed)
	})
	t.Run("client gives up", func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		s := startShootServer(t, ShootServerOptions{Clock: clk})
		s.AddShoot("a", []string{"a-0"})
		require.NoError(t, s.SetScenario("a", Scenario{Kind: Slow, Delay: time.Hour}))
		ctx, cancel := context.WithCancel(t.Context())
		listed := make(chan error, 1)
		go func() {
			_, err := listNodes(ctx, clientFor(t, restConfig(t, s, "a")))
			listed <- err
		}()
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		cancel()
		assert.ErrorIs(t, <-listed, context.Canceled)
		require.Eventually(t, func() bool { return s.Stats().Abandoned == 1 }, 5*time.Second, time.Millisecond)
	})
}

func TestShootServerCounts(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	s.AddShoot("a", []string{"a-0"})
	s.AddShoot("b", []string{"b-0"})
	s.AddShoot("idle", nil)
	a, b := clientFor(t, restConfig(t, s, "a")), clientFor(t, restConfig(t, s, "b"))
	ctx := t.Context()

	_, err := a.Discovery().ServerVersion()
	require.NoError(t, err)
	_, err = listNodes(ctx, a)
	require.NoError(t, err)
	_, err = listLeases(ctx, a)
	require.NoError(t, err)
	_, err = b.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsNotFound(err), "unexpected error: %v", err)
	_, err = listNodes(ctx, clientFor(t, restConfig(t, s, "unknown")))
	assert.True(t, apierrors.IsNotFound(err), "unexpected error: %v", err)
	require.NoError(t, s.SetScenario("b", Scenario{Kind: Throttled}))
	assert.True(t, apierrors.IsTooManyRequests(getNodesOnce(ctx, b)))

	assert.Equal(t, map[string]uint64{"a": 3, "b": 2, "idle": 0}, s.Requests())
	assert.Equal(t, Stats{
		Total:      6,
		ByEndpoint: map[Endpoint]uint64{EndpointVersion: 1, EndpointNodes: 3, EndpointLeases: 1, EndpointOther: 1},
		ByCode:     map[int]uint64{http.StatusOK: 3, http.StatusNotFound: 2, http.StatusTooManyRequests: 1},
		NodeLists:  ListReads{Cached: 2},
		LeaseLists: ListReads{Cached: 1},
	}, s.Stats())
}

func TestShootServerRemoveShoot(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	s.AddShoot("a", []string{"a-0"})
	cs := clientFor(t, restConfig(t, s, "a"))
	_, err := listNodes(t.Context(), cs)
	require.NoError(t, err)

	s.RemoveShoot("a")
	_, err = listNodes(t.Context(), cs)
	assert.True(t, apierrors.IsNotFound(err), "unexpected error: %v", err)
	assert.Empty(t, s.Requests())
	assert.Error(t, s.SetScenario("a", Scenario{Kind: Down}))
}

func TestSetScenarioValidates(t *testing.T) {
	t.Parallel()
	s, err := NewShootServer(ShootServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	s.AddShoot("a", []string{"a-0"})
	tests := []struct {
		name     string
		shoot    string
		scenario Scenario
		wantErr  string
	}{
		{name: "valid", shoot: "a", scenario: Scenario{Kind: Slow, Delay: time.Second}},
		{name: "valid lies together", shoot: "a", scenario: Scenario{Kind: StaleCache, CacheLag: time.Minute, NodeClockOffset: -90 * time.Second,
			ServerClockOffset: time.Minute, ExtraLeases: 10, ExtraNodes: 10}},
		{name: "unknown shoot", shoot: "b", scenario: Scenario{}, wantErr: `shoot "b" not found`},
		{name: "unknown kind", shoot: "a", scenario: Scenario{Kind: 7}, wantErr: "unknown scenario kind ScenarioKind(7)"},
		{name: "fraction above 1", shoot: "a", scenario: Scenario{Kind: Meltdown, ExpiredFraction: 1.5}, wantErr: "expiredFraction 1.5 is not in [0, 1]"},
		{name: "negative delay", shoot: "a", scenario: Scenario{Kind: Slow, Delay: -time.Second}, wantErr: "delay -1s is negative"},
		{name: "negative cache lag", shoot: "a", scenario: Scenario{Kind: StaleCache, CacheLag: -time.Second}, wantErr: "cacheLag -1s is negative"},
		{name: "retryAfter not whole seconds", shoot: "a", scenario: Scenario{Kind: Throttled, RetryAfter: 1500 * time.Millisecond},
			wantErr: "retryAfter 1.5s is not whole seconds"},
		{name: "a field of another kind", shoot: "a", scenario: Scenario{Kind: Healthy, Delay: time.Second, CacheLag: time.Second},
			wantErr: "delay is only for [Slow SlowBody], not Healthy\ncacheLag is only for [StaleCache], not Healthy"},
		{name: "fraction outside a Meltdown", shoot: "a", scenario: Scenario{Kind: Down, ExpiredFraction: 0.5}, wantErr: "expiredFraction is only for [Meltdown], not Down"},
		{name: "clock offset too large", shoot: "a", scenario: Scenario{ServerClockOffset: 25 * time.Hour}, wantErr: "serverClockOffset 25h0m0s is beyond ±24h0m0s"},
		{name: "negative extra objects", shoot: "a", scenario: Scenario{ExtraLeases: -1, ExtraNodes: maxExtraObjects + 1},
			wantErr: "extraLeases -1 is not in [0, 10000000]\nextraNodes 10000001 is not in [0, 10000000]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SetScenario(tt.shoot, tt.scenario)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestShootServerRecordsWhoAsksAndSinceWhen(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", []string{"a-0"})
	s.AddShoot("idle", []string{"idle-0"})
	as := func(agent string) kubernetes.Interface {
		cfg := restConfig(t, s, "a")
		cfg.UserAgent = agent
		return clientFor(t, cfg)
	}
	one, two := as("dwd-prober/dev (dwd-0)"), as("dwd-prober/dev (dwd-1)")

	require.NoError(t, getNodesOnce(t.Context(), one))
	clk.Step(time.Second)
	require.NoError(t, getNodesOnce(t.Context(), one))
	assert.Equal(t, map[string]Caller{"a": {Agent: "dwd-prober/dev (dwd-0)", Since: t0, Last: t0.Add(time.Second)}}, s.Callers(),
		"a run of requests from one agent keeps its start; a shoot never asked is left out")

	clk.Step(time.Second)
	require.NoError(t, getNodesOnce(t.Context(), two))
	clk.Step(time.Second)
	require.NoError(t, getNodesOnce(t.Context(), two))
	assert.Equal(t, Caller{Agent: "dwd-prober/dev (dwd-1)", Since: t0.Add(2 * time.Second), Last: t0.Add(3 * time.Second)}, s.Callers()["a"],
		"another agent starts a new run")
}

// contentTypes records the Content-Type of every answer.
type contentTypes struct {
	next http.RoundTripper
	seen []string
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.seen = append(c.seen, resp.Header.Get("Content-Type"))
	}
	return resp, err
}

func TestShootServerAnswersListsInProtobufWhenAsked(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", []string{"a-0", "a-1", "a-2"})
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Meltdown, ExpiredFraction: 0.5}))
	clk.Step(time.Minute)

	cfg := restConfig(t, s, "a")
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	recorder := &contentTypes{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { recorder.next = rt; return recorder })
	viaProtobuf, viaJSON := clientFor(t, cfg), clientFor(t, restConfig(t, s, "a"))

	protoNodes, err := listNodes(t.Context(), viaProtobuf)
	require.NoError(t, err)
	jsonNodes, err := listNodes(t.Context(), viaJSON)
	require.NoError(t, err)
	assert.Equal(t, jsonNodes.Items, protoNodes.Items)

	protoLeases, err := listLeases(t.Context(), viaProtobuf)
	require.NoError(t, err)
	jsonLeases, err := listLeases(t.Context(), viaJSON)
	require.NoError(t, err)
	assert.Equal(t, renewTimes(jsonLeases.Items), renewTimes(protoLeases.Items), "the same scenario in both encodings")
	assert.Contains(t, renewTimes(protoLeases.Items), renewedAt("a-0", t0), "the meltdown shows")
	assert.Equal(t, []string{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"}, recorder.seen)
}

// listLeasesConsistently lists the node leases without a resourceVersion: a consistent read.
func listLeasesConsistently(ctx context.Context, cs kubernetes.Interface, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	return cs.CoordinationV1().Leases(nodeLeaseNamespace).List(ctx, opts)
}

func TestShootServerStaleCache(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	nodes := []string{"a-0", "a-1", "a-2"}
	s.AddShoot("a", nodes)
	cs := clientFor(t, restConfig(t, s, "a"))
	require.NoError(t, s.SetScenario("a", Scenario{Kind: StaleCache, CacheLag: time.Minute}))
	frozen := make([]time.Time, len(nodes))
	for i, n := range nodes {
		frozen[i] = renewedAt(n, t0.Add(-time.Minute))
	}

	for _, step := range []time.Duration{0, 25 * time.Second, 5 * time.Minute} {
		clk.Step(step)
		cached, err := listLeases(t.Context(), cs)
		require.NoError(t, err)
		assert.Equal(t, frozen, renewTimes(cached.Items), "the cache stopped a minute before the scenario was set and ages")
		fresh, err := listLeasesConsistently(t.Context(), cs, metav1.ListOptions{})
		require.NoError(t, err)
		for i, n := range nodes {
			assert.Equal(t, renewedAt(n, clk.Now()), fresh.Items[i].Spec.RenewTime.UTC(), "a consistent read is fresh")
		}
	}
	nodeList, err := listNodes(t.Context(), cs)
	require.NoError(t, err)
	assert.Len(t, nodeList.Items, 3, "nodes are answered from the cache as they are")
	_, err = cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)

	stats := s.Stats()
	assert.Equal(t, ListReads{Consistent: 3, Cached: 3}, stats.LeaseLists)
	assert.Equal(t, ListReads{Consistent: 1, Cached: 1}, stats.NodeLists)
}

func TestShootServerSlowBody(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", []string{"a-0", "a-1"})
	require.NoError(t, s.SetScenario("a", Scenario{Kind: SlowBody, Delay: 28 * time.Second}))
	httpClient, err := rest.HTTPClientFor(restConfig(t, s, "a"))
	require.NoError(t, err)

	_, err = listNodes(t.Context(), clientFor(t, restConfig(t, s, "a")))
	require.NoError(t, err, "only the lease list is held back")

	type result struct {
		resp *http.Response
		err  error
	}
	headers := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/shoots/a/"+leasesPath+"?resourceVersion=0", nil)
		resp, err := httpClient.Do(req)
		headers <- result{resp, err}
	}()
	got := <-headers // the headers arrive before the delay passes
	require.NoError(t, got.err)
	defer func() { _ = got.resp.Body.Close() }()
	assert.Equal(t, t0.Format(http.TimeFormat), got.resp.Header.Get("Date"), "dated when served")
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.Step(28 * time.Second)
	data, err := io.ReadAll(got.resp.Body)
	require.NoError(t, err)
	list := &coordinationv1.LeaseList{}
	require.NoError(t, json.Unmarshal(data, list))
	assert.Equal(t, []time.Time{renewedAt("a-0", t0), renewedAt("a-1", t0)}, renewTimes(list.Items),
		"the renewTimes of when the list was served, 28 s before it arrived")
}

func TestShootServerClockOffsets(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk, Token: "right"})
	s.AddShoot("a", []string{"a-0", "a-1"})
	require.NoError(t, s.SetScenario("a", Scenario{NodeClockOffset: -90 * time.Second, ServerClockOffset: time.Minute}))
	cs := clientFor(t, restConfig(t, s, "a"))

	leases, err := listLeases(t.Context(), cs)
	require.NoError(t, err)
	assert.Equal(t, []time.Time{renewedAt("a-0", t0).Add(-90 * time.Second), renewedAt("a-1", t0).Add(-90 * time.Second)}, renewTimes(leases.Items),
		"the kubelets write their own clocks")

	httpClient, err := rest.HTTPClientFor(restConfig(t, s, "a"))
	require.NoError(t, err)
	date := func(path, token string) string {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.Header.Get("Date")
	}
	ahead, server := t0.Add(time.Minute).Format(http.TimeFormat), t0.Format(http.TimeFormat)
	assert.Equal(t, ahead, date("/shoots/a/version", "right"), "200")
	assert.Equal(t, ahead, date("/shoots/a/"+leasesPath, "right"), "200, a list")
	assert.Equal(t, ahead, date("/shoots/a/version", "wrong"), "401")
	assert.Equal(t, ahead, date("/shoots/a/api/v1/pods", "right"), "404")
	assert.Equal(t, server, date("/shoots/unknown/version", "right"), "no shoot: the server's own clock")
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Throttled, RetryAfter: 3 * time.Second, ServerClockOffset: -time.Hour}))
	assert.Equal(t, t0.Add(-time.Hour).Format(http.TimeFormat), date("/shoots/a/version", "right"), "429")
}

func TestShootServerThrottledRetryAfter(t *testing.T) {
	t.Parallel()
	s := startShootServer(t, ShootServerOptions{})
	s.AddShoot("a", []string{"a-0"})
	require.NoError(t, s.SetScenario("a", Scenario{Kind: Throttled, RetryAfter: 7 * time.Second}))
	err := getNodesOnce(t.Context(), clientFor(t, restConfig(t, s, "a")))
	delay, ok := apierrors.SuggestsClientDelay(err)
	assert.True(t, ok, "unexpected error: %v", err)
	assert.Equal(t, 7, delay)
}

func TestShootServerExtraObjects(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0.Add(4 * time.Second))
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", []string{"a-0", "a-1"})
	require.NoError(t, s.SetScenario("a", Scenario{ExtraLeases: 5, ExtraNodes: 3}))
	for _, proto := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", proto), func(t *testing.T) {
			cfg := restConfig(t, s, "a")
			if proto {
				cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
			}
			cs := clientFor(t, cfg)
			leases, err := listLeases(t.Context(), cs)
			require.NoError(t, err)
			require.Len(t, leases.Items, 7)
			var names []string
			for _, l := range leases.Items {
				names = append(names, l.Name)
			}
			assert.Equal(t, []string{"a-0", "a-1", "extra-lease-0", "extra-lease-1", "extra-lease-2", "extra-lease-3", "extra-lease-4"}, names)
			assert.Equal(t, t0, leases.Items[6].Spec.RenewTime.UTC(), "extra leases are fresh, renewed together")
			nodes, err := listNodes(t.Context(), cs)
			require.NoError(t, err)
			require.Len(t, nodes.Items, 5)
			assert.Equal(t, "extra-node-2", nodes.Items[4].Name)
		})
	}
}

func TestShootServerPaginatesConsistentLists(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	nodes := []string{"a-0", "a-1", "a-2"}
	s.AddShoot("a", nodes)
	require.NoError(t, s.SetScenario("a", Scenario{ExtraLeases: 4, ExtraNodes: 2}))
	cs := clientFor(t, restConfig(t, s, "a"))

	var names []string
	var times []time.Time
	opts := metav1.ListOptions{Limit: 3}
	for page := 0; ; page++ {
		list, err := listLeasesConsistently(t.Context(), cs, opts)
		require.NoError(t, err)
		require.LessOrEqual(t, len(list.Items), 3)
		for _, l := range list.Items {
			names, times = append(names, l.Name), append(times, l.Spec.RenewTime.UTC())
		}
		if list.Continue == "" {
			assert.Nil(t, list.RemainingItemCount)
			break
		}
		assert.Equal(t, int64(7-3*(page+1)), *list.RemainingItemCount)
		opts.Continue = list.Continue
		clk.Step(time.Minute) // later pages show the first page's moment
	}
	assert.Equal(t, []string{"a-0", "a-1", "a-2", "extra-lease-0", "extra-lease-1", "extra-lease-2", "extra-lease-3"}, names)
	assert.Equal(t, []time.Time{renewedAt("a-0", t0), renewedAt("a-1", t0), renewedAt("a-2", t0), t0, t0, t0, t0}, times)

	t.Run("a cached read ignores the limit, as the watch cache does", func(t *testing.T) {
		list, err := cs.CoordinationV1().Leases(nodeLeaseNamespace).List(t.Context(), metav1.ListOptions{ResourceVersion: "0", Limit: 3})
		require.NoError(t, err)
		assert.Len(t, list.Items, 7)
		assert.Empty(t, list.Continue)
	})
	t.Run("nodes too", func(t *testing.T) {
		list, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{Limit: 4})
		require.NoError(t, err)
		assert.Len(t, list.Items, 4)
		require.NotEmpty(t, list.Continue)
		list, err = cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{Limit: 4, Continue: list.Continue})
		require.NoError(t, err)
		assert.Equal(t, "extra-node-1", list.Items[0].Name)
		assert.Empty(t, list.Continue)
	})
	t.Run("a broken continue token is a bad request", func(t *testing.T) {
		_, err := listLeasesConsistently(t.Context(), cs, metav1.ListOptions{Limit: 3, Continue: "garbage!"})
		assert.True(t, apierrors.IsBadRequest(err), "unexpected error: %v", err)
	})
	t.Run("a token past a shrunk list is gone", func(t *testing.T) {
		_, err := listLeasesConsistently(t.Context(), cs, metav1.ListOptions{Limit: 3, Continue: continueToken(100, t0)})
		assert.True(t, apierrors.IsResourceExpired(err) || apierrors.IsGone(err), "unexpected error: %v", err)
	})
}
