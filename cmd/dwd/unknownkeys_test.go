package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnknownKeysAreWarningsWhenRunning(t *testing.T) {
	proberBefore, weederBefore := unknownFieldsCount(t, "prober"), unknownFieldsCount(t, "weeder")
	o := newOptions(replica.GroupFor(replica.RoleProber))
	o.proberConfigPath, o.weederConfigPath = "testdata/prober-unknown-key.yaml", "testdata/weeder-unknown-key.yaml"

	require.Empty(t, o.loadConfigs(false), "the run commands load a config with unknown keys")
	assert.NotNil(t, o.proberConfig)
	assert.NotNil(t, o.weederConfig)
	assert.Equal(t, []unknownKey{
		{kind: replica.RoleProber, file: "testdata/prober-unknown-key.yaml", field: "internalKubeConfigSecretName"},
		{kind: replica.RoleProber, file: "testdata/prober-unknown-key.yaml", field: "dependentResourceInfos[2].scaleUp.maxAttempts"},
		{kind: replica.RoleWeeder, file: "testdata/weeder-unknown-key.yaml", field: "watchTimeout"},
	}, o.unknownKeys)
	assert.Equal(t, 2.0, unknownFieldsCount(t, "prober")-proberBefore, "counted in controller-runtime's registry")
	assert.Equal(t, 1.0, unknownFieldsCount(t, "weeder")-weederBefore)

	var lines []string
	o.warnUnknownKeys(funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	require.Len(t, lines, 3, "one warning per unknown key")
	for i, want := range []string{
		`"fileKind"="prober" "file"="testdata/prober-unknown-key.yaml" "field"="internalKubeConfigSecretName"`,
		`"fileKind"="prober" "file"="testdata/prober-unknown-key.yaml" "field"="dependentResourceInfos[2].scaleUp.maxAttempts"`,
		`"fileKind"="weeder" "file"="testdata/weeder-unknown-key.yaml" "field"="watchTimeout"`,
	} {
		assert.Contains(t, lines[i], "Warning: ignoring a key the config does not have")
		assert.Contains(t, lines[i], want)
	}
}

func TestUnknownKeysAreErrorsWhenValidating(t *testing.T) {
	o := &options{proberConfigPath: "testdata/prober-unknown-key.yaml"}
	errs := o.loadConfigs(true)
	assert.Len(t, errs, 2)
	assert.Nil(t, o.proberConfig)
	assert.Empty(t, o.unknownKeys)
}

func TestUnknownKeysDoNotHideOtherErrors(t *testing.T) {
	o := newOptions(replica.GroupFor(replica.RoleProber))
	o.proberConfigPath = "testdata/prober-unknown-key-and-invalid.yaml"
	errs := o.loadConfigs(false)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	assert.ElementsMatch(t, []string{
		"testdata/prober-unknown-key-and-invalid.yaml: failureThreshold",
		"testdata/prober-unknown-key-and-invalid.yaml: probeInterval",
	}, got, "a file that fails lists its unknown keys too: a misspelt key often explains the failure")
	assert.Nil(t, o.proberConfig)
	assert.Empty(t, o.unknownKeys)
}

func TestProberWithUnknownKeysStartsAndWarns(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, "prober", "--config-file=testdata/prober-unknown-key.yaml",
		"--member-name=dwd-prober-0", "--shard-namespace="+ns, "--shard-group=g-"+ns[len(ns)-5:])
	require.Eventually(t, func() bool { return httpOK("http://" + r.healthAddr + "/readyz") },
		30*time.Second, 100*time.Millisecond, "a config with unknown keys does not stop the prober")
	n, ok := metricValue(r.metricsAddr, `dwd_config_unknown_fields_total{file_kind="prober"} `)
	assert.True(t, ok, "the counter is served")
	assert.GreaterOrEqual(t, n, 2.0)
	require.Equal(t, 0, r.stop(t))
	assert.Equal(t, 1, strings.Count(r.stderr, `"field":"internalKubeConfigSecretName"`), "warned once, in the replica's log:\n%s", r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, `"field":"dependentResourceInfos[2].scaleUp.maxAttempts"`))
}

func TestWeederWithUnknownKeysStarts(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, "weeder", "--config-file=testdata/weeder-unknown-key.yaml",
		"--member-name=dwd-weeder-0", "--shard-namespace="+ns, "--shard-group=g-"+ns[len(ns)-5:])
	require.Eventually(t, func() bool { return httpOK("http://" + r.healthAddr + "/readyz") },
		30*time.Second, 100*time.Millisecond)
	n, ok := metricValue(r.metricsAddr, `dwd_config_unknown_fields_total{file_kind="weeder"} `)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, n, 1.0)
	assert.Equal(t, 0, r.stop(t))
}

// TestConfigValidateRejectsWhatRunAccepts pins the split: the same file starts a replica but does not
// validate.
func TestConfigValidateRejectsWhatRunAccepts(t *testing.T) {
	code, stdout, _ := run(context.Background(), "config", "validate", "--prober-config=testdata/prober-unknown-key.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "testdata/prober-unknown-key.yaml: internalKubeConfigSecretName: Unsupported value")
}

// unknownFieldsCount reads dwd_config_unknown_fields_total{file_kind=kind} from controller-runtime's
// registry, which the metrics endpoint serves; 0 before anything was counted.
func unknownFieldsCount(t *testing.T, kind string) float64 {
	t.Helper()
	return metricstest.Sum(t, "dwd_config_unknown_fields_total", map[string]string{"file_kind": kind})
}
