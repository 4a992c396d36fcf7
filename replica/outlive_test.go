package replica

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// fakeRunner is a runner whose leave ends when left closes.
type fakeRunner struct{ left chan struct{} }

func (f fakeRunner) Outlive(ctx context.Context) <-chan struct{} {
	out := make(chan struct{})
	go func() { <-ctx.Done(); <-f.left; close(out) }()
	return out
}

// addsTo records what was added to a manager.
type addsTo struct {
	manager.Manager
	added []manager.Runnable
}

func (a *addsTo) Add(r manager.Runnable) error {
	a.added = append(a.added, r)
	return nil
}

// A role's runnable (the prober's probe scheduler) goes on after the manager's context ended, until
// the role's member has left: a member that announced its leave works on for the lead.
func TestARolesRunnablesOutliveTheSignalUntilTheMemberLeft(t *testing.T) {
	mgr := &addsTo{}
	runner := fakeRunner{left: make(chan struct{})}
	running := make(chan context.Context, 1)
	require.NoError(t, outliving{Manager: mgr, runner: runner}.Add(manager.RunnableFunc(func(ctx context.Context) error {
		running <- ctx
		<-ctx.Done()
		return nil
	})))
	require.Len(t, mgr.added, 1)
	assert.True(t, mgr.added[0].(manager.LeaderElectionRunnable).NeedLeaderElection(), "the manager's group for it is unchanged")
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- mgr.added[0].Start(ctx) }()
	inner := <-running
	cancel()
	select {
	case <-inner.Done():
		t.Fatal("the runnable stopped with the manager's context, while the member had not left")
	case <-time.After(100 * time.Millisecond): // a window in which nothing may happen
	}
	close(runner.left)
	select {
	case err := <-returned:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the runnable did not stop once the member had left")
	}
}

// A runnable that needs no leader election is stopped by the manager before the runner's group: it is
// added as it is, not made to wait for a runner that the manager stops only after it.
func TestARunnableWithoutLeaderElectionIsNotMadeToOutliveTheRunner(t *testing.T) {
	mgr := &addsTo{}
	r := noElection{}
	require.NoError(t, outliving{Manager: mgr, runner: fakeRunner{left: make(chan struct{})}}.Add(r))
	assert.Equal(t, []manager.Runnable{r}, mgr.added)
}

type noElection struct{}

func (noElection) Start(context.Context) error { return nil }
func (noElection) NeedLeaderElection() bool    { return false }
