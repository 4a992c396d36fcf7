package dryrun

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// maxEntries bounds the overlays and the keys of Once each: a seed's dependents and crash-looping pods
// stay far below it; past it the oldest knowledge is dropped at once (a write may then be counted twice,
// never sent).
const maxEntries = 50_000

// Writes records the writes a replica in dry run does not send. The zero value is not usable: use New.
type Writes struct {
	log logr.Logger

	mu       sync.Mutex
	overlays map[objectKey]overlay
	once     map[string]struct{}
}

// objectKey names a resource: its Go type, namespace and name.
type objectKey struct{ kind, namespace, name string }

// overlay is a resource as a not-sent patch would have made it (JSON), while the resource is still at
// resourceVersion.
type overlay struct {
	resourceVersion string
	data            []byte
}

// New returns a Writes that logs to log, and registers dwd_dry_run_writes_total.
func New(log logr.Logger) *Writes {
	register()
	return &Writes{log: log, overlays: map[objectKey]overlay{}, once: map[string]struct{}{}}
}

func keyOf(obj client.Object) objectKey {
	return objectKey{fmt.Sprintf("%T", obj), obj.GetNamespace(), obj.GetName()}
}

// Patch records the JSON merge patch that would have been sent for obj (as read, at its
// resourceVersion) in a flow of direction (DirectionDown or DirectionUp), and sends nothing. obj becomes
// what the API server would have answered, and later reads of the resource see it (Overlay) until the
// resource changes. A patch that changes the replicas counts as KindScale in direction, one that changes
// only annotations as KindAnnotation.
func (w *Writes) Patch(obj client.Object, patch client.Patch, direction string) error {
	if patch.Type() != types.MergePatchType {
		return fmt.Errorf("dry run: a %s patch cannot be recorded, only a JSON merge patch", patch.Type())
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("dry run: the patch: %w", err)
	}
	before, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("dry run: the object: %w", err)
	}
	after, err := mergePatch(before, data)
	if err != nil {
		return fmt.Errorf("dry run: applying the patch: %w", err)
	}
	from, to := replicas(before), replicas(after)
	kind, dir := KindScale, direction
	if from == to {
		kind, dir = KindAnnotation, DirectionNone
	}
	rv := obj.GetResourceVersion()
	if err := replace(obj, after); err != nil {
		return fmt.Errorf("dry run: the patched object: %w", err)
	}
	w.mu.Lock()
	if len(w.overlays) >= maxEntries {
		clear(w.overlays)
	}
	w.overlays[keyOf(obj)] = overlay{resourceVersion: rv, data: after}
	w.mu.Unlock()
	w.count(kind, dir, klog.KObj(obj), "object", fmt.Sprintf("%T", obj), "replicas", to, "from", from, "patch", string(data))
	return nil
}

// Overlay makes obj, as just read, what the not-sent patches would have made of it, while the resource
// is still at the resourceVersion they were decided on; an overlay of a resource that changed since is
// dropped. obj is replaced, not changed in place: a cache may share its maps with it.
func (w *Writes) Overlay(obj client.Object) error {
	key := keyOf(obj)
	w.mu.Lock()
	o, ok := w.overlays[key]
	if ok && o.resourceVersion != obj.GetResourceVersion() {
		delete(w.overlays, key)
		ok = false
	}
	w.mu.Unlock()
	if !ok {
		return nil
	}
	return replace(obj, o.data)
}

// replace sets obj to the object data encodes, from the zero value: nothing of what obj held is
// written to, nor kept.
func replace(obj client.Object, data []byte) error {
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(data, obj)
}

// replicas returns spec.replicas of the object data encodes, or -1.
func replicas(data []byte) int64 {
	var o struct {
		Spec struct {
			Replicas *int64 `json:"replicas"`
		} `json:"spec"`
	}
	if json.Unmarshal(data, &o) != nil || o.Spec.Replicas == nil {
		return -1
	}
	return *o.Spec.Replicas
}

// Once records a write of kind and direction on obj that was not sent, unless one was recorded under key
// before: a pod the weeder would have deleted is seen again at each of its restarts, and would have been
// deleted once.
func (w *Writes) Once(key, kind, direction string, obj klog.KMetadata, keysAndValues ...any) bool {
	w.mu.Lock()
	_, seen := w.once[key]
	if !seen {
		if len(w.once) >= maxEntries {
			clear(w.once)
		}
		w.once[key] = struct{}{}
	}
	w.mu.Unlock()
	if !seen {
		w.count(kind, direction, klog.KObj(obj), keysAndValues...)
	}
	return !seen
}

// count counts and logs one write that was not sent.
func (w *Writes) count(kind, direction string, ref klog.ObjectRef, keysAndValues ...any) {
	writesTotal.WithLabelValues(kind, direction).Inc()
	w.log.Info("Dry run: not sent", append([]any{"kind", kind, "direction", direction, "target", ref}, keysAndValues...)...)
}

// Recorder returns an events.k8s.io recorder that records no Event: it logs and counts each.
func (w *Writes) Recorder() recorder.EventRecorder { return events{w} }

type events struct{ w *Writes }

func (e events) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	e.record(regarding, eventtype, reason, action, fmt.Sprintf(note, args...))
}

func (e events) AnnotatedEventf(regarding, _ runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	e.record(regarding, eventtype, reason, action, fmt.Sprintf(note, args...))
}

func (e events) record(regarding runtime.Object, eventtype, reason, action, note string) {
	ref := klog.ObjectRef{}
	if m, err := meta.Accessor(regarding); err == nil {
		ref = klog.KObj(m)
	}
	e.w.count(KindEvent, DirectionNone, ref, "type", eventtype, "reason", reason, "action", action, "note", note)
}
