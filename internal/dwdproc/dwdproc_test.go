package dwdproc

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcessSignals(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sleep.log")
	logged := func(want string) func() bool {
		return func() bool { out, _ := os.ReadFile(log); return strings.Contains(string(out), want) }
	}
	p, err := Start("/bin/sh", []string{"-c", "echo started; exec sleep 60"}, log)
	require.NoError(t, err)
	require.Eventually(t, logged("started\n"), 10*time.Second, 10*time.Millisecond)
	assert.True(t, p.Running())
	assert.Positive(t, p.Pid())
	p.Signal(syscall.SIGSTOP)
	p.Kill() // ends a stopped process too
	assert.False(t, p.Running())
	out, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "started\n", string(out))

	p, err = Start("/bin/sh", []string{"-c", "trap '' TERM; echo trapped; exec sleep 60"}, log)
	require.NoError(t, err)
	require.Eventually(t, logged("trapped"), 10*time.Second, 10*time.Millisecond)
	assert.False(t, p.Terminate(100*time.Millisecond), "SIGTERM ignored: killed after the timeout")
	<-p.Exited()

	_, err = Start("/does/not/exist", nil, log)
	assert.ErrorContains(t, err, "/does/not/exist")
}

func TestScrapeAndSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(strings.Join([]string{
			`# TYPE dwd_x counter`, `dwd_x{a="1",b="2"} 3`, `dwd_x{a="1",b="3"} 4`,
			`# TYPE dwd_y gauge`, `dwd_y 5`, ``}, "\n")))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	f := Scrape(context.Background(), addr)
	require.NotNil(t, f)
	assert.Equal(t, 7.0, Sum(f, "dwd_x"))
	assert.Equal(t, 3.0, Sum(f, "dwd_x", "a=1", "b=2"))
	assert.Zero(t, Sum(f, "dwd_x", "a=2"))
	assert.Equal(t, 5.0, Sum(f, "dwd_y"))
	assert.Zero(t, Sum(f, "dwd_missing"))
	assert.True(t, OK(context.Background(), srv.URL+"/metrics"))
	assert.False(t, OK(context.Background(), srv.URL+"/readyz"))

	free, err := FreePort()
	require.NoError(t, err)
	assert.Nil(t, Scrape(context.Background(), free), "nothing listens")
}

func TestStatusField(t *testing.T) {
	status := procfs.ProcStatus{VmPeak: 900000 * 1024, VmHWM: 300000 * 1024, VmRSS: 123456 * 1024}
	got, err := statusField(status, "VmRSS")
	require.NoError(t, err)
	assert.Equal(t, uint64(123456*1024), got)
	got, err = statusField(status, "VmHWM")
	require.NoError(t, err)
	assert.Equal(t, uint64(300000*1024), got)
	_, err = statusField(procfs.ProcStatus{}, "VmRSS")
	assert.ErrorContains(t, err, "no VmRSS")
	_, err = statusField(status, "Threads")
	assert.ErrorContains(t, err, "not a memory field")

	p, err := Start("/bin/sh", []string{"-c", "exec sleep 60"}, filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer p.Kill()
	rss, err := p.Memory("VmRSS")
	require.NoError(t, err)
	assert.Positive(t, rss)
}

// The ports FreePort gives are below the kernel's ephemeral range, which outgoing connections draw
// their source ports from, so that a replica's port is not some connection's when it starts again.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= minPort {
		t.Skipf("the kernel's ephemeral range starts at %d: FreePort takes any free port", low)
	}
	for range 20 {
		addr, err := FreePort()
		require.NoError(t, err)
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		n, err := strconv.Atoi(port)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, n, minPort)
		assert.Less(t, n, low, "below the ephemeral range")
	}
}

// With names, Scrape asks for those families only, and a promhttp handler (as the replicas' metrics
// server is) serves no other.
func TestScrapeAsksForTheNamedFamiliesOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	x := prometheus.NewCounter(prometheus.CounterOpts{Name: "dwd_x_total"})
	y := prometheus.NewGauge(prometheus.GaugeOpts{Name: "dwd_y"})
	reg.MustRegister(x, y)
	x.Add(2)
	y.Set(5)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	f := Scrape(context.Background(), addr, "dwd_y")
	require.NotNil(t, f)
	assert.Equal(t, []string{"dwd_y"}, slices.Collect(maps.Keys(f)))
	assert.Equal(t, 5.0, Sum(f, "dwd_y"))
	assert.Len(t, Scrape(context.Background(), addr, "dwd_x_total", "dwd_y"), 2)
	assert.Len(t, Scrape(context.Background(), addr), 2, "no names: every family")
}
