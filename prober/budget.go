package prober

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sync"
)

// reasonMemoryBudget is the reason of dwd_probe_inconclusive_total for an answer that the replica's
// budget of shoot answer bytes in flight had no room for.
const reasonMemoryBudget = "memory_budget"

// The default budget of shoot answer bytes in flight (see DefaultMaxResponseBytesInFlight).
const (
	// defaultBytesInFlight is the budget without a memory limit: with the copies below, about 400 MiB
	// at worst, under the 512 MiB Gardener gives the watchdog.
	defaultBytesInFlight = 64 << 20
	// memoryLimitShare is the part of the memory limit the budget gets: while an answer is decoded, its
	// bytes are held twice (the counted read and client-go's copy) and its objects cost three to five
	// times their bytes, so answers in flight may cost up to seven times the budget.
	memoryLimitShare = 8
)

// DefaultMaxResponseBytesInFlight is the budget of shoot answer bytes in flight of a replica whose
// Options leave it at zero: an eighth of the Go memory limit (GOMEMLIMIT, debug.SetMemoryLimit) when
// one is set, else 64 MiB; never less than maxResponseBytes, so that an answer within the bound of one
// answer can always be read.
func DefaultMaxResponseBytesInFlight(maxResponseBytes int64) int64 {
	budget := int64(defaultBytesInFlight)
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		budget = limit / memoryLimitShare
	}
	return max(budget, maxResponseBytes)
}

// budgetChunk is what an answer of unknown length takes from the budget at first, and then each time
// it has read all it holds.
const budgetChunk = 256 << 10

// answerBudget bounds the bytes of shoot answers that one replica holds at once, across all its shoot
// clients: each answer is bounded on its own (ShootClients.MaxBytes), but every probe worker may hold
// one, and the decoded objects cost several times their bytes.
//
// An answer takes its bytes when its headers arrive: its Content-Length, or budgetChunk when the
// length is unknown. Holding nothing, it waits for them in line (first come, first served) until its
// request's context ends. An answer that turns out longer takes one more chunk each time it has read
// all it holds. Answers that hold bytes while they wait for each other's bytes could all wait until
// their requests time out, so only one of them may wait at a time, ahead of the line, and nothing is
// handed out meanwhile that it would then lack; another that finds no room fails at once and gives
// back what it held. Every other holder reads on, finishes or fails, and gives its bytes back, so the
// one that waits gets its chunk: there is no deadlock, and under pressure one answer at a time is
// still read to its end. An answer gives its bytes back when it has been decoded (or closed, when
// nobody decodes it).
//
// answerBudget is safe for concurrent use; mu guards held, growing and the line of waiters.
type answerBudget struct {
	size int64

	mu      sync.Mutex
	held    int64
	growing *budgetWaiter // the one answer that holds bytes and waits for more; nil: none
	waiters list.List     // of *budgetWaiter holding nothing, first come first
}

// budgetWaiter is an answer waiting for n bytes; ready is closed once they are its.
type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// newAnswerBudget returns a budget of size bytes.
func newAnswerBudget(size int64) *answerBudget {
	return &answerBudget{size: size}
}

// acquire takes n bytes for an answer that holds none, waiting in line for them until ctx ends. n
// larger than the whole budget fails at once.
func (b *answerBudget) acquire(ctx context.Context, n int64) error {
	if n > b.size {
		return fmt.Errorf("%d bytes, more than the whole budget of %d", n, b.size)
	}
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.roomLocked() >= n {
		b.held += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()
	return b.wait(ctx, w, func() { b.waiters.Remove(elem) })
}

// grow takes n more bytes for an answer that holds holding bytes: at once when there is room, else by
// waiting until ctx ends if no other answer that holds bytes waits, else not at all.
func (b *answerBudget) grow(ctx context.Context, holding, n int64) error {
	if holding+n > b.size {
		return fmt.Errorf("more than the whole budget of %d bytes", b.size)
	}
	b.mu.Lock()
	if b.roomLocked() >= n {
		b.held += n
		b.mu.Unlock()
		return nil
	}
	if b.growing != nil {
		b.mu.Unlock()
		return fmt.Errorf("no room beyond the %d bytes read, and another answer waits for room", holding)
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.growing = w
	b.mu.Unlock()
	return b.wait(ctx, w, func() { b.growing = nil })
}

// roomLocked is what may be handed out now: the bytes not held, less those the growing answer waits
// for. b.mu is held.
func (b *answerBudget) roomLocked() int64 {
	room := b.size - b.held
	if b.growing != nil {
		room -= b.growing.n
	}
	return room
}

// wait waits until w is granted or ctx ends; then leave takes w out of where it waited, under b.mu.
func (b *answerBudget) wait(ctx context.Context, w *budgetWaiter, leave func()) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted as ctx ended: the bytes are held, and go back
		b.held -= w.n
	default:
		leave()
	}
	b.grantLocked() // others may go on without this waiter, or with its bytes
	return fmt.Errorf("waited for %d bytes until the request's context ended: %w", w.n, ctx.Err())
}

// release gives n bytes back, and hands them out: to the growing answer first, then to the line in
// order.
func (b *answerBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	b.grantLocked()
}

// grantLocked hands bytes to the growing answer if it fits, then to the waiters at the front of the
// line while they fit; nothing to the line while the growing answer waits. b.mu is held.
func (b *answerBudget) grantLocked() {
	if g := b.growing; g != nil {
		if b.held+g.n > b.size {
			return
		}
		b.held += g.n
		close(g.ready)
		b.growing = nil
	}
	for front := b.waiters.Front(); front != nil; front = b.waiters.Front() {
		w := front.Value.(*budgetWaiter)
		if b.held+w.n > b.size {
			return
		}
		b.held += w.n
		close(w.ready)
		b.waiters.Remove(front)
	}
}

// budgetHold is what one answer holds of the budget. It is used by its request's goroutine only.
type budgetHold struct {
	budget   *answerBudget
	n        int64
	released bool
}

// take waits for the first n bytes of the answer (see answerBudget.acquire).
func (h *budgetHold) take(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if err := h.budget.acquire(ctx, n); err != nil {
		return budgetRefusal(err)
	}
	h.n += n
	return nil
}

// grow takes budgetChunk more bytes (see answerBudget.grow).
func (h *budgetHold) grow(ctx context.Context) error {
	if err := h.budget.grow(ctx, h.n, budgetChunk); err != nil {
		return budgetRefusal(err)
	}
	h.n += budgetChunk
	return nil
}

// release gives the answer's bytes back; later calls do nothing.
func (h *budgetHold) release() {
	if !h.released {
		h.released = true
		h.budget.release(h.n)
	}
}

// budgetRefusal is the error of an answer the budget had no room for: an inconclusive read, never
// retried (the answer would be as large again).
func budgetRefusal(cause error) error {
	return inconclusive{reason: reasonMemoryBudget, msg: fmt.Sprintf(
		"the replica's budget of shoot answer bytes in flight (--shoot-max-response-bytes-in-flight) has no room for this answer: %v", cause)}
}

// budgetBody reads an answer's body no further than its hold allows, growing the hold by a chunk each
// time it has read all it holds. For an answer whose length was known (and taken whole), a read past
// it only looks for the end: http.Transport never gives more than Content-Length.
type budgetBody struct {
	io.ReadCloser
	ctx   context.Context // the request's
	hold  *budgetHold
	meta  *answerMeta // records a refusal; nil for a request without one
	known bool
	read  int64
}

func (b *budgetBody) Read(p []byte) (int, error) {
	if len(p) > 0 && b.read >= b.hold.n {
		if b.known {
			return b.pastTheEnd(p)
		}
		if err := b.hold.grow(b.ctx); err != nil {
			return 0, b.meta.refuse(err)
		}
	}
	if room := b.hold.n - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}

// pastTheEnd reads one byte past the known length, which can only be the end of the body.
func (b *budgetBody) pastTheEnd(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p[:1])
	if n > 0 {
		return 0, b.meta.refuse(fmt.Errorf("%w: the body is longer than its Content-Length", ErrAnswerTooLarge))
	}
	return 0, err
}

// Close closes the body; without an answerMeta nobody decodes the answer afterwards, so its bytes go
// back now.
func (b *budgetBody) Close() error {
	err := b.ReadCloser.Close()
	if b.meta == nil {
		b.hold.release()
	}
	return err
}
