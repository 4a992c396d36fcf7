package weeder

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var trackerT0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// endpointSliceOf builds a slice of service in namespace with one endpoint per ready condition
// (nil: unset).
func endpointSliceOf(namespace, service, name string, ready ...*bool) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace,
		Name:      name,
		Labels:    map[string]string{discoveryv1.LabelServiceName: service},
	}}
	for _, r := range ready {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: r},
		})
	}
	return slice
}

// trackerStep feeds one slice to a Tracker and states what must follow.
type trackerStep struct {
	forget      bool
	slice       *discoveryv1.EndpointSlice
	turnedReady bool
	ready       bool // of the slice's service, after the step
}

func TestTracker(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	etcd := func(name string, ready ...*bool) *discoveryv1.EndpointSlice {
		return endpointSliceOf("shoot--a", "etcd-main-client", name, ready...)
	}
	tests := []struct {
		name  string
		steps []trackerStep
	}{
		{"first seen ready", []trackerStep{{slice: etcd("s1", yes), turnedReady: true, ready: true}}},
		{"first seen not ready", []trackerStep{{slice: etcd("s1", no)}}},
		{"nil ready condition counts as ready", []trackerStep{{slice: etcd("s1", nil), turnedReady: true, ready: true}}},
		{"one ready endpoint among not ready ones", []trackerStep{{slice: etcd("s1", no, yes, no), turnedReady: true, ready: true}}},
		{"empty slice is not ready", []trackerStep{{slice: etcd("s1")}}},
		{"ready slice and not ready slice", []trackerStep{
			{slice: etcd("s1", no)},
			{slice: etcd("s2", yes), turnedReady: true, ready: true},
			{slice: etcd("s1", no), ready: true},
		}},
		{"empty slice does not hide a ready one", []trackerStep{
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
			{slice: etcd("s2"), ready: true},
		}},
		{"update that stays ready opens nothing", []trackerStep{
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
			{slice: etcd("s1", yes, yes), ready: true},
			{slice: etcd("s1", nil), ready: true},
		}},
		{"ready, not ready, ready", []trackerStep{
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
			{slice: etcd("s1", no)},
			{slice: etcd("s1", no, yes), turnedReady: true, ready: true},
		}},
		{"delete never turns ready", []trackerStep{
			{slice: etcd("s1", no)},
			{slice: etcd("s2", yes), turnedReady: true, ready: true},
			{forget: true, slice: etcd("s1", no), ready: true},
			{forget: true, slice: etcd("s2", yes)},
			{forget: true, slice: etcd("s2", yes)},
		}},
		{"delete of the ready slice turns not ready", []trackerStep{
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
			{slice: etcd("s2", no), ready: true},
			{forget: true, slice: etcd("s1", yes)},
			{slice: etcd("s2", yes), turnedReady: true, ready: true},
		}},
		{"recreated ready after all slices were deleted", []trackerStep{
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
			{forget: true, slice: etcd("s1", yes)},
			{slice: etcd("s1", yes), turnedReady: true, ready: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker := NewTracker()
			want := ServiceKey{Namespace: "shoot--a", Service: "etcd-main-client"}
			for i, step := range tt.steps {
				var key ServiceKey
				turnedReady := false
				if step.forget {
					key = tracker.Forget(step.slice)
				} else {
					key, turnedReady = tracker.Observe(step.slice, trackerT0)
				}
				assert.Equal(t, want, key, "step %d", i)
				assert.Equal(t, step.turnedReady, turnedReady, "step %d: turnedReady", i)
				assert.Equal(t, step.ready, tracker.Ready(key), "step %d: Ready", i)
			}
		})
	}
}

func TestTrackerReadySince(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	key := ServiceKey{Namespace: "shoot--a", Service: "etcd-main-client"}
	at := func(s int) time.Time { return trackerT0.Add(time.Duration(s) * time.Second) }
	tracker := NewTracker()
	_, ok := tracker.ReadySince(key)
	assert.False(t, ok, "not tracked: not ready")

	tracker.Observe(endpointSliceOf(key.Namespace, key.Service, "s1", no), at(1))
	_, ok = tracker.ReadySince(key)
	assert.False(t, ok, "not ready")

	steps := []struct {
		at    int
		slice *discoveryv1.EndpointSlice
		since int
	}{
		{2, endpointSliceOf(key.Namespace, key.Service, "s1", yes), 2},      // turned ready
		{3, endpointSliceOf(key.Namespace, key.Service, "s1", yes, yes), 2}, // stays ready
		{4, endpointSliceOf(key.Namespace, key.Service, "s2", yes), 2},      // another ready slice
	}
	for _, step := range steps {
		tracker.Observe(step.slice, at(step.at))
		since, ok := tracker.ReadySince(key)
		assert.True(t, ok)
		assert.Equal(t, at(step.since), since, "at %d", step.at)
	}
	tracker.Observe(endpointSliceOf(key.Namespace, key.Service, "s1", no), at(5))
	tracker.Forget(endpointSliceOf(key.Namespace, key.Service, "s2", yes))
	_, ok = tracker.ReadySince(key)
	assert.False(t, ok, "no ready endpoint left")
	tracker.Observe(endpointSliceOf(key.Namespace, key.Service, "s1", yes), at(6))
	since, _ := tracker.ReadySince(key)
	assert.Equal(t, at(6), since, "turned ready again")
}

func TestTrackerForgetsServiceWithLastSlice(t *testing.T) {
	tracker := NewTracker()
	tracker.Observe(endpointSliceOf("ns", "svc", "s1", ptr.To(true)), trackerT0)
	tracker.Observe(endpointSliceOf("ns", "svc", "s2", ptr.To(true)), trackerT0)
	require.Equal(t, 1, tracker.Len())

	tracker.Forget(endpointSliceOf("ns", "svc", "s1"))
	assert.Equal(t, 1, tracker.Len())
	tracker.Forget(endpointSliceOf("ns", "svc", "s2"))
	assert.Equal(t, 0, tracker.Len())
	assert.Empty(t, tracker.ReadyServices("ns"))
}

func TestTrackerIgnoresSliceWithoutServiceLabel(t *testing.T) {
	tracker := NewTracker()
	slice := endpointSliceOf("ns", "svc", "s1", ptr.To(true))
	delete(slice.Labels, discoveryv1.LabelServiceName)

	key, turnedReady := tracker.Observe(slice, trackerT0)
	assert.Equal(t, ServiceKey{}, key)
	assert.False(t, turnedReady)
	assert.Equal(t, ServiceKey{}, tracker.Forget(slice))
	assert.Equal(t, 0, tracker.Len())
	key, turnedReady = tracker.Observe(nil, trackerT0)
	assert.Equal(t, ServiceKey{}, key)
	assert.False(t, turnedReady)
}

func TestTrackerServicesAreIndependent(t *testing.T) {
	tracker := NewTracker()
	yes, no := ptr.To(true), ptr.To(false)
	for _, slice := range []*discoveryv1.EndpointSlice{
		endpointSliceOf("ns-a", "etcd-main-client", "etcd-1", yes),
		endpointSliceOf("ns-a", "kube-apiserver", "kas-1", no),
		endpointSliceOf("ns-b", "kube-apiserver", "kas-1", yes),
		endpointSliceOf("ns-b", "etcd-main-client", "etcd-1", yes),
	} {
		_, turnedReady := tracker.Observe(slice, trackerT0)
		assert.Equal(t, *slice.Endpoints[0].Conditions.Ready, turnedReady, "%s/%s", slice.Namespace, slice.Name)
	}
	assert.Equal(t, 4, tracker.Len())
	assert.Equal(t, []string{"etcd-main-client"}, tracker.ReadyServices("ns-a"))
	assert.Equal(t, []string{"etcd-main-client", "kube-apiserver"}, tracker.ReadyServices("ns-b"))

	// Same slice name, other namespace: only ns-b's service changes.
	_, turnedReady := tracker.Observe(endpointSliceOf("ns-b", "kube-apiserver", "kas-1", no), trackerT0)
	assert.False(t, turnedReady)
	assert.False(t, tracker.Ready(ServiceKey{Namespace: "ns-b", Service: "kube-apiserver"}))
	assert.True(t, tracker.Ready(ServiceKey{Namespace: "ns-a", Service: "etcd-main-client"}))
	assert.Empty(t, tracker.ReadyServices("ns-c"))
}

func TestTrackerConcurrentUse(t *testing.T) {
	tracker := NewTracker()
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				slice := endpointSliceOf(fmt.Sprintf("ns-%d", i%10), "svc", fmt.Sprintf("s-%d", w), ptr.To(i%2 == 0))
				tracker.Observe(slice, trackerT0)
				tracker.ReadyServices(slice.Namespace)
				tracker.ReadySince(ServiceKey{Namespace: slice.Namespace, Service: "svc"})
				tracker.Ready(ServiceKey{Namespace: slice.Namespace, Service: "svc"})
				tracker.Forget(slice)
			}
		}()
	}
	for range 4 {
		<-done
	}
	assert.Equal(t, 0, tracker.Len())
}

// shootSlices returns one ready slice for each of two services in each of n namespaces.
func shootSlices(n int) []*discoveryv1.EndpointSlice {
	all := make([]*discoveryv1.EndpointSlice, 0, 2*n)
	for i := range n {
		namespace := fmt.Sprintf("shoot--project-%04d--cluster", i)
		all = append(all,
			endpointSliceOf(namespace, "etcd-main-client", "etcd-main-client-x7k2p", ptr.To(true)),
			endpointSliceOf(namespace, "kube-apiserver", "kube-apiserver-q9m4z", ptr.To(true)))
	}
	return all
}

func TestTrackerHeap(t *testing.T) {
	const namespaces = 1000
	all := shootSlices(namespaces)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	tracker := NewTracker()
	for _, slice := range all {
		tracker.Observe(slice, trackerT0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Equal(t, 2*namespaces, tracker.Len())
	runtime.KeepAlive(tracker)
	runtime.KeepAlive(all)

	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("Tracker holds %d bytes of heap for %d namespaces x 2 services x 1 slice (%d bytes per service)",
		held, namespaces, held/(2*namespaces))
}

func BenchmarkTrackerObserve(b *testing.B) {
	ready := shootSlices(1000)
	notReady := shootSlices(1000)
	for _, slice := range notReady {
		slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	}
	b.Run("stays ready", func(b *testing.B) {
		tracker := NewTracker()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tracker.Observe(ready[i%len(ready)], trackerT0)
		}
	})
	b.Run("flips readiness", func(b *testing.B) {
		tracker := NewTracker()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if (i/len(ready))%2 == 0 {
				tracker.Observe(ready[i%len(ready)], trackerT0)
			} else {
				tracker.Observe(notReady[i%len(ready)], trackerT0)
			}
		}
	})
}

// BenchmarkTrackerReadyServices looks up one namespace's ready services among a large seed's, as a
// crash takeover does for every namespace of every partition it takes.
func BenchmarkTrackerReadyServices(b *testing.B) {
	const namespaces = 5000
	all := shootSlices(namespaces)
	tracker := NewTracker()
	for _, slice := range all {
		tracker.Observe(slice, trackerT0)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if got := tracker.ReadyServices(all[2*(i%namespaces)].Namespace); len(got) != 2 {
			b.Fatalf("ready services: %v", got)
		}
	}
}
