package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// dependent is one Deployment of the seed as one read saw it.
type dependent struct {
	uid        types.UID
	generation int64
	replicas   int32
}

// dependents is every Deployment of the seed at one moment, by namespace/name.
//
// The API server bumps a Deployment's metadata.generation at every write that changes its spec or
// its annotations, and every scale write of dwd changes both in one patch (see package scaler): so
// two reads tell exactly how many scale writes a dependent took in between, with no watch that could
// miss one. A watch can: one broken for a while re-lists and sees a scale-down followed by its
// scale-up as no change at all, which is how a soak round once found 27 shoots' dependents "never
// scaled" that it had seen at 0 and back.
type dependents map[string]dependent

// readDependents lists every Deployment of the seed, trying again for up to 30 s while the API
// server does not answer (it may just be back from an outage).
func (c *cluster) readDependents(ctx context.Context) (dependents, error) {
	var deps dependents
	var lastErr error
	err := until(ctx, 30*time.Second, func(ctx context.Context) bool {
		list := &appsv1.DeploymentList{}
		if lastErr = c.seed.Env.Client.List(ctx, list); lastErr != nil {
			return false
		}
		deps = make(dependents, len(list.Items))
		for _, d := range list.Items {
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			deps[d.Namespace+"/"+d.Name] = dependent{uid: d.UID, generation: d.Generation, replicas: replicas}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("listing the Deployments: %w", errors.Join(lastErr, err))
	}
	return deps, nil
}

// scalings checks the writes dwd made to the Deployments between two reads, own (the test's writes)
// left out: every dependent of a melted shoot was written exactly twice, scaled down once and up once
// (the scenario saw it at 0 and back); every other Deployment not at all. It returns the Deployments
// of shoots that did not melt that dwd wrote (spurious scalings), and what else is wrong.
func scalings(before, after dependents, melted map[string]bool, own map[string]int) (spurious []string, errs []error) {
	for _, key := range slices.Sorted(maps.Keys(after)) {
		now := after[key]
		was, ok := before[key]
		if !ok {
			errs = append(errs, fmt.Errorf("Deployment %s appeared during the round", key))
			continue
		}
		if now.uid != was.uid {
			errs = append(errs, fmt.Errorf("Deployment %s was deleted and created again during the round", key))
			continue
		}
		writes := int(now.generation-was.generation) - own[key]
		ns, _, _ := strings.Cut(key, "/")
		switch {
		case melted[ns] && writes != 2:
			errs = append(errs, fmt.Errorf("%s was written %d times by dwd (generation %d→%d, replicas %d→%d), not twice: scaled down once and up once",
				key, writes, was.generation, now.generation, was.replicas, now.replicas))
		case !melted[ns] && writes != 0:
			spurious = append(spurious, fmt.Sprintf("%s (written %d times, generation %d→%d, replicas %d→%d)",
				key, writes, was.generation, now.generation, was.replicas, now.replicas))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[key]; !ok {
			errs = append(errs, fmt.Errorf("Deployment %s disappeared during the round", key))
		}
	}
	return spurious, errs
}

func TestScalings(t *testing.T) {
	before := dependents{
		"s1/kcm": {generation: 3, replicas: 1}, "s1/mcm": {generation: 5, replicas: 1},
		"s2/kcm": {generation: 2, replicas: 1}, "s3/kcm": {generation: 7, replicas: 2},
	}
	after := dependents{
		"s1/kcm": {generation: 6, replicas: 1}, // down, the test's annotation, up
		"s1/mcm": {generation: 9, replicas: 1}, // down, up, down, up
		"s2/kcm": {generation: 4, replicas: 1}, // down and up, in a shoot that did not melt
		"s3/kcm": {generation: 7, replicas: 2},
	}
	spurious, errs := scalings(before, after, map[string]bool{"s1": true}, map[string]int{"s1/kcm": 1})
	require.Equal(t, []string{"s2/kcm (written 2 times, generation 2→4, replicas 1→1)"}, spurious)
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "s1/mcm was written 4 times by dwd (generation 5→9, replicas 1→1), not twice")

	// Without the test's own write, s1/kcm counts three writes of dwd.
	_, errs = scalings(before, after, map[string]bool{"s1": true}, nil)
	require.Len(t, errs, 2)
	require.ErrorContains(t, errs[0], "s1/kcm was written 3 times")

	delete(after, "s3/kcm")
	after["s4/kcm"] = dependent{generation: 1, replicas: 1}
	after["s2/kcm"] = dependent{uid: "new", generation: 1, replicas: 1}
	_, errs = scalings(before, after, nil, nil)
	require.ErrorContains(t, errors.Join(errs...), "s4/kcm appeared")
	require.ErrorContains(t, errors.Join(errs...), "s3/kcm disappeared")
	require.ErrorContains(t, errors.Join(errs...), "s2/kcm was deleted and created again")
}

// checkWritesCounted proves on the real API server what scalings relies on: a Deployment's generation
// counts every write of dwd's kind (replicas and annotations in one patch), made with no watch
// running, and none of the status writes of the seed's deployment controller, which it waits for.
func checkWritesCounted(ctx context.Context, c *cluster) error {
	const ns = "chaos-harness"
	if err := c.seed.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dependent"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dependent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "dependent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}},
			}},
	}
	if err := c.seed.Env.Client.Create(ctx, dep); err != nil {
		return err
	}
	defer func() { _ = c.seed.Env.Client.Delete(context.WithoutCancel(ctx), dep) }()
	before, err := c.readDependents(ctx)
	if err != nil {
		return err
	}
	for _, patch := range []string{
		`{"metadata":{"annotations":{"` + scaler.ReplicasAnnotation + `":"1","` + scaler.MeltdownProtectionAnnotation + `":""}},"spec":{"replicas":0}}`,
		`{"metadata":{"annotations":{"` + scaler.ReplicasAnnotation + `":null,"` + scaler.MeltdownProtectionAnnotation + `":null}},"spec":{"replicas":1}}`,
	} {
		if err := c.seed.Env.Client.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
		// The seed's deployment controller reports the new replicas ready, a status write.
		if err := until(ctx, 10*time.Second, func(ctx context.Context) bool {
			return c.seed.Env.Client.Get(ctx, client.ObjectKeyFromObject(dep), dep) == nil && dep.Status.ObservedGeneration == dep.Generation
		}); err != nil {
			return fmt.Errorf("no status written for generation %d: %w", dep.Generation, err)
		}
	}
	after, err := c.readDependents(ctx)
	if err != nil {
		return err
	}
	spurious, errs := scalings(before, after, map[string]bool{ns: true}, nil)
	if len(spurious) > 0 || len(errs) > 0 {
		return fmt.Errorf("a scale-down and a scale-up of a melted shoot's dependent: spurious %v, %w", spurious, errors.Join(errs...))
	}
	spurious, _ = scalings(before, after, nil, nil)
	if want := []string{ns + "/dependent (written 2 times, generation 1→3, replicas 1→1)"}; !slices.Equal(spurious, want) {
		return fmt.Errorf("the same writes in a shoot that did not melt: spurious %v, want %v", spurious, want)
	}
	return nil
}
