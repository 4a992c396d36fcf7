package dryrun

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

func deployment(rv string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: "kube-controller-manager",
		ResourceVersion: rv, Annotations: annotations}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
}

func written(t *testing.T, kind, direction string) float64 {
	return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": kind, "direction": direction})
}

func scaleDown(rv string) client.Patch {
	return client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"`+rv+
		`","annotations":{"dwd/replicas":"2","dwd/meltdown":null}},"spec":{"replicas":0}}`))
}

// A not-sent scale-down makes the object what the API server would have answered, counts and logs it,
// and every later read of the resource sees it, whatever else changes of it (its status, its
// resourceVersion), until someone else changes a field the patch touched.
func TestAPatchNotSentIsWhatLaterReadsSeeUntilATouchedFieldChanges(t *testing.T) {
	lines := &logtest.Lines{}
	w := New(lines.Logger(0))
	down := written(t, KindScale, DirectionDown)

	obj := deployment("5", 2, map[string]string{"dwd/meltdown": "x", "other": "kept"})
	require.NoError(t, w.Patch(obj, scaleDown("5"), DirectionDown))
	assert.Equal(t, int32(0), *obj.Spec.Replicas)
	assert.Equal(t, map[string]string{"dwd/replicas": "2", "other": "kept"}, obj.Annotations)
	assert.Equal(t, down+1, written(t, KindScale, DirectionDown))
	assert.Len(t, lines.With(`"msg"="Dry run: not sent"`, `"kind"="scale"`, `"direction"="down"`, `"from"=2`, `"replicas"=0`), 1)

	// A cache hands out its own maps: the overlay replaces the read copy, and leaves them alone.
	shared := map[string]string{"dwd/meltdown": "x", "other": "kept"}
	read := deployment("5", 2, shared)
	require.NoError(t, w.Overlay(read))
	assert.Equal(t, int32(0), *read.Spec.Replicas)
	assert.Equal(t, "2", read.Annotations["dwd/replicas"])
	assert.Equal(t, map[string]string{"dwd/meltdown": "x", "other": "kept"}, shared, "the cache's map is untouched")

	statusChanged := deployment("6", 2, map[string]string{"dwd/meltdown": "x", "other": "changed"})
	statusChanged.Status.ReadyReplicas = 1
	require.NoError(t, w.Overlay(statusChanged))
	assert.Equal(t, int32(0), *statusChanged.Spec.Replicas, "another version, the touched fields unchanged: still what the patch made")
	assert.Equal(t, "changed", statusChanged.Annotations["other"], "what the patch did not touch is read as it is")
	assert.Equal(t, int32(1), statusChanged.Status.ReadyReplicas)

	scaledByOthers := deployment("7", 0, map[string]string{"dwd/meltdown": "x", "other": "kept"})
	require.NoError(t, w.Overlay(scaledByOthers))
	assert.Empty(t, scaledByOthers.Annotations["dwd/replicas"], "a touched field changed by someone else: read as it is")
	again := deployment("5", 2, map[string]string{"dwd/meltdown": "x", "other": "kept"})
	require.NoError(t, w.Overlay(again))
	assert.Equal(t, int32(2), *again.Spec.Replicas, "and the overlay is dropped")

	other := deployment("5", 2, nil)
	other.Name = "machine-controller-manager"
	require.NoError(t, w.Overlay(other))
	assert.Equal(t, int32(2), *other.Spec.Replicas, "another resource has no overlay")
}

// A scale-up that undoes a scale-down leaves nothing to overlay: the resource is read as it is.
func TestPatchesThatUndoEachOtherLeaveNoOverlay(t *testing.T) {
	w := New(logr.Discard())
	obj := deployment("5", 2, nil)
	require.NoError(t, w.Patch(obj, scaleDown("5"), DirectionDown))
	up := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"5","annotations":{"dwd/replicas":null}},"spec":{"replicas":2}}`))
	require.NoError(t, w.Patch(obj, up, DirectionUp))
	assert.Equal(t, int32(2), *obj.Spec.Replicas)
	assert.Empty(t, obj.Annotations)
	assert.Empty(t, w.overlays, "the two patches together change nothing")

	scaledByOthers := deployment("6", 3, nil)
	require.NoError(t, w.Overlay(scaledByOthers))
	assert.Equal(t, int32(3), *scaledByOthers.Spec.Replicas)
}

func TestAPatchOfAnnotationsOnlyCountsAsAnnotation(t *testing.T) {
	w := New(logr.Discard())
	before := written(t, KindAnnotation, DirectionNone)
	up := written(t, KindScale, DirectionUp)
	obj := deployment("7", 2, map[string]string{"dwd/replicas": "2"})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"7","annotations":{"dwd/replicas":null}}}`))
	require.NoError(t, w.Patch(obj, patch, DirectionUp))
	assert.Empty(t, obj.Annotations)
	assert.Equal(t, before+1, written(t, KindAnnotation, DirectionNone))
	assert.Equal(t, up, written(t, KindScale, DirectionUp))
}

func TestOnlyAMergePatchIsRecorded(t *testing.T) {
	w := New(logr.Discard())
	obj := deployment("7", 2, nil)
	err := w.Patch(obj, client.RawPatch(types.JSONPatchType, []byte(`[]`)), DirectionDown)
	assert.ErrorContains(t, err, "only a JSON merge patch")
	assert.Equal(t, int32(2), *obj.Spec.Replicas)
}

func TestOnceCountsAWriteOncePerKey(t *testing.T) {
	w := New(logr.Discard())
	before := written(t, KindPodDelete, DirectionNone)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: "etcd-client", UID: "u1"}}
	assert.True(t, w.Once("pod/u1", KindPodDelete, DirectionNone, pod))
	assert.False(t, w.Once("pod/u1", KindPodDelete, DirectionNone, pod))
	assert.True(t, w.Once("pod/u2", KindPodDelete, DirectionNone, pod))
	assert.Equal(t, before+2, written(t, KindPodDelete, DirectionNone))
}

func TestTheRecorderRecordsNoEventButCountsIt(t *testing.T) {
	lines := &logtest.Lines{}
	w := New(lines.Logger(0))
	before := written(t, KindEvent, DirectionNone)
	w.Recorder().Eventf(deployment("1", 0, nil), nil, corev1.EventTypeNormal, "ScaledDown", "Scale", "Scaled down from %d", 2)
	assert.Equal(t, before+1, written(t, KindEvent, DirectionNone))
	assert.Len(t, lines.With(`"reason"="ScaledDown"`, `"note"="Scaled down from 2"`, `"target"={"name"="kube-controller-manager"`), 1)
}

func TestMergePatch(t *testing.T) {
	for _, c := range []struct{ doc, patch, want string }{
		{`{"a":1,"b":{"c":1,"d":2}}`, `{"b":{"c":null,"e":3}}`, `{"a":1,"b":{"d":2,"e":3}}`},
		{`{"a":{"b":1}}`, `{"a":2}`, `{"a":2}`},
		{`{"a":1}`, `{"b":{"c":null}}`, `{"a":1,"b":{}}`},
	} {
		got, err := mergePatch([]byte(c.doc), []byte(c.patch))
		require.NoError(t, err)
		assert.JSONEq(t, c.want, string(got), c.patch)
	}
	_, err := mergePatch([]byte(`{}`), []byte(`[1]`))
	assert.Error(t, err)
}

func TestMetricsLint(t *testing.T) {
	metricstest.Lint(t, nil, writesTotal)
}

// Reads and not-sent patches of one resource may come at once (a probe's read beside a flow's write):
// the race detector finds no shared map written.
func TestReadsAndPatchesOfOneResourceMayRunAtOnce(t *testing.T) {
	w := New(logr.Discard())
	require.NoError(t, w.Patch(deployment("5", 2, nil), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)), DirectionDown))
	start, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-start
		for range 300 {
			_ = w.Overlay(deployment("5", 2, nil))
		}
	}()
	close(start)
	for i := range 300 {
		obj := deployment("5", 2, nil)
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"k%d":"v"}}}`, i)))
		require.NoError(t, w.Patch(obj, patch, DirectionDown))
	}
	<-done
}
