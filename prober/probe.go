package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// throttleBackoff is how long a shoot is left alone after its API server answered 429.
const throttleBackoff = 10 * time.Second

// jitterAround spreads the period between probes uniformly over interval × [1 − factor/2, 1 + factor/2]
// (r in [0, 1) picks the point), so that the mean period is the configured probeInterval and the
// longest is interval × (1 + factor/2): 11 s for the defaults, which bounds how long an outage goes
// unseen. The original jitters upwards only, to interval × (1 + factor). The period never falls below
// a tenth of the interval, whatever the factor.
func jitterAround(interval time.Duration, factor, r float64) time.Duration {
	low := max(1-factor/2, 0.1)
	high := 1 + factor/2
	return time.Duration(float64(interval) * (low + (high-low)*r))
}

// shootProbe probes one shoot namespace: its API server, then its node leases, and runs a scale flow
// when the leases call for one that the cached Deployments show is needed.
type shootProbe struct {
	m         *Manager
	namespace string
	spec      ProbeSpec
}

// run is one probe cycle; it returns when the next should start.
func (p *shootProbe) run(ctx context.Context) time.Duration {
	next := jitterAround(p.m.interval(), p.m.jitterFactor(), rand.Float64())
	result, err := p.cycle(ctx)
	probesTotal.WithLabelValues(result).Inc()
	if err != nil && ctx.Err() == nil {
		p.m.Log.V(1).Info("Probe failed", "namespace", p.namespace, "result", result, "error", err.Error())
	}
	if result == resultThrottled {
		return throttleBackoff
	}
	return next
}

// cycle runs the probes and returns the result label and the error that ended the cycle, if any.
func (p *shootProbe) cycle(ctx context.Context) (string, error) {
	shoot, err := p.client(ctx)
	if err != nil {
		return resultKubeconfig, err
	}
	start := p.m.Clock.Now()
	err = shoot.Version(ctx)
	probeDuration.WithLabelValues("apiserver").Observe(p.m.Clock.Since(start).Seconds())
	if err != nil {
		return failure(resultAPIServer, err)
	}
	start = p.m.Clock.Now()
	decision, err := p.decide(ctx, shoot)
	probeDuration.WithLabelValues("leases").Observe(p.m.Clock.Since(start).Seconds())
	if err != nil {
		return failure(resultLeases, err)
	}
	expiredFraction.WithLabelValues(p.namespace).Set(decision.ExpiredFraction)
	return p.act(ctx, decision)
}

// failure labels an error, 429 answers as throttled.
func failure(result string, err error) (string, error) {
	if apierrors.IsTooManyRequests(err) {
		return resultThrottled, err
	}
	return result, err
}

// client returns the shoot client built from the cached kubeconfig Secret. A broken Secret is
// reported (log, Event on the Secret, metric) only when it changes, not on every cycle.
func (p *shootProbe) client(ctx context.Context) (*ShootClient, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.namespace, Name: p.m.Config.KubeConfigSecretName}
	if err := p.m.Reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("reading kubeconfig Secret %s: %w", key, err)
	}
	c, err := p.m.Clients.For(secret)
	if err != nil {
		p.m.reportBrokenSecret(secret, err)
	}
	return c, err
}

// decide lists the shoot's nodes and node leases and the seed's Machines and decides.
func (p *shootProbe) decide(ctx context.Context, shoot *ShootClient) (Decision, error) {
	nodes, err := shoot.Nodes(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("listing nodes: %w", err)
	}
	leases, err := shoot.NodeLeases(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("listing node leases: %w", err)
	}
	machines, err := p.machines(ctx)
	if err != nil {
		return Decision{}, err
	}
	candidates := CandidateNodes(nodes, machines, p.spec)
	return DecideScaling(candidates, leases, p.spec.NodeMonitorGracePeriod, *p.m.Config.NodeLeaseFailureFraction, p.m.Clock.Now()), nil
}

// machines reads the shoot's Machines from the seed cache.
func (p *shootProbe) machines(ctx context.Context) ([]MachineInfo, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := p.m.Reader.List(ctx, list, client.InNamespace(p.namespace)); err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	machines := make([]MachineInfo, 0, len(list.Items))
	for i := range list.Items {
		machines = append(machines, machineInfo(&list.Items[i]))
	}
	return machines, nil
}

// act runs the scale flow the decision calls for when the cache shows it would change anything.
func (p *shootProbe) act(ctx context.Context, d Decision) (string, error) {
	dir, result := scaler.Up, resultScaledUp
	switch d.Action {
	case ScaleDown:
		dir, result = scaler.Down, resultScaledDown
	case ScaleUp:
	default:
		return resultNoDecision, nil
	}
	needed, err := p.m.Scaler.NeedsScaling(ctx, p.namespace, dir)
	if err != nil {
		return resultScaleFailed, err
	}
	if !needed {
		return resultHealthy, nil
	}
	why := scaler.Reason{Message: fmt.Sprintf("%d of %d candidate node leases expired", d.Expired, d.Candidates), ExpiredFraction: d.ExpiredFraction}
	if err := p.m.Scaler.Scale(ctx, p.namespace, dir, why); err != nil {
		return resultScaleFailed, err
	}
	return result, nil
}
