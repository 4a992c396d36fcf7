package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// groupScenarios change what the group's processes run, or cut them all: a role dropped and added
// again in rolling updates, brownouts of the API server for every replica, and a settings change
// rolled out (docs/sharding.md, "A group per role", "Gray failures",
// "A setting changed by a rolling update anyway: the incumbents win").
var groupScenarios = []scenario{
	{name: "weeder role dropped and added again in rolling updates", run: roleChange},
	{name: "three brownouts of every replica's API server", outage: true, run: brownouts},
	{name: "settings change rolled out and back", run: settingsRollout},
}

// roleChange restarts two replicas in turn without the weeder role, then again with it, as the rolling
// updates of a StatefulSet that drops a role and adds it back. Each process is a member of a group per
// role, so the prober's group only sees restarts and the weeder's group departures and joins: after
// every step both groups hold every partition, each by one replica (the audit checks the second).
func roleChange(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	first := rng.IntN(len(c.replicas))
	changed := []*sim.Replica{c.replicas[first], c.replicas[(first+1)%len(c.replicas)]}
	proberOnly := slices.DeleteFunc(slices.Clone(c.common), func(a string) bool { return strings.HasPrefix(a, "--weeder-config=") })
	for _, step := range []struct {
		what string
		args []string
	}{{"without the weeder role", proberOnly}, {"with both roles again", c.common}} {
		for _, r := range changed {
			if err := c.restartWith(ctx, r, step.args); err != nil {
				return nil, fmt.Errorf("restarting %s %s: %w", r.Name, step.what, err)
			}
			took, err := awaitTakeover(ctx, c.replicas, handoverTimeout)
			if err != nil {
				return nil, fmt.Errorf("after %s restarted %s: %w", r.Name, step.what, err)
			}
			c.logf("%s restarted %s: every partition of both groups held %s after it was ready", r.Name, step.what, took.Round(100*time.Millisecond))
		}
	}
	return nil, nil
}

// restartWith stops r with SIGTERM and starts it again with args instead of the common ones, and waits
// until it is ready.
func (c *cluster) restartWith(ctx context.Context, r *sim.Replica, args []string) error {
	if !r.Terminate(stopTimeout) {
		return fmt.Errorf("%s did not exit within %s of SIGTERM", r.Name, stopTimeout)
	}
	if err := r.RestartWith(args); err != nil {
		return err
	}
	return awaitReady(ctx, r, readyTimeout)
}

// brownouts cuts every replica off from the API server three times, sz.brownout long and
// sz.brownoutGap apart: every member fences three times within the flap window, together. None may
// step down (another member that does not fence is what a step-down needs), and once the API server
// is back the group holds every partition again within seconds.
func brownouts(ctx context.Context, c *cluster, _ *rand.Rand, sz sizes) ([]string, error) {
	before := c.stepDowns(ctx)
	for i := range 3 {
		var errs []error
		for _, r := range c.replicas {
			errs = append(errs, r.Cut())
		}
		errs = append(errs, hold(ctx, sz.brownout))
		for _, r := range c.replicas {
			r.Heal()
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		if i < 2 {
			if err := hold(ctx, sz.brownoutGap); err != nil {
				return nil, err
			}
		}
	}
	took, err := awaitTakeover(ctx, c.replicas, leaseDuration+handoverTimeout)
	if err != nil {
		return nil, fmt.Errorf("after the third brownout: %w", err)
	}
	after := c.stepDowns(ctx)
	for name, n := range after {
		if n > before[name] {
			return nil, fmt.Errorf("%s stepped down in brownouts of the whole group (%v step-downs before, %v after)", name, before, after)
		}
	}
	c.logf("three brownouts of %s, %s apart: no step-down; every partition held %s after the last", sz.brownout, sz.brownoutGap, took.Round(100*time.Millisecond))
	return nil, nil
}

// stepDowns reads each replica's step-downs.
func (c *cluster) stepDowns(ctx context.Context) map[string]float64 {
	return sim.PerReplica(ctx, c.replicas, "dwd_sharding_step_downs_total", "")
}

// otherSettings is the settings change the rollout makes: another ring load bound.
const otherSettings = "--ring-load-bound=1.05"

// settingsRollout rolls a change of the group's settings out, one replica at a time, and then back.
// The incumbents win: a process with other settings than the live members' does not join while they
// are live, so the others hold its share; once the last incumbent has left, the new processes form
// the group.
func settingsRollout(ctx context.Context, c *cluster, _ *rand.Rand, _ sizes) ([]string, error) {
	changed := append(slices.Clone(c.common), otherSettings)
	for _, step := range []struct {
		what string
		args []string
	}{{"with other settings", changed}, {"with the group's settings again", c.common}} {
		for i, r := range c.replicas {
			if err := c.rollTo(ctx, r, step.args, i == len(c.replicas)-1); err != nil {
				return nil, fmt.Errorf("restarting %s %s: %w", r.Name, step.what, err)
			}
		}
		c.logf("settings rolled out %s: the incumbents held every partition until the last one left", step.what)
	}
	return nil, nil
}

// rollTo restarts r with args. Unless it is the last incumbent, the new process must not join: a few
// seconds after the others hold every partition again it still holds nothing and is unready. The
// last one's successor and its peers form the group anew.
func (c *cluster) rollTo(ctx context.Context, r *sim.Replica, args []string, last bool) error {
	if !r.Terminate(stopTimeout) {
		return fmt.Errorf("%s did not exit within %s of SIGTERM", r.Name, stopTimeout)
	}
	if err := r.RestartWith(args); err != nil {
		return err
	}
	if last {
		_, err := awaitTakeover(ctx, c.replicas, readyTimeout)
		return err
	}
	if _, err := awaitTakeover(ctx, c.replicas, handoverTimeout); err != nil {
		return err
	}
	if err := hold(ctx, 3*retryPeriod); err != nil {
		return err
	}
	if n, ok := held(ctx, r); !ok || n > 0 || r.Ready(ctx) {
		return fmt.Errorf("%s joined beside members with other settings (answering %v, %.0f partitions held, ready %v)", r.Name, ok, n, r.Ready(ctx))
	}
	return nil
}
