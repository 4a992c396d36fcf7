package weeder_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkSteadyStateMemory measures the heap a weeder replica holds for many shoot namespaces in
// steady state: each namespace has a ready etcd-main-client and kube-apiserver slice, and no window
// is open. The figure is the heap growth from before the replica started to after its caches synced
// and its partitions were acquired, per namespace.
func BenchmarkSteadyStateMemory(b *testing.B) {
	env.Require(b)
	const namespaces = 1000
	names := make([]string, namespaces)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range names {
		names[i] = fmt.Sprintf("shoot--mem--%04d", i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
			if err := env.Client.Create(context.Background(), ns); err != nil {
				b.Error(err)
				return
			}
			setSlice(b, names[i], "etcd-main-client", true)
			setSlice(b, names[i], "kube-apiserver", true)
		})
	}
	wg.Wait()
	for b.Loop() {
		before := heap()
		// Windows of a millisecond: the windows a fresh replica opens for the ready services are gone
		// at once, and what stays is the steady state.
		r := startReplica(b, "default", "dwd-mem", weederConfig(b, time.Millisecond), 1)
		require.Eventually(b, func() bool { return r.Owns(names[namespaces-1]) && len(r.Weeder.Running()) == 0 },
			5*time.Minute, 50*time.Millisecond)
		after := heap()
		b.ReportMetric(float64(after-before)/namespaces, "heap-bytes/namespace")
		r.Stop()
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
