package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

const (
	// takeoverTimeout bounds a takeover after a crash: a member lease and the time to write every
	// partition lease.
	takeoverTimeout = leaseDuration + 15*time.Second
	// handoverTimeout bounds a takeover after a graceful stop, which releases at once.
	handoverTimeout = 10 * time.Second
	// stopTimeout bounds a replica's exit after SIGTERM.
	stopTimeout = 15 * time.Second
	// readyTimeout bounds a new process's readiness.
	readyTimeout = leaseDuration*2 + 20*time.Second
)

// processScenarios are the scenarios on the replicas' processes.
var processScenarios = []scenario{
	{name: "kill -9 and restart", run: killAndRestart},
	{name: "SIGTERM and restart", run: terminateAndRestart},
	{name: "restart at once under the same name", run: restartAtOnce},
	{name: "second process under a running name", run: duplicateName},
	{name: "network cut longer than the lease", run: cutNetwork},
	{name: "SIGSTOP past the lease, SIGCONT", run: pauseProcess},
}

// killAndRestart kills a random replica with SIGKILL, checks that the others take over all of its
// partitions within a lease duration and the time to write them, and starts it again; a few rounds.
func killAndRestart(ctx context.Context, c *cluster, rng *rand.Rand, sz sizes) ([]string, error) {
	for range sz.killRounds {
		r := c.pick(rng)
		r.Kill()
		took, err := awaitTakeover(ctx, c.others(r), takeoverTimeout)
		if err != nil {
			return nil, fmt.Errorf("after kill -9 of %s: %w", r.Name, err)
		}
		c.logf("kill -9 %s: the others held every partition %s later", r.Name, took.Round(100*time.Millisecond))
		if err := c.restart(ctx, r); err != nil {
			return nil, err
		}
		if err := c.converge(ctx, time.Now(), convergeTimeout); err != nil {
			return nil, fmt.Errorf("after %s came back: %w", r.Name, err)
		}
	}
	return nil, nil
}

// restart starts a new process of r with the common flags and waits until it is ready.
func (c *cluster) restart(ctx context.Context, r *sim.Replica) error {
	if err := r.RestartWith(c.common); err != nil {
		return err
	}
	return awaitReady(ctx, r, readyTimeout)
}

// terminateAndRestart stops a random replica with SIGTERM: it must exit in time and the others must
// hold its partitions within seconds, not a lease duration; then it starts again.
func terminateAndRestart(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	r := c.pick(rng)
	if !r.Terminate(stopTimeout) {
		return nil, fmt.Errorf("%s did not exit within %s of SIGTERM and was killed", r.Name, stopTimeout)
	}
	took, err := awaitTakeover(ctx, c.others(r), handoverTimeout)
	if err != nil {
		return nil, fmt.Errorf("after SIGTERM of %s: %w", r.Name, err)
	}
	c.logf("SIGTERM %s: the others held every partition %s after its exit", r.Name, took.Round(100*time.Millisecond))
	return nil, c.restart(ctx, r)
}

// restartAtOnce kills a replica and starts it again at once under its name, then does the same after
// a SIGTERM: the new process must not act on the old one's partitions before it proved them its
// own (the audit), and the group converges.
func restartAtOnce(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	r := c.pick(rng)
	r.Kill()
	if err := c.restart(ctx, r); err != nil {
		return nil, fmt.Errorf("after kill -9: %w", err)
	}
	if err := c.converge(ctx, time.Now(), convergeTimeout); err != nil {
		return nil, fmt.Errorf("after kill -9 of %s and its restart: %w", r.Name, err)
	}
	if !r.Terminate(stopTimeout) {
		return nil, fmt.Errorf("%s did not exit within %s of SIGTERM", r.Name, stopTimeout)
	}
	if err := c.restart(ctx, r); err != nil {
		return nil, fmt.Errorf("after SIGTERM: %w", err)
	}
	return nil, nil
}

// duplicateName starts a second process under the name of a running replica, for longer than a lease
// duration: it must take over nothing, and the running one must keep its partitions.
func duplicateName(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	r := c.pick(rng)
	before, ok := held(ctx, r)
	if !ok {
		return nil, fmt.Errorf("%s's metrics do not answer", r.Name)
	}
	dup, err := c.set.StartAs(r.Name, r.Name+"-duplicate")
	if err != nil {
		return nil, err
	}
	defer dup.Kill()
	var errs []error
	err = until(ctx, leaseDuration+4*time.Second, func(ctx context.Context) bool {
		if n, _ := held(ctx, dup); n > 0 {
			errs = append(errs, fmt.Errorf("the second %s holds %.0f partitions", r.Name, n))
			return true
		}
		if now, ok := held(ctx, r); ok && now < before {
			errs = append(errs, fmt.Errorf("the running %s dropped from %.0f to %.0f partitions", r.Name, before, now))
			return true
		}
		return false
	})
	if err == nil {
		return nil, errors.Join(errs...)
	}
	c.logf("second process under %s: it held nothing for %s; it is %s", r.Name, leaseDuration+4*time.Second, runningOrExited(dup))
	return nil, nil
}

func runningOrExited(r *sim.Replica) string {
	if r.Running() {
		return "still running"
	}
	return "exited on its own"
}

// cutNetwork cuts a replica's proxy for longer than the lease duration: it must stop acting within the
// renew deadline (its partitions held drop to 0), the others take over after the lease duration,
// and it rejoins after the heal.
func cutNetwork(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	r := c.pick(rng)
	cut := time.Now()
	if err := r.Cut(); err != nil {
		return nil, err
	}
	defer r.Heal()
	err := until(ctx, renewDeadline+2*time.Second, func(ctx context.Context) bool {
		n, ok := held(ctx, r)
		return ok && n == 0
	})
	if err != nil {
		return nil, fmt.Errorf("%s still held partitions %s after its network was cut (renew deadline %s): %w",
			r.Name, time.Since(cut).Round(100*time.Millisecond), renewDeadline, err)
	}
	fenced := time.Since(cut)
	took, err := awaitTakeover(ctx, c.others(r), takeoverTimeout)
	if err != nil {
		return nil, fmt.Errorf("while %s is cut off: %w", r.Name, err)
	}
	if err := hold(ctx, leaseDuration+2*time.Second-time.Since(cut)); err != nil {
		return nil, err
	}
	r.Heal()
	c.logf("cut %s: it held nothing %s after the cut, the others everything %s after it", r.Name,
		fenced.Round(100*time.Millisecond), (fenced + took).Round(100*time.Millisecond))
	return nil, nil
}

// pauseProcess stops a replica with SIGSTOP until the others have taken over and a little longer,
// then lets it go on: it must not act on what it held (the audit shows no write of it after the
// takeover) and it rejoins.
func pauseProcess(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	r := c.pick(rng)
	r.Pause()
	defer r.Resume()
	took, err := awaitTakeover(ctx, c.others(r), takeoverTimeout)
	if err != nil {
		return nil, fmt.Errorf("while %s is stopped: %w", r.Name, err)
	}
	if err := hold(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	r.Resume()
	c.logf("SIGSTOP %s: the others held everything %s later; SIGCONT", r.Name, took.Round(100*time.Millisecond))
	return nil, nil
}
