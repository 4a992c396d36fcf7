package scaler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

var env *test.Environment

func TestMain(m *testing.M) { os.Exit(test.Main(m, &env)) }

// The kinds of writes a client can make; a flow makes only patches of the resource itself.
const (
	opPatch = "patch"       // a JSON merge patch of the resource
	opOther = "other write" // any other write (an update, a write to a subresource): a flow makes none
)

// write is one write that a flow sent to the API server.
type write struct {
	op          string
	name        string
	replicas    *int32             // the replicas a patch sets; nil: unchanged
	annotations map[string]*string // the annotations a patch sets or removes (nil)
	err         error
}

// Writes as a test expects them.
func downWrite(name string, from int32) write {
	return write{op: opPatch, name: name, replicas: ptr.To[int32](0), annotations: map[string]*string{
		scaler.ReplicasAnnotation: ptr.To(fmt.Sprint(from)), scaler.MeltdownProtectionAnnotation: ptr.To("")}}
}

func upWrite(name string, to int32) write {
	w := unmarkWrite(name)
	w.replicas = ptr.To(to)
	return w
}

func unmarkWrite(name string) write {
	return write{op: opPatch, name: name, annotations: map[string]*string{
		scaler.ReplicasAnnotation: nil, scaler.MeltdownProtectionAnnotation: nil}}
}

// journal records the writes made through a client, in order, and lets a test act around them. Its
// hooks are set before a flow starts and may be called from several goroutines.
type journal struct {
	mu     sync.Mutex
	writes []write
	// before runs before a write; an error fails the write without sending it.
	before func(ctx context.Context, w write) error
	// after runs after a successful write.
	after func(w write)
	// ready makes every Deployment read report all its replicas ready, as a deployment controller would.
	ready bool
}

// funcs returns the interceptor functions that feed the journal.
func (j *journal) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if d, ok := obj.(*appsv1.Deployment); ok && err == nil && j.ready {
				d.Status.ReadyReplicas = ptr.Deref(d.Spec.Replicas, 1)
			}
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w := patchWrite(obj, patch)
			return j.do(ctx, w, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return j.do(ctx, write{op: opOther, name: obj.GetName()}, func() error { return c.Update(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return j.do(ctx, write{op: opOther, name: obj.GetName()}, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return j.do(ctx, write{op: opOther, name: obj.GetName()}, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	}
}

// patchWrite describes a merge patch of obj by the replicas and annotations it writes.
func patchWrite(obj client.Object, patch client.Patch) write {
	w := write{op: opPatch, name: obj.GetName()}
	data, err := patch.Data(obj)
	if err != nil {
		panic(err)
	}
	var body struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		panic(err)
	}
	w.replicas, w.annotations = body.Spec.Replicas, body.Metadata.Annotations
	return w
}

// do runs the hooks around one write and records it.
func (j *journal) do(ctx context.Context, w write, send func() error) error {
	if err := ctx.Err(); err != nil {
		return err // a cancelled flow must not write; a real client fails the same way
	}
	if j.before != nil {
		if err := j.before(ctx, w); err != nil {
			return err
		}
	}
	w.err = send()
	j.mu.Lock()
	j.writes = append(j.writes, w)
	j.mu.Unlock()
	if w.err == nil && j.after != nil {
		j.after(w)
	}
	return w.err
}

// done returns the successful writes, in order.
func (j *journal) done() []write {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []write
	for _, w := range j.writes {
		if w.err == nil {
			w.err = nil
			out = append(out, w)
		}
	}
	return out
}

// failed returns the writes that failed at the API server.
func (j *journal) failed() []write {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(j.writes), func(w write) bool { return w.err == nil })
}

// fixture is one test's namespace with a Scaler whose client is recorded by a journal.
type fixture struct {
	ns      string
	journal *journal
	events  *events.FakeRecorder
	scaler  *scaler.Scaler
}

// scaleRecorder checks that every Event of the Scaler has its action, and records it in a fake.
type scaleRecorder struct {
	*events.FakeRecorder
	t *testing.T
}

func (r scaleRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	assert.Equal(r.t, scaler.EventAction, action, "the action of Event %s", reason)
	r.FakeRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// newFixture returns a fixture in a new namespace, for the given resources.
func newFixture(t *testing.T, infos []config.DependentResourceInfo) *fixture {
	t.Helper()
	env.Require(t)
	f := &fixture{ns: env.Namespace(t)}
	f.reset(t, infos)
	return f
}

// reset gives the fixture a new Scaler, journal and recorder, as another replica would have.
func (f *fixture) reset(t *testing.T, infos []config.DependentResourceInfo) {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	f.journal = &journal{}
	f.events = events.NewFakeRecorder(100)
	f.scaler = &scaler.Scaler{
		Client:    interceptor.NewClient(c, f.journal.funcs()),
		Recorder:  scaleRecorder{FakeRecorder: f.events, t: t},
		Log:       testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
		Resources: infos,
	}
}

// create creates a Deployment with the given replicas and annotations.
func (f *fixture) create(t *testing.T, name string, replicas int32, annotations map[string]string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels),
		},
	}
	require.NoError(t, env.Client.Create(context.Background(), d))
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// get reads a Deployment from the API server.
func (f *fixture) get(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, d))
	return d
}

// state is what a test checks of a Deployment.
type state struct {
	replicas    int32
	annotations map[string]string
}

// state returns the replicas and the scaler's annotations of a Deployment.
func (f *fixture) state(t *testing.T, name string) state {
	t.Helper()
	d := f.get(t, name)
	s := state{replicas: ptr.Deref(d.Spec.Replicas, 1)}
	for _, k := range []string{scaler.ReplicasAnnotation, scaler.MeltdownProtectionAnnotation, scaler.IgnoreScalingAnnotation} {
		if v, ok := d.Annotations[k]; ok {
			if s.annotations == nil {
				s.annotations = map[string]string{}
			}
			s.annotations[k] = v
		}
	}
	return s
}

// recorded drains the Events recorded so far.
func (f *fixture) recorded() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// marks are the annotations of a resource scaled down from n replicas.
func marks(n string) map[string]string {
	return map[string]string{scaler.ReplicasAnnotation: n, scaler.MeltdownProtectionAnnotation: ""}
}

// withoutDelays returns a copy of infos without initial delays.
func withoutDelays(infos []config.DependentResourceInfo) []config.DependentResourceInfo {
	return withTimings(infos, 0, config.DefaultScaleTimeout)
}

// withTimings returns a copy of infos with the given initial delay and timeout in both directions.
func withTimings(infos []config.DependentResourceInfo, delay, timeout time.Duration) []config.DependentResourceInfo {
	out := make([]config.DependentResourceInfo, len(infos))
	for i, info := range infos {
		up, down := *info.ScaleUp, *info.ScaleDown
		for _, si := range []*config.ScaleInfo{&up, &down} {
			si.InitialDelay, si.Timeout = &metav1.Duration{Duration: delay}, &metav1.Duration{Duration: timeout}
		}
		info.ScaleUp, info.ScaleDown = &up, &down
		out[i] = info
	}
	return out
}

// only returns the entries of infos with the given names.
func only(infos []config.DependentResourceInfo, names ...string) []config.DependentResourceInfo {
	return slices.DeleteFunc(slices.Clone(infos), func(i config.DependentResourceInfo) bool {
		return !slices.Contains(names, i.Ref.Name)
	})
}

// index returns the position of the first write of name, failing when there is none.
func index(t *testing.T, writes []write, name string) int {
	t.Helper()
	i := slices.IndexFunc(writes, func(w write) bool { return w.name == name })
	require.GreaterOrEqual(t, i, 0, "no write of %s in %v", name, writes)
	return i
}
