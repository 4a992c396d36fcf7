package dryrun

import (
	"encoding/json"
	"fmt"
	"maps"
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

// overlay is what the not-sent patches of one resource would have made of it: their composition
// (without the resourceVersion precondition), and, for every field they touch (a path of the JSON
// object), the value the resource itself had there before the first of them ("" when it had none). It
// holds while the resource still has those values: whatever else changes (its status, a rollout), the
// patches would still have been applied; once someone else changed a touched field, they would have
// conflicted, and the resource is read as it is.
type overlay struct {
	patch map[string]any
	base  map[string]string
}

// New returns a Writes that logs to log, and registers dwd_dry_run_writes_total.
func New(log logr.Logger) *Writes {
	register()
	return &Writes{log: log, overlays: map[objectKey]overlay{}, once: map[string]struct{}{}}
}

func keyOf(obj client.Object) objectKey {
	return objectKey{fmt.Sprintf("%T", obj), obj.GetNamespace(), obj.GetName()}
}

// Patch records the JSON merge patch that would have been sent for obj (as read, through Overlay) in a
// flow of direction (DirectionDown or DirectionUp), and sends nothing. obj becomes what the API server
// would have answered, and later reads of the resource see it (Overlay) while the fields the patches
// touched keep the values they had. A patch that changes the replicas counts as KindScale in direction,
// one that changes only annotations as KindAnnotation.
func (w *Writes) Patch(obj client.Object, patch client.Patch, direction string) error {
	if patch.Type() != types.MergePatchType {
		return fmt.Errorf("dry run: a %s patch cannot be recorded, only a JSON merge patch", patch.Type())
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("dry run: the patch: %w", err)
	}
	p, err := patchOf(data)
	if err != nil {
		return fmt.Errorf("dry run: the patch: %w", err)
	}
	before, err := documentOf(obj)
	if err != nil {
		return fmt.Errorf("dry run: the object: %w", err)
	}
	from := replicas(before)
	after := merge(documentCopy(before), p).(map[string]any)
	to := replicas(after)
	w.record(keyOf(obj), before, after, p)
	if err := replace(obj, after); err != nil {
		return fmt.Errorf("dry run: the patched object: %w", err)
	}
	kind, dir := KindScale, direction
	if from == to {
		kind, dir = KindAnnotation, DirectionNone
	}
	w.count(kind, dir, klog.KObj(obj), "object", fmt.Sprintf("%T", obj), "replicas", to, "from", from, "patch", string(data))
	return nil
}

// record adds patch p, decided on before (the resource as read through its overlay), to the resource's
// overlay. Fields p touches for the first time have their values in before, which the overlay does not
// change. An overlay that, composed, changes nothing of the resource is dropped. The maps of an overlay
// are never changed once stored (Overlay reads them outside the lock): record stores new ones.
func (w *Writes) record(key objectKey, before, after, p map[string]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.overlays[key]
	if !ok && len(w.overlays) >= maxEntries {
		clear(w.overlays)
	}
	o.base = maps.Clone(o.base)
	if o.base == nil {
		o.base = map[string]string{}
	}
	for _, path := range leaves(p, nil) {
		if _, seen := o.base[path]; !seen {
			o.base[path] = valueAt(before, path)
		}
	}
	o.patch = compose(o.patch, p)
	if holds(o.base, after) {
		delete(w.overlays, key) // the patches, together, leave the resource as it is
		return
	}
	w.overlays[key] = o
}

// Overlay makes obj, as just read, what the not-sent patches would have made of it, while the fields
// they touch still have the values they had before them; an overlay of a resource whose touched fields
// someone else changed is dropped. obj is replaced, not changed in place: a cache may share its maps
// with it.
func (w *Writes) Overlay(obj client.Object) error {
	key := keyOf(obj)
	w.mu.Lock()
	o, ok := w.overlays[key]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	doc, err := documentOf(obj)
	if err != nil {
		return fmt.Errorf("dry run: the object: %w", err)
	}
	if !holds(o.base, doc) {
		w.mu.Lock()
		delete(w.overlays, key)
		w.mu.Unlock()
		return nil
	}
	return replace(obj, merge(doc, o.patch).(map[string]any))
}

// replace sets obj to the object doc holds, from the zero value: nothing of what obj held is written
// to, nor kept.
func replace(obj client.Object, doc map[string]any) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(data, obj)
}

// replicas returns spec.replicas of doc, or -1.
func replicas(doc map[string]any) int64 {
	spec, _ := doc["spec"].(map[string]any)
	n, ok := spec["replicas"].(float64)
	if !ok {
		return -1
	}
	return int64(n)
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
	if seen {
		w.log.V(1).Info("Dry run: counted before", "key", key, "target", klog.KObj(obj))
	} else {
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
