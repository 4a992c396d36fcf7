package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/replica"
)

// scaleAndBoundFlags are the prober's scale path and shoot answer flags with their defaults.
var scaleAndBoundFlags = map[string]string{
	"scale-workers": "16", "scale-qps": "20", "scale-burst": "100",
	"shoot-max-response-bytes": "33554432", "shoot-max-response-items": "20000",
	"shoot-max-response-bytes-in-flight": "0", "allow-insecure-shoot-kubeconfigs": "false",
}

func TestScaleAndBoundFlagDefaults(t *testing.T) {
	for _, path := range [][]string{{"run"}, {"prober"}} {
		t.Run(path[0], func(t *testing.T) {
			fs := subcommand(t, path...).Flags()
			for name, def := range scaleAndBoundFlags {
				if f := fs.Lookup(name); assert.NotNil(t, f, name) {
					assert.Equal(t, def, f.DefValue, name)
				}
			}
		})
	}
	t.Run("weeder", func(t *testing.T) {
		fs := subcommand(t, "weeder").Flags()
		for name := range scaleAndBoundFlags {
			assert.Nil(t, fs.Lookup(name), "the weeder does not scale: %s", name)
		}
	})
}

func TestScaleAndBoundFlagsReachTheProber(t *testing.T) {
	fs := pflag.NewFlagSet("prober", pflag.ContinueOnError)
	o := newOptions("dwd-prober")
	o.addProberFlags(fs)
	require.NoError(t, fs.Parse([]string{"--scale-workers=4", "--scale-qps=7.5", "--scale-burst=30",
		"--shoot-max-response-bytes=1048576", "--shoot-max-response-items=500", "--probe-workers=8",
		"--shoot-max-response-bytes-in-flight=16777216", "--allow-insecure-shoot-kubeconfigs"}))
	got := o.proberOptions()
	assert.Equal(t, prober.Options{Workers: 8, ConcurrentReconciles: 1,
		QPS: 5, Burst: 10, UserAgent: got.UserAgent,
		ScaleWorkers: 4, ScaleQPS: 7.5, ScaleBurst: 30, MaxResponseBytes: 1 << 20, MaxResponseItems: 500,
		MaxResponseBytesInFlight: 16 << 20, AllowInsecureKubeconfigs: true}, got)
	assert.Equal(t, prober.Options{Workers: 0, ConcurrentReconciles: 1,
		QPS: 5, Burst: 10, UserAgent: got.UserAgent,
		ScaleWorkers: 16, ScaleQPS: 20, ScaleBurst: 100, MaxResponseBytes: 32 << 20, MaxResponseItems: 20000},
		newOptions("dwd-prober").proberOptions(), "the defaults")
}

func TestValidateProberFlags(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *options)
		want   []string
	}{
		{"defaults", func(*options) {}, nil},
		{"smallest values", func(o *options) {
			o.probeWorkers, o.scaleWorkers, o.scaleQPS, o.scaleBurst = 1, 1, 0.01, 1
			o.maxResponseBytes, o.maxResponseItems = 64<<10, 100
		}, nil},
		{"probe workers", func(o *options) { o.probeWorkers = -1 }, []string{"--probe-workers"}},
		{"scale workers", func(o *options) { o.scaleWorkers = 0 }, []string{"--scale-workers"}},
		{"scale qps zero", func(o *options) { o.scaleQPS = 0 }, []string{"--scale-qps"}},
		{"scale qps negative", func(o *options) { o.scaleQPS = -1 }, []string{"--scale-qps"}},
		{"scale burst", func(o *options) { o.scaleBurst = 0 }, []string{"--scale-burst"}},
		{"response bytes below 64 KiB", func(o *options) { o.maxResponseBytes = 64<<10 - 1 }, []string{"--shoot-max-response-bytes"}},
		{"response items below 100", func(o *options) { o.maxResponseItems = 99 }, []string{"--shoot-max-response-items"}},
		{"bytes in flight derived", func(o *options) { o.maxBytesInFlight = 0 }, nil},
		{"bytes in flight as one answer", func(o *options) { o.maxBytesInFlight = o.maxResponseBytes }, nil},
		{"bytes in flight below one answer", func(o *options) { o.maxBytesInFlight = o.maxResponseBytes - 1 }, []string{"--shoot-max-response-bytes-in-flight"}},
		{"bytes in flight negative", func(o *options) { o.maxBytesInFlight = -1 }, []string{"--shoot-max-response-bytes-in-flight"}},
		{"all at once", func(o *options) {
			o.scaleWorkers, o.scaleQPS, o.scaleBurst, o.maxResponseBytes, o.maxResponseItems = -1, -1, -1, -1, -1
		}, []string{"--scale-workers", "--scale-qps", "--scale-burst", "--shoot-max-response-bytes", "--shoot-max-response-items"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOptions(replica.GroupFor(replica.RoleProber))
			tt.mutate(o)
			assert.Equal(t, tt.want, fieldNames(o.validateProberFlags()))
		})
	}
}

func TestInvalidScaleFlagsAreReportedWithTheOthers(t *testing.T) {
	code, _, stderr := run(context.Background(), "prober", "--config-file=testdata/prober.yaml", "--kubeconfig=testdata/missing",
		"--scale-workers=0", "--scale-qps=0", "--scale-burst=0", "--shoot-max-response-bytes=1024", "--shoot-max-response-items=10",
		"--kube-api-burst=-1")
	assert.Equal(t, 1, code)
	for _, want := range []string{"--scale-workers", "--scale-qps", "--scale-burst", "--shoot-max-response-bytes",
		"--shoot-max-response-items", "--kube-api-burst"} {
		assert.Contains(t, stderr, want)
	}
}

func TestScaleFlagsHelp(t *testing.T) {
	for _, cmd := range []string{"run", "prober"} {
		_, stdout, _ := run(context.Background(), cmd, "--help")
		stdout = strings.Join(strings.Fields(stdout), " ") // undo the wrapping
		for _, want := range []string{"--scale-workers", "--scale-qps", "--scale-burst", "--shoot-max-response-bytes",
			"--shoot-max-response-items", "independent of --kube-api-qps", "whose scale client was not held to --kube-api-qps",
			"(default 33554432)", "(default 20000)", "--shoot-max-response-bytes-in-flight", "an eighth of the Go memory limit (GOMEMLIMIT)",
			"--allow-insecure-shoot-kubeconfigs", "For labs only"} {
			assert.Contains(t, stdout, want, cmd)
		}
	}
}

func fieldNames(errs field.ErrorList) []string {
	var names []string
	for _, e := range errs {
		names = append(names, e.Field)
	}
	return names
}
