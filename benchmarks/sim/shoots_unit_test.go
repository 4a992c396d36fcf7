package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

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
	assert.Equal(t, []string{"Healthy", "Meltdown", "Down", "Slow", "Throttled", "StaleCache", "SlowBody", "ScenarioKind(7)", "ScenarioKind(-1)"},
		[]string{Healthy.String(), Meltdown.String(), Down.String(), Slow.String(), Throttled.String(), StaleCache.String(),
			SlowBody.String(), ScenarioKind(7).String(), ScenarioKind(-1).String()})
}

func TestParseScenarioKind(t *testing.T) {
	t.Parallel()
	for k := Healthy; k <= SlowBody; k++ {
		got, err := ParseScenarioKind(strings.ToLower(k.String()))
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	_, err := ParseScenarioKind("Lying")
	assert.ErrorContains(t, err, `unknown scenario kind "Lying" (Healthy, Meltdown, Down, Slow, Throttled, StaleCache, SlowBody)`)
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
	t.Run("negative RenewInterval", func(t *testing.T) {
		_, err := NewShootServer(ShootServerOptions{RenewInterval: -time.Second})
		assert.EqualError(t, err, "renewInterval -1s is negative")
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

// protobufCodec encodes objects as the API server does for a client that accepts protobuf: the lists
// the server assembles must be what it encodes.
var protobufCodec = func() *protobuf.Serializer {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	return protobuf.NewSerializer(scheme, scheme)
}()

// mustProtobuf encodes an object, which has its TypeMeta set, in the API server's protobuf envelope.
func mustProtobuf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, protobufCodec.Encode(obj, &buf))
	return buf.Bytes()
}

// joined is a body's bytes.
func joined(b body) []byte {
	var buf bytes.Buffer
	_ = b.writeTo(&buf)
	return buf.Bytes()
}

func TestListBodyEncodesWhatTheCodecDoes(t *testing.T) {
	t.Parallel()
	renew := time.Date(2026, 7, 1, 12, 0, 0, 123456000, time.UTC)
	leases := make([]coordinationv1.Lease, 5)
	nodes := make([]corev1.Node, 5)
	for i := range leases {
		leases[i] = *nodeLease(fmt.Sprintf("n-%d", i), renew.Add(time.Duration(i)*time.Second))
		nodes[i] = *node(fmt.Sprintf("n-%d", i), renew, 0)
	}
	tests := []struct {
		name string
		meta metav1.ListMeta
		cuts []int // the runs the items are split into
	}{
		{name: "empty"},
		{name: "one run", cuts: []int{5}},
		{name: "empty runs between", cuts: []int{0, 2, 2, 5}},
		{name: "a page", meta: metav1.ListMeta{Continue: "next", RemainingItemCount: ptr.To[int64](7)}, cuts: []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := 0
			if len(tt.cuts) > 0 {
				last = tt.cuts[len(tt.cuts)-1]
			}
			for enc := range encodings {
				leaseRuns, nodeRuns := runsOf(enc, leases, tt.cuts), runsOf(enc, nodes, tt.cuts)
				leaseList := &coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{APIVersion: leaseListType.APIVersion, Kind: leaseListType.Kind}, ListMeta: tt.meta, Items: leases[:last]}
				nodeList := &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: nodeListType.APIVersion, Kind: nodeListType.Kind}, ListMeta: tt.meta, Items: nodes[:last]}
				gotLeases := listBody(enc, leaseListType, tt.meta, leaseRuns...)
				gotNodes := listBody(enc, nodeListType, tt.meta, nodeRuns...)
				if enc == jsonEncoding {
					leaseList.Items, nodeList.Items = append([]coordinationv1.Lease{}, leaseList.Items...), append([]corev1.Node{}, nodeList.Items...)
					assert.Equal(t, string(mustMarshal(leaseList)), string(joined(gotLeases)))
					assert.Equal(t, string(mustMarshal(nodeList)), string(joined(gotNodes)))
				} else {
					assert.Equal(t, mustProtobuf(t, leaseList), joined(gotLeases))
					assert.Equal(t, mustProtobuf(t, nodeList), joined(gotNodes))
				}
				assert.Len(t, joined(gotLeases), gotLeases.len())
			}
		})
	}
}

// runsOf encodes items [0, cuts[0]), [cuts[0], cuts[1]), ... as runs, through spans of one run.
func runsOf[T any, P interface {
	*T
	protobufObject
}](enc encoding, items []T, cuts []int) [][]byte {
	all := &itemRun{}
	for i := range items {
		all.add(enc, P(&items[i]))
	}
	var runs [][]byte
	from := 0
	for _, to := range cuts {
		runs = append(runs, all.span(from, to))
		from = to
	}
	return runs
}

func TestRenewTimes(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Second
	tests := []struct {
		name  string
		at    time.Time
		phase time.Duration
		want  time.Time
	}{
		{name: "at a renew instant", at: t0.Add(3 * time.Second), phase: 3 * time.Second, want: t0.Add(3 * time.Second)},
		{name: "just after", at: t0.Add(3*time.Second + time.Millisecond), phase: 3 * time.Second, want: t0.Add(3 * time.Second)},
		{name: "just before the next", at: t0.Add(13*time.Second - time.Nanosecond), phase: 3 * time.Second, want: t0.Add(3 * time.Second)},
		{name: "phase after at within the interval", at: t0.Add(time.Second), phase: 3 * time.Second, want: t0.Add(-7 * time.Second)},
		{name: "before 1970", at: time.Unix(-25, 0), phase: 0, want: time.Unix(-30, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.True(t, tt.want.Equal(lastRenew(tt.at, tt.phase, interval)), "got %v", lastRenew(tt.at, tt.phase, interval))
		})
	}
	t.Run("phases are stable, in range, in whole milliseconds and spread", func(t *testing.T) {
		seen := map[time.Duration]bool{}
		for i := range 100 {
			name := fmt.Sprintf("shoot--p--s-node-%d", i)
			p := renewPhase(name, interval)
			assert.Equal(t, p, renewPhase(name, interval))
			assert.True(t, p >= 0 && p < interval, "phase %v", p)
			assert.Zero(t, p%time.Millisecond)
			seen[p] = true
		}
		assert.Greater(t, len(seen), 90)
	})
	t.Run("an expired lease stands still at its last renewal before the melt; offsets shift every renewTime", func(t *testing.T) {
		at := t0.Add(5*time.Second + 1500*time.Nanosecond)
		lt := leaseTimes{interval: interval, nodeClockOffset: -90 * time.Second}
		stopped := kubelet{}.next(true, at, 0, interval)
		assert.Equal(t, t0.Add(-90*time.Second), lt.node(at, 0, stopped))
		assert.Equal(t, lt.node(at, 0, stopped), lt.node(at.Add(time.Hour), 0, stopped), "a stopped kubelet does not renew")
		assert.Equal(t, t0.Add(-90*time.Second+2*time.Second), lt.node(at, 2*time.Second, kubelet{}))
		assert.Equal(t, t0.Add(-90*time.Second), lt.extra(at))
	})
}

func TestKubeletRenewsOnlyWhileItRuns(t *testing.T) {
	t.Parallel()
	const interval, phase = 10 * time.Second, 4 * time.Second
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	stop := at(7)    // last renewal at 4
	resume := at(45) // renew instants 44, 54: the first after the resume is 54
	stopped := kubelet{}.next(true, stop, phase, interval)
	resumed := stopped.next(false, resume, phase, interval)
	again := resumed.next(true, at(50), phase, interval) // stopped again before renewing
	for _, tc := range []struct {
		name string
		k    kubelet
		at   time.Time
		want time.Time
	}{
		{name: "renewing", k: kubelet{}, at: at(27), want: at(24)},
		{name: "stopped: its last renewal before the stop", k: stopped, at: at(100), want: at(4)},
		{name: "stopped, a read of a moment before the stop", k: stopped, at: at(6), want: at(4)},
		{name: "resumed, before its first renew instant since", k: resumed, at: at(50), want: at(4)},
		{name: "resumed, at its first renew instant since", k: resumed, at: at(54), want: at(54)},
		{name: "resumed, later", k: resumed, at: at(71), want: at(64)},
		{name: "resumed, a read of a moment before the stop", k: resumed, at: at(5), want: at(4)},
		{name: "stopped again before it renewed: the same renewal", k: again, at: at(100), want: at(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.k.renewal(tc.at, phase, interval))
		})
	}
	assert.Equal(t, stopped, stopped.next(true, at(30), phase, interval), "a stopped kubelet melted again keeps its stop")
	assert.Equal(t, kubelet{}, kubelet{}.next(false, at(30), phase, interval), "a running one keeps running")
}

func TestParseListRead(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_780_000_000, 123).UTC()
	token := continueToken(4, at)
	tests := []struct {
		query   string
		want    listRead
		wantErr string
	}{
		{query: "", want: listRead{}},
		{query: "resourceVersion=", want: listRead{}},
		{query: "resourceVersion=0", want: listRead{cached: true}},
		{query: "resourceVersion=0&limit=5", want: listRead{cached: true}},
		{query: "resourceVersion=42&limit=5", want: listRead{cached: true, limit: 5}},
		{query: "limit=5", want: listRead{limit: 5}},
		{query: "limit=0", want: listRead{}},
		{query: "limit=-3", want: listRead{}},
		{query: "limit=5&continue=" + token, want: listRead{limit: 5, offset: 4, at: at}},
		{query: "limit=five", wantErr: `bad request: limit "five" is not a number`},
		{query: "resourceVersion=0&continue=" + token, wantErr: "not allowed when using continue"},
		{query: "continue=%21%21", wantErr: "continue key is not valid"},
		{query: "continue=" + base64Text("x/1"), wantErr: "continue key is not valid"},
		{query: "continue=" + base64Text("-1/1"), wantErr: "continue key is not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			got, err := parseListRead(q)
			if tt.wantErr != "" {
				assert.ErrorIs(t, err, errBadRequest)
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// base64Text is a continue token of any text.
func base64Text(s string) string {
	return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s)))
}

func TestPage(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_780_000_000, 0).UTC()
	tests := []struct {
		name             string
		read             listRead
		total            int
		wantFrom, wantTo int
		wantNext         int // -1: the last page
		wantErr          error
	}{
		{name: "all", read: listRead{}, total: 5, wantFrom: 0, wantTo: 5, wantNext: -1},
		{name: "first page", read: listRead{limit: 2}, total: 5, wantFrom: 0, wantTo: 2, wantNext: 2},
		{name: "middle page", read: listRead{limit: 2, offset: 2, at: at}, total: 5, wantFrom: 2, wantTo: 4, wantNext: 4},
		{name: "last page, short", read: listRead{limit: 2, offset: 4, at: at}, total: 5, wantFrom: 4, wantTo: 5, wantNext: -1},
		{name: "last page, exact", read: listRead{limit: 5}, total: 5, wantFrom: 0, wantTo: 5, wantNext: -1},
		{name: "past the end", read: listRead{limit: 2, offset: 6, at: at}, total: 5, wantErr: errGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to, meta, err := tt.read.page(tt.total, at)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int{tt.wantFrom, tt.wantTo}, []int{from, to})
			if tt.wantNext < 0 {
				assert.Equal(t, metav1.ListMeta{}, meta)
				return
			}
			assert.Equal(t, metav1.ListMeta{Continue: continueToken(tt.wantNext, at), RemainingItemCount: ptr.To(int64(tt.total - tt.wantNext))}, meta)
		})
	}
}

func TestExtraLeasesAreEncodedOncePerRenew(t *testing.T) {
	t.Parallel()
	e := &extraLeases{}
	first := e.run(protobufEncoding, 3, t0)
	assert.Equal(t, 3, first.len())
	assert.Same(t, first, e.run(protobufEncoding, 3, t0), "the same renew: encoded once")
	assert.NotSame(t, first, e.run(jsonEncoding, 3, t0), "each encoding on its own")
	next := e.run(protobufEncoding, 3, t0.Add(10*time.Second))
	assert.NotSame(t, first, next, "the next renew: encoded again")
	list := &coordinationv1.LeaseList{}
	require.NoError(t, runtime.DecodeInto(protobufCodec, joined(listBody(protobufEncoding, leaseListType, metav1.ListMeta{}, next.data)), list))
	require.Len(t, list.Items, 3)
	assert.Equal(t, []string{"extra-lease-0", "extra-lease-1", "extra-lease-2"}, []string{list.Items[0].Name, list.Items[1].Name, list.Items[2].Name})
	assert.Equal(t, t0.Add(10*time.Second), list.Items[2].Spec.RenewTime.UTC())
}

func TestProberConfigWithChangesOnlyTheTimings(t *testing.T) {
	assert.Equal(t, ProberConfig, ProberConfigWith(2*time.Second, 5*time.Second, 40*time.Second, 2*time.Second))
	c := ProberConfigWith(time.Second, 10*time.Second, 20*time.Second, 0)
	for _, want := range []string{"probeInterval: 1s", "probeTimeout: 10s", "kcmNodeMonitorGraceDuration: 20s", "initialDelay: 0s}"} {
		assert.Contains(t, c, want)
	}
}

// The simulated shoots' names differ as real ones do, so that FNV-1a range partitions, which clump
// names that differ only in their last characters, spread them as they spread a real seed's.
func TestShootNamesAreDistinctAndSpreadOverRangePartitions(t *testing.T) {
	seen := map[string]bool{}
	partitions := sharding.Partitions{Function: sharding.PartitionFNVRange, Count: sharding.DefaultPartitionCount}
	used := map[int]bool{}
	for i := range 5000 {
		name := ShootName(i)
		require.False(t, seen[name], "%s twice", name)
		require.Regexp(t, `^shoot--sim--[0-9a-z]{6}$`, name)
		seen[name] = true
		used[partitions.Of(name)] = true
	}
	assert.Greater(t, len(used), 850, "partitions with a shoot, of %d", partitions.Count)
}
