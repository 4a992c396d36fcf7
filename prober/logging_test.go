package prober

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
)

func TestProbeStartAndStopAreDebugLines(t *testing.T) {
	registerMetrics()
	clk := clocktesting.NewFakeClock(time.Now())
	for _, tc := range []struct {
		verbosity int
		want      int
	}{{verbosity: 0, want: 0}, {verbosity: 1, want: 1}} {
		logs := &logtest.Lines{}
		m := &Manager{Ownership: partitionOwnership{}, Clock: clk, Log: logs.Logger(tc.verbosity),
			Scheduler: NewScheduler(clk, 1, nil), Flows: NewScheduler(clk, 1, nil), Clients: &ShootClients{}}
		m.mu.Lock()
		m.startLocked("shoot--p--s", ProbeSpec{NodeMonitorGracePeriod: 40 * time.Second}, clk.Now())
		m.startLocked("shoot--p--s", ProbeSpec{NodeMonitorGracePeriod: 60 * time.Second}, clk.Now())
		m.stopLocked("shoot--p--s")
		m.mu.Unlock()
		for _, msg := range []string{`"Starting probe"`, `"Restarting probe: node conditions or grace period changed"`, `"Stopped probe"`} {
			got := logs.With(msg)
			require.Len(t, got, tc.want, "%s at verbosity %d", msg, tc.verbosity)
			if tc.want > 0 {
				assert.Contains(t, got[0], `"level"=1`)
			}
		}
	}
}

func TestBrokenSecretEventHasTheProbeAction(t *testing.T) {
	registerMetrics()
	recorder := events.NewFakeRecorder(1)
	recorder.Verbose = true
	m := &Manager{Log: funcr.New(func(string, string) {}, funcr.Options{}), Recorder: recorder}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "kubeconfig", ResourceVersion: "1"}}
	m.reportBrokenSecret(secret, KubeconfigError("invalid kubeconfig", assert.AnError, nil))
	require.Len(t, recorder.Events, 1)
	assert.True(t, strings.HasPrefix(<-recorder.Events, "Warning InvalidKubeconfig "+EventAction+" "))
}
