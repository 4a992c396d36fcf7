package chaos

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/test"
	"github.com/stretchr/testify/require"
)

var (
	soak       = flag.Duration("soak", 0, "Run TestSoak: scenarios at random for this long (0 skips it).")
	soakReport = flag.String("soak-report", "", "File to write the soak's summary to, besides the test log.")
	chaosSeed  = flag.Uint64("chaos-seed", 0, "Seed of the random choices (replicas, shoots, scenarios); 0 picks one, which the log shows.")
)

// The short suite's and the soak's sizes.
var (
	shortSizes = sizes{killRounds: 2, apiOutage: 12 * time.Second, melt: 10, hugeLeases: 50_000,
		brownout: 5 * time.Second, brownoutGap: 10 * time.Second}
	soakSizes = sizes{killRounds: 3, apiOutage: 60 * time.Second, melt: 30, hugeLeases: 200_000,
		brownout: 12 * time.Second, brownoutGap: 25 * time.Second}
)

// The shoots of the short suite and of the soak (which melts 30 of them at once).
const (
	shortShoots = 30
	soakShoots  = 36
)

// scenarios are all scenarios, in the short suite's order.
func scenarios() []scenario {
	all := append([]scenario{}, processScenarios...)
	all = append(all, groupScenarios...)
	all = append(all, seedScenarios...)
	return append(all, shootScenarios...)
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: real processes and a real API server, skipped under -short")
	}
	if *soak > 0 {
		t.Skip("-soak runs TestSoak only")
	}
	c, rng := newCluster(t, shortShoots)
	t.Run("harness: writes counted without a watch", func(t *testing.T) {
		require.NoError(t, checkWritesCounted(t.Context(), c))
	})
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			if err := c.round(t.Context(), sc, rng, shortSizes); err != nil {
				t.Error(err)
			}
			t.Logf("%s: %s", sc.name, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

func TestSoak(t *testing.T) {
	if *soak == 0 {
		t.Skip("no -soak duration")
	}
	c, rng := newCluster(t, soakShoots)
	all := scenarios()
	start := time.Now()
	for time.Since(start) < *soak && t.Context().Err() == nil {
		sc := all[rng.IntN(len(all))]
		roundStart := time.Now()
		err := c.round(t.Context(), sc, rng, soakSizes)
		t.Logf("%s: %s, %v", sc.name, time.Since(roundStart).Round(100*time.Millisecond), errOrOK(err))
	}
	var summary bytes.Buffer
	c.stats.write(&summary, time.Since(start))
	t.Log("\n" + summary.String())
	if *soakReport != "" {
		require.NoError(t, os.WriteFile(*soakReport, summary.Bytes(), 0o644))
	}
	if len(c.stats.failures) > 0 {
		t.Errorf("%d rounds failed", len(c.stats.failures))
	}
}

func errOrOK(err error) any {
	if err == nil {
		return "ok"
	}
	return err
}

// newCluster starts the seed, n shoots and the replicas for a test, and stops them when it ends; the
// replicas' logs are kept when the test fails (or always, with DWD_TEST_LOGS set), where the log says.
func newCluster(t *testing.T, n int) (*cluster, *rand.Rand) {
	dwd := test.BuildDwd(t)
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("random seed %d (-chaos-seed)", seed)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := startCluster(ctx, dir, dwd, n, t.Logf)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("DWD_TEST_LOGS") != "" {
			t.Logf("replica logs in %s", keepLogs(dir))
		}
		c.stop()
		cancel()
	})
	return c, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// keepLogs copies the replicas' logs and audit logs out of the test's folder, which is removed, and
// returns where they are.
func keepLogs(dir string) string {
	keep, err := os.MkdirTemp("", "dwd-chaos-logs-")
	if err != nil {
		return dir
	}
	for _, pattern := range []string{"*.log", "*.audit"} {
		files, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(keep, filepath.Base(f)), data, 0o644)
			}
		}
	}
	return keep
}

// TestMain removes the dwd binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	test.RemoveBuilt()
	os.Exit(code)
}
