package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/test"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The RBAC Gardener grants the original, and what it runs under it.
const (
	gardenerRBACFile = "testdata/gardener-rbac.yaml"
	gardenNamespace  = "garden"
	// The leader election's timings, shortened from the defaults (15s, 10s, 2s) so that a takeover
	// after a kill -9 takes seconds.
	gardenerLeaseDuration = 6 * time.Second
	gardenerRenewDeadline = 4 * time.Second
	gardenerRetryPeriod   = time.Second
)

// gardenerCommands are the command lines Gardener gives the original (gardener/gardener,
// pkg/component/nodemanagement/dependencywatchdog/bootstrap.go, getContainerCommand), after
// --config-file.
var gardenerCommands = map[string][]string{
	"prober": {"--kube-api-qps=20.0", "--kube-api-burst=100", "--zap-log-level=INFO", "--enable-leader-election=true"},
	"weeder": {"--enable-leader-election=true"},
}

// gardenerLeases are the only Leases the original's command lines may have in garden: the leader
// leases Gardener's Roles name.
var gardenerLeases = []string{"dwd-prober-leader-election", "dwd-weeder-leader-election"}

// gardenerStory runs `dwd prober` and `dwd weeder` with the original's command lines, two of each (an
// active and a standby, as Gardener's high-availability webhook makes them), each as its Gardener
// ServiceAccount by impersonation, against a seed with simulated shoots.
type gardenerStory struct {
	*demo.Demo
	out              *bytes.Buffer
	probers, weeders []*sim.Replica
	sets             map[string]*sim.ReplicaSet
}

// newGardenerStory starts a seed with 30 shoots, applies rbac into it and writes the configs and the
// kubeconfigs of the two roles; the seed and the processes stop when the test ends.
func newGardenerStory(t *testing.T, rbac []*unstructured.Unstructured) *gardenerStory {
	t.Helper()
	quietLogs()
	dir := t.TempDir()
	dwd := test.BuildDwd(t)
	ctx := context.Background()
	seed, err := sim.StartSeed(ctx, dir)
	require.NoError(t, err)
	g := &gardenerStory{out: &bytes.Buffer{}, sets: map[string]*sim.ReplicaSet{}}
	g.Demo = &demo.Demo{Out: &sim.LockedWriter{W: g.out}, Seed: seed, Options: demo.Options{Shoots: 30, Nodes: 2, Dwd: dwd, Dir: dir}}
	t.Cleanup(func() {
		g.TearDown()
		t.Log(g.out.String())
	})
	require.NoError(t, sim.ApplyRBAC(ctx, seed.Env.Client, rbac))
	require.NoError(t, seed.CreateShoots(ctx, 0, g.Options.Shoots, g.Options.Nodes, nil))
	configs := map[string]string{"prober": sim.ProberConfig, "weeder": sim.WeederConfig}
	for role, cfg := range configs {
		path := filepath.Join(dir, role+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
		kubeconfig, err := seed.WriteKubeconfigAs(role+".kubeconfig", sim.ServiceAccountName(gardenNamespace, "dependency-watchdog-"+role))
		require.NoError(t, err)
		args := append([]string{"--config-file=" + path}, gardenerCommands[role]...)
		g.sets[role] = &sim.ReplicaSet{Dwd: dwd, Dir: dir, Command: role, Args: append(args,
			"--kubeconfig="+kubeconfig, "--leader-elect-lease-duration="+gardenerLeaseDuration.String(),
			"--leader-elect-renew-deadline="+gardenerRenewDeadline.String(), "--leader-elect-retry-period="+gardenerRetryPeriod.String())}
	}
	return g
}

// start starts the two probers and the two weeders and waits, for timeout at most, until one prober
// leads and probes every shoot and one weeder leads.
func (g *gardenerStory) start(ctx context.Context, timeout time.Duration) (string, error) {
	for _, name := range []string{"prober-0", "prober-1", "weeder-0", "weeder-1"} {
		role := name[:len("prober")]
		r, err := g.sets[role].Start(name)
		if err != nil {
			return "", err
		}
		g.Replicas = append(g.Replicas, r)
		if role == "prober" {
			g.probers = append(g.probers, r)
		} else {
			g.weeders = append(g.weeders, r)
		}
	}
	started := time.Now()
	err := g.Until(ctx, timeout, func(ctx context.Context) bool {
		prober, probers := leaders(ctx, g.probers)
		_, weeders := leaders(ctx, g.weeders)
		return probers == 1 && weeders == 1 && prober.Sum(ctx, "dwd_probes_active", "") == float64(g.Options.Shoots) &&
			len(demo.UnprobedSince(g.Seed.Shoots.ProbeStats(), started)) == 0
	})
	if err != nil {
		_, probers := leaders(ctx, g.probers)
		_, weeders := leaders(ctx, g.weeders)
		return "", fmt.Errorf("within %s: %d prober(s) and %d weeder(s) lead, %d of %d shoots probed: %w", timeout, probers, weeders,
			g.Options.Shoots-len(demo.UnprobedSince(g.Seed.Shoots.ProbeStats(), started)), g.Options.Shoots, err)
	}
	prober, _ := leaders(ctx, g.probers)
	weeder, _ := leaders(ctx, g.weeders)
	return fmt.Sprintf("%s leads and probes all %d shoots, %s leads the weeders", prober.Name, g.Options.Shoots, weeder.Name), nil
}

// leaders returns a running replica among rs that holds its work (in leader mode, the one partition
// that stands for every shoot), and how many do.
func leaders(ctx context.Context, rs []*sim.Replica) (*sim.Replica, int) {
	var leader *sim.Replica
	n := 0
	for _, r := range rs {
		if r.Sum(ctx, "dwd_sharding_partitions_held", "") > 0 {
			leader, n = r, n+1
		}
	}
	return leader, n
}

// killLeader kills the leading prober and checks that the standby takes the leader lease and probes
// every shoot.
func (g *gardenerStory) killLeader(ctx context.Context) (string, error) {
	leader, n := leaders(ctx, g.probers)
	if n != 1 {
		return "", fmt.Errorf("%d probers lead, want 1", n)
	}
	g.Seed.Shoots.MarkProbes()
	leader.Kill()
	killed := time.Now()
	timeout := gardenerLeaseDuration + 20*time.Second
	err := g.Until(ctx, timeout, func(ctx context.Context) bool {
		next, n := leaders(ctx, g.probers)
		return n == 1 && next.Sum(ctx, "dwd_probes_active", "") == float64(g.Options.Shoots) &&
			len(demo.UnprobedSince(g.Seed.Shoots.ProbeStats(), killed)) == 0
	})
	if err != nil {
		return "", fmt.Errorf("the standby did not lead and probe every shoot within %s of the kill: %w", timeout, err)
	}
	next, _ := leaders(ctx, g.probers)
	return fmt.Sprintf("%s leads and has probed every shoot %s after the kill (leader lease %s)",
		next.Name, time.Since(killed).Round(100*time.Millisecond), gardenerLeaseDuration), nil
}

// play runs the story: start, meltdown, recovery, weeding, the active weeder killed, the active
// prober killed, then a new standby prober and the active one stopped gracefully.
func (g *gardenerStory) play(ctx context.Context) {
	if !g.Step(ctx, "Start 2 probers and 2 weeders as Gardener's ServiceAccounts; a leader probes every shoot", func(ctx context.Context) (string, error) {
		return g.start(ctx, 60*time.Second)
	}) {
		return
	}
	meltdown := []string{sim.ShootName(1), sim.ShootName(2), sim.ShootName(3)}
	if g.Step(ctx, "Meltdown of 3 shoots → scale-down in level order", func(ctx context.Context) (string, error) {
		return g.Meltdown(ctx, meltdown)
	}) {
		g.Step(ctx, "Recovery → scale-up in level order", func(ctx context.Context) (string, error) {
			return g.Recover(ctx, meltdown)
		})
	}
	g.Step(ctx, "etcd of 3 shoots recovers → their crash-looping pods are deleted", func(ctx context.Context) (string, error) {
		return g.Weed(ctx, []string{sim.ShootName(4), sim.ShootName(5), sim.ShootName(6)})
	})
	g.Step(ctx, "Kill -9 the leading weeder → the standby leads and weeds 3 more shoots when their etcd recovers", func(ctx context.Context) (string, error) {
		return g.failOverWeeder(ctx, []string{sim.ShootName(7), sim.ShootName(8), sim.ShootName(9)})
	})
	g.Step(ctx, "Kill -9 the leading prober → the standby leads and probes every shoot", g.killLeader)
	// The kill left one prober: a new one stands by for the graceful handover.
	if g.Step(ctx, "Start prober-2 → it waits as the standby", func(ctx context.Context) (string, error) {
		return g.startStandby(ctx, "prober-2")
	}) {
		g.Step(ctx, "SIGTERM the leading prober → it exits, releasing the leader lease; the standby leads at once", g.handOver)
	}
}

// leases returns the names of the Leases in namespace.
func (g *gardenerStory) leases(ctx context.Context, namespace string) ([]string, error) {
	list := &coordinationv1.LeaseList{}
	if err := g.Seed.Env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names, nil
}

// TestRBACGardener runs the original's command lines under exactly the RBAC Gardener grants the
// original, through a whole story (every shoot probed, scale-down, scale-up, weeding, a kill -9 of the
// leading weeder taken over by the standby, which then weeds, a kill -9 of the leading prober taken
// over by the standby, and a graceful handover: the leading prober exits within Gardener's 5 s grace
// period of SIGTERM, releasing the leader lease, and a new standby leads within a few retry periods,
// not a lease duration, and probes every shoot), and checks that they need nothing more: no Lease
// beyond the two leader leases, every process ready, no required permission missing, no refusal
// logged twice.
func TestRBACGardener(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed and five dwd processes")
	}
	rbac, err := readManifests(gardenerRBACFile)
	require.NoError(t, err)
	g := newGardenerStory(t, rbac)
	ctx := context.Background()

	g.play(ctx)
	require.NoError(t, g.Summary())

	leases, err := g.leases(ctx, gardenNamespace)
	require.NoError(t, err)
	assert.Equal(t, gardenerLeases, leases, "the only Leases in %s are the leader leases", gardenNamespace)
	// A leader that took over in the last step is ready once its dependents' caches synced.
	for _, r := range g.Replicas {
		if r.Running() {
			assert.Eventually(t, func() bool { return r.Ready(ctx) }, 15*time.Second, 200*time.Millisecond, "%s is ready", r.Name)
		}
	}
	// A weeder exports no probe metrics: DwdShardNotProbing reads a replica with shoots and no
	// probes as a stalled prober.
	for _, r := range g.weeders {
		if r.Running() {
			families := r.Metrics(ctx)
			require.Contains(t, families, "dwd_api_requests_total", "%s's metrics are read", r.Name)
			for _, name := range []string{"dwd_probes_total", "dwd_probes_active"} {
				assert.NotContains(t, families, name, "%s exports no probe metrics", r.Name)
			}
		}
	}
	lines := assertPermissionsSuffice(t, g.Options.Dir)
	for _, l := range permissionLines(lines, true) {
		t.Log("Optional permission missing, as expected under Gardener's RBAC:", l)
	}
}
