package replica

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

// recordedEvent is an Event a fakeRecorder was asked to record.
type recordedEvent struct {
	regarding                       runtime.Object
	eventType, reason, action, note string
}

// fakeRecorder records the Events it is given.
type fakeRecorder struct{ events []recordedEvent }

func (f *fakeRecorder) Eventf(regarding, _ runtime.Object, eventType, reason, action, note string, args ...any) {
	f.events = append(f.events, recordedEvent{regarding, eventType, reason, action, fmt.Sprintf(note, args...)})
}

func (f *fakeRecorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventType, reason, action, note string, args ...any) {
	f.Eventf(regarding, related, eventType, reason, action, note, args...)
}

// recorderManager is a manager whose only working method is GetEventRecorder.
type recorderManager struct {
	manager.Manager
	recorder *fakeRecorder
	names    []string
}

func (m *recorderManager) GetEventRecorder(name string) recorder.EventRecorder {
	m.names = append(m.names, name)
	return m.recorder
}

// A member in a Pod records the sharding's Events on that Pod, as the sharding controller; outside a
// Pod it records none, and the member name stands for the Pod a graceful stop reads.
func TestAMemberRecordsItsEventsOnItsPodAndNoneOutsideOne(t *testing.T) {
	r := &Replica{opts: Options{Sharding: config.DefaultSharding("dwd-prober")}, base: &rest.Config{Host: "https://127.0.0.1:1"}}
	r.opts.Sharding.MemberName = "dwd-0"
	mgr := &recorderManager{recorder: &fakeRecorder{}}

	opts, err := r.shardingRunnerOptions(mgr, r.opts.ShardingFor(RoleProber))
	require.NoError(t, err)
	assert.Nil(t, opts.Event, "no Events outside a Pod")
	assert.NotNil(t, opts.Departing)

	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "garden", Name: "dwd-0", UID: "u-1"}
	r.opts.Pod = pod
	opts, err = r.shardingRunnerOptions(mgr, r.opts.ShardingFor(RoleProber))
	require.NoError(t, err)
	require.NotNil(t, opts.Event)
	opts.Event(corev1.EventTypeNormal, "Returning", "Leave", "stopping to restart; 100% of the shoots stay reserved")
	require.Len(t, mgr.recorder.events, 1)
	assert.Equal(t, recordedEvent{&pod, corev1.EventTypeNormal, "Returning", "Leave", "stopping to restart; 100% of the shoots stay reserved"}, mgr.recorder.events[0],
		"the message is the note, never a format")
	assert.Equal(t, []string{"dependency-watchdog-sharding"}, mgr.names)
}

// A replica in dry run never takes the original's leader lease: with it, it would stop the original.
func TestADryRunReplicaRefusesLeaderElection(t *testing.T) {
	_, err := New(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}, Options{ProberConfig: &config.ProberConfig{},
		DryRun: true, LeaderElection: LeaderElection{Enabled: true}})
	assert.ErrorContains(t, err, "must not take the original's leader lease")
}

// A shadow's members advertise dry run and join a group of their own.
func TestADryRunReplicasGroupIsItsOwn(t *testing.T) {
	s := Options{DryRun: true}.ShardingFor(RoleWeeder)
	assert.Equal(t, "dwd-weeder-dry-run", s.GroupName)
	assert.True(t, s.DryRun)
	assert.Equal(t, Options{DryRun: true, Sharding: config.Sharding{GroupName: "g"}}.ShardingFor(RoleProber).GroupName, "g-dry-run")
	assert.True(t, Options{DryRun: true}.Needs().DryRun)
}

// The weeder's sharded caches mark what a list gave, which its readiness changes need; the prober's
// read only the state, and carry no mark.
func TestOnlyTheWeedersCachesMarkWhatAListGave(t *testing.T) {
	for _, mode := range []string{config.CacheShardingServer, config.CacheShardingClient} {
		r := &Replica{opts: Options{Sharding: config.DefaultSharding(""), ProberConfig: &config.ProberConfig{}, WeederConfig: &config.WeederConfig{}}}
		r.opts.Sharding.CacheSharding = mode
		r.shareCaches()
		require.NotNil(t, r.shares[RoleWeeder], mode)
		require.NotNil(t, r.shares[RoleProber], mode)
		assert.Equal(t, weeder.ListedAnnotation, r.shares[RoleWeeder].ListedAnnotation(), mode)
		assert.Empty(t, r.shares[RoleProber].ListedAnnotation(), mode)
	}
}
