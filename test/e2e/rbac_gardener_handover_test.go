package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

const (
	// gardenerGracePeriod is the terminationGracePeriodSeconds Gardener gives the original's
	// Deployments: a leader must stop its work and release its lease within it.
	gardenerGracePeriod = 5 * time.Second
	// gardenerHandoverLimit is how soon after a leader's graceful exit the standby must lead. The
	// standby tries the lease every retry period (up to 2.2 retry periods apart, with client-go's
	// jitter) and takes a released lease at its next try; a lease left to expire it could not take
	// before about a lease duration less a retry period after the exit (5 s here).
	gardenerHandoverLimit = 4 * gardenerRetryPeriod
	// attemptingMsg is what client-go's leader election logs when a candidate starts trying the lease.
	attemptingMsg = "Attempting to acquire leader lease..."
)

// startStandby starts one more prober, named name, and waits until it is ready and tries the leader
// lease that another prober holds: the standby of the graceful handover.
func (g *gardenerStory) startStandby(ctx context.Context, name string) (string, error) {
	r, err := g.sets["prober"].Start(name)
	if err != nil {
		return "", err
	}
	g.Replicas, g.probers = append(g.Replicas, r), append(g.probers, r)
	started := time.Now()
	timeout := 30 * time.Second
	err = g.Until(ctx, timeout, func(ctx context.Context) bool {
		return r.Ready(ctx) && logged(r.Log, attemptingMsg)
	})
	if err != nil {
		return "", fmt.Errorf("%s was not ready and trying the leader lease within %s (ready: %t): %w", name, timeout, r.Ready(ctx), err)
	}
	leader, n := leaders(ctx, g.probers)
	if n != 1 || leader == r {
		return "", fmt.Errorf("%d prober(s) lead, the new one among them: %t; want 1, another", n, leader == r)
	}
	return fmt.Sprintf("%s ready and trying the leader lease %s after its start; %s leads",
		name, time.Since(started).Round(100*time.Millisecond), leader.Name), nil
}

// handOver stops the leading prober with SIGTERM and checks that it exits within Gardener's grace
// period, that the leader lease no longer names it then (it was released, not left to expire), that
// the standby leads within gardenerHandoverLimit of the exit, and that every shoot is probed again.
func (g *gardenerStory) handOver(ctx context.Context) (string, error) {
	leader, n := leaders(ctx, g.probers)
	if n != 1 {
		return "", fmt.Errorf("%d probers lead, want 1", n)
	}
	holder, err := g.leaseHolder(ctx, gardenerLeases[0])
	if err != nil || holder == "" {
		return "", errors.Join(fmt.Errorf("%s leads, but the leader lease names no holder", leader.Name), err)
	}
	g.Seed.Shoots.MarkProbes()
	start := time.Now()
	if !leader.Terminate(gardenerGracePeriod) {
		return "", fmt.Errorf("%s did not exit within %s of SIGTERM (Gardener's grace period), and was killed", leader.Name, gardenerGracePeriod)
	}
	exited := time.Now()
	if after, err := g.leaseHolder(ctx, gardenerLeases[0]); err != nil || after == holder {
		return "", errors.Join(fmt.Errorf("%s exited %s after SIGTERM, but the leader lease still names it: not released",
			leader.Name, exited.Sub(start).Round(10*time.Millisecond)), err)
	}
	if err := g.Until(ctx, gardenerHandoverLimit, func(ctx context.Context) bool {
		_, n := leaders(ctx, g.probers)
		return n == 1
	}); err != nil {
		return "", fmt.Errorf("no prober led within %s of %s's exit (leader lease %s): %w", gardenerHandoverLimit, leader.Name, gardenerLeaseDuration, err)
	}
	led := time.Since(exited)
	next, _ := leaders(ctx, g.probers)
	probed, err := g.probedAgain(ctx, next, exited)
	if err != nil {
		return "", err
	}
	shoot, gap := demo.LongestGap(g.Seed.Shoots.ProbeStats(), time.Now())
	if limit := demo.ProbeInterval + gardenerHandoverLimit; gap > limit {
		return "", fmt.Errorf("%s went unprobed for %s, more than %s", shoot, gap.Round(10*time.Millisecond), limit)
	}
	return fmt.Sprintf("%s exited %s after SIGTERM (exit code %d, grace period %s), releasing the leader lease; %s led %s after the exit "+
		"(retry period %s, leader lease %s) and had probed every shoot %s after it; longest gap between two probes of a shoot %s (%s)",
		leader.Name, exited.Sub(start).Round(10*time.Millisecond), leader.State().ExitCode(), gardenerGracePeriod, next.Name,
		led.Round(10*time.Millisecond), gardenerRetryPeriod, gardenerLeaseDuration, probed.Round(10*time.Millisecond),
		gap.Round(10*time.Millisecond), shoot), nil
}

// probedAgain waits until leader probes every shoot and each was probed since t, and returns how long
// after t that was.
func (g *gardenerStory) probedAgain(ctx context.Context, leader *sim.Replica, t time.Time) (time.Duration, error) {
	timeout := gardenerHandoverLimit + 2*demo.ProbeInterval
	err := g.Until(ctx, timeout, func(ctx context.Context) bool {
		return leader.Sum(ctx, "dwd_probes_active", "") == float64(g.Options.Shoots) &&
			len(demo.UnprobedSince(g.Seed.Shoots.ProbeStats(), t)) == 0
	})
	if err != nil {
		return 0, fmt.Errorf("%s leads, but shoots were not probed within %s: %v", leader.Name, timeout, demo.UnprobedSince(g.Seed.Shoots.ProbeStats(), t))
	}
	return time.Since(t), nil
}

// failOverWeeder kills the leading weeder, waits until the other leads, and checks that the new leader
// deletes the crash-looping pods of shoots whose etcd turns ready again, and that it is the one that
// deleted them.
func (g *gardenerStory) failOverWeeder(ctx context.Context, shoots []string) (string, error) {
	leader, n := leaders(ctx, g.weeders)
	if n != 1 {
		return "", fmt.Errorf("%d weeders lead, want 1", n)
	}
	leader.Kill()
	killed := time.Now()
	timeout := gardenerLeaseDuration + 20*time.Second
	if err := g.Until(ctx, timeout, func(ctx context.Context) bool {
		_, n := leaders(ctx, g.weeders)
		return n == 1
	}); err != nil {
		return "", fmt.Errorf("the standby did not lead within %s of the kill: %w", timeout, err)
	}
	led := time.Since(killed)
	next, _ := leaders(ctx, g.weeders)
	weeded, err := g.Weed(ctx, shoots)
	if err != nil {
		return "", fmt.Errorf("%s leads %s after the kill, but: %w (%s counts %.0f failed pod deletes)", next.Name, led.Round(100*time.Millisecond),
			err, next.Name, next.Sum(ctx, "dwd_weeder_pod_delete_failures_total", ""))
	}
	if deleted := next.Sum(ctx, "dwd_weeder_pods_deleted_total", ""); deleted != float64(len(shoots)) {
		return "", fmt.Errorf("%s counts %.0f pods deleted, want %d", next.Name, deleted, len(shoots))
	}
	return fmt.Sprintf("%s leads %s after the kill (leader lease %s); it deleted them: %s",
		next.Name, led.Round(100*time.Millisecond), gardenerLeaseDuration, weeded), nil
}

// leaseHolder reads the holder of the Lease name in garden; empty when released.
func (g *gardenerStory) leaseHolder(ctx context.Context, name string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := g.Seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: gardenNamespace, Name: name}, lease); err != nil {
		return "", fmt.Errorf("reading the leader lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// logged reports whether a JSON line of the log at path has the message msg.
func logged(path, msg string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			return true
		}
	}
	return false
}
