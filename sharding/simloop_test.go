package sharding

import "time"

// simLoop is one of a simulated process's two loops, the member loop (leases.Member.Step, and
// Member.Release at shutdown) or the reconcile loop (Coordinator.Reconcile, and Coordinator.Leave at
// shutdown), run as a coroutine. A call runs on a goroutine of its own, but only while the simulation
// waits for it: it runs until it returns, or until one of its store calls suspends it to a later
// simulated moment (an answer that has not arrived yet, a stop still under way, a connection that
// hangs). The two loops of one process thus interleave as real goroutines do, with a store call in
// flight in one while the other runs, and a run is still reproducible from its seed: only one call of
// the whole simulation runs at any time, and it hands control back over channels.
//
// A suspended call holds none of the coordinator's or the member's locks (store calls are made
// outside them), so the other loop never blocks on it.
type simLoop struct {
	active    bool      // a call is under way (and suspended whenever the simulation runs)
	wake      time.Time // when the suspended call goes on
	since     time.Time // when the call under way, or the last one, began
	busyUntil time.Time // the loop waits for handlers' Released until then (stop latency)
	done      func()    // runs on the simulation's goroutine when the call returns
	yield     chan time.Time
	resume    chan bool
	finished  chan struct{}
}

func newSimLoop() *simLoop {
	return &simLoop{yield: make(chan time.Time), resume: make(chan bool), finished: make(chan struct{})}
}

// start runs call on a goroutine of its own and waits until it returns or suspends; done runs when it
// has returned.
func (l *simLoop) start(now time.Time, call, done func()) {
	l.active, l.since, l.done = true, now, done
	go func() {
		call()
		l.finished <- struct{}{}
	}()
	l.wait()
}

// proceed resumes the suspended call; with alive false its process has died, and every store call
// it makes from then on fails at once.
func (l *simLoop) proceed(alive bool) {
	l.resume <- alive
	l.wait()
}

func (l *simLoop) wait() {
	select {
	case l.wake = <-l.yield:
	case <-l.finished:
		l.active = false
		if done := l.done; done != nil {
			l.done = nil
			done()
		}
	}
}

// suspend runs on the call's goroutine: it hands control back to the simulation until the moment
// until or later, and reports whether the process is still alive then.
func (l *simLoop) suspend(until time.Time) bool {
	l.yield <- until
	return <-l.resume
}
