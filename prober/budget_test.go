package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// budgetState is what b holds and how many answers wait, the growing one included.
func budgetState(b *answerBudget) (held int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	waiting = b.waiters.Len()
	if b.growing != nil {
		waiting++
	}
	return b.held, waiting
}

// awaitWaiting waits until n answers wait for b.
func awaitWaiting(t *testing.T, b *answerBudget, n int) {
	t.Helper()
	require.Eventually(t, func() bool { _, waiting := budgetState(b); return waiting == n }, 5*time.Second, time.Millisecond)
}

func TestAnswerBudget(t *testing.T) {
	ctx := context.Background()
	b := newAnswerBudget(100)
	assert.ErrorContains(t, b.acquire(ctx, 101), "more than the whole budget", "never fits: fails at once")
	assert.ErrorContains(t, b.grow(ctx, 90, 20), "more than the whole budget", "never fits: fails at once")
	require.NoError(t, b.acquire(ctx, 50)) // answer A
	require.NoError(t, b.acquire(ctx, 40)) // answer B

	// A finds no room to grow, and waits for it, holding its 50 bytes.
	grownA := make(chan error, 1)
	go func() { grownA <- b.grow(ctx, 50, 20) }()
	awaitWaiting(t, b, 1)
	// B finds no room either: with A waiting, it fails at once rather than wait holding bytes.
	assert.ErrorContains(t, b.grow(ctx, 40, 5), "another answer waits")
	// A new answer waits in line, holding nothing, behind A: the 10 bytes free are A's.
	acquiredN := make(chan error, 1)
	go func() { acquiredN <- b.acquire(ctx, 5) }()
	awaitWaiting(t, b, 2)

	b.release(40) // B gives up
	require.NoError(t, <-grownA, "the growing answer first")
	require.NoError(t, <-acquiredN, "then the line")
	held, waiting := budgetState(b)
	assert.Equal(t, []any{int64(75), 0}, []any{held, waiting})

	// A wait that ends with its request's context takes nothing, and leaves room to others.
	require.NoError(t, b.acquire(ctx, 25))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.grow(short, 70, 10), context.DeadlineExceeded)
	assert.ErrorIs(t, b.acquire(short, 10), context.DeadlineExceeded)
	held, waiting = budgetState(b)
	assert.Equal(t, []any{int64(100), 0}, []any{held, waiting})
	b.release(100)
	assert.NoError(t, b.grow(ctx, 10, 90), "room again: at once")
}

func TestAnswerBudgetServesItsLineInOrder(t *testing.T) {
	ctx := context.Background()
	b := newAnswerBudget(10)
	require.NoError(t, b.acquire(ctx, 10))
	granted := make(chan error, 3)
	for i, n := range []int64{8, 2, 2} {
		go func() { granted <- b.acquire(ctx, n) }()
		awaitWaiting(t, b, i+1)
	}
	b.release(2)
	held, waiting := budgetState(b)
	assert.Equal(t, []any{int64(8), 3}, []any{held, waiting}, "the 2s fit, but wait behind the 8")
	b.release(8)
	require.NoError(t, <-granted)
	require.NoError(t, <-granted)
	held, waiting = budgetState(b)
	assert.Equal(t, []any{int64(10), 1}, []any{held, waiting}, "the 8 and the first 2 in, in order")
	b.release(8)
	require.NoError(t, <-granted)
	held, waiting = budgetState(b)
	assert.Equal(t, []any{int64(4), 0}, []any{held, waiting})
}

func TestDefaultMaxResponseBytesInFlight(t *testing.T) {
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(limit) })
	for _, tt := range []struct {
		limit, want int64
	}{
		{math.MaxInt64, 64 << 20},            // no limit
		{512 << 20, 64 << 20},                // an eighth of Gardener's limit
		{2 << 30, 256 << 20},                 // an eighth of a larger one
		{100 << 20, DefaultMaxResponseBytes}, // never below the bound of one answer
	} {
		debug.SetMemoryLimit(tt.limit)
		assert.Equal(t, tt.want, DefaultMaxResponseBytesInFlight(DefaultMaxResponseBytes), "memory limit %d", tt.limit)
	}
}

// byteMeter counts the bytes of shoot answers read from the wire and not yet closed, and their peak.
// Each answer stops at half way until all answers got there, or one of them ended, or the others all
// wait for the budget (openWhenStuck): without a budget, every answer is half read at the same moment.
type byteMeter struct {
	half    int64
	answers int

	mu       sync.Mutex
	inFlight int64
	peak     int64
	halfWay  int
	gate     chan struct{}
	opened   bool
}

func newByteMeter(half int64, answers int) *byteMeter {
	return &byteMeter{half: half, answers: answers, gate: make(chan struct{})}
}

func (m *byteMeter) add(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight += n
	m.peak = max(m.peak, m.inFlight)
}

// arrived records an answer half way, and returns the gate it waits at.
func (m *byteMeter) arrived() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.halfWay++; m.halfWay == m.answers {
		m.openLocked()
	}
	return m.gate
}

// ended opens the gate: an answer ended, so the others will not all get half way.
func (m *byteMeter) ended() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.openLocked()
}

// openWhenStuck opens the gate once every answer is either half way or waiting for room in b: the
// answers at the gate hold the bytes the others wait for, and would hold them until their requests
// time out. The gate stands for the network, which real answers do not wait on each other for.
func (m *byteMeter) openWhenStuck(t *testing.T, b *answerBudget) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = wait.PollUntilContextCancel(ctx, time.Millisecond, false, func(context.Context) (bool, error) {
			waiting := 0
			if b != nil { // nil: no budget, as a mutant may have it
				_, waiting = budgetState(b)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.halfWay > 0 && m.halfWay+waiting >= m.answers {
				m.openLocked()
			}
			return m.opened, nil
		})
	}()
}

func (m *byteMeter) openLocked() {
	if !m.opened {
		m.opened = true
		close(m.gate)
	}
}

func (m *byteMeter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = &meteredBody{ReadCloser: resp.Body, m: m, ctx: req.Context()}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// meteredBody is one answer's body as the wire gives it, under a byteMeter.
type meteredBody struct {
	io.ReadCloser
	m      *byteMeter
	ctx    context.Context
	read   int64
	waited bool
	closed bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if !b.waited && b.read >= b.m.half {
		b.waited = true
		select {
		case <-b.m.arrived():
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	if !b.waited && b.read+int64(len(p)) > b.m.half {
		p = p[:b.m.half-b.read]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	b.m.add(int64(n))
	return n, err
}

func (b *meteredBody) Close() error {
	if !b.closed {
		b.closed = true
		b.m.add(-b.read)
	}
	return b.ReadCloser.Close()
}

// Ten huge answers at once stay within the replica's budget: the bytes read and not yet given back
// never exceed it, every answer is either decoded or refused as inconclusive (memory_budget), and
// at least one is decoded.
func TestHugeAnswersAtOnceStayWithinTheBudget(t *testing.T) {
	const answers = 10
	body := leaseListJSON(t, 8000) // about 1 MiB
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush() // no Content-Length: the length is learnt as the body is read
		_, _ = w.Write(body[len(body)/2:])
	}))
	t.Cleanup(server.Close)
	budget := int64(3 * len(body))
	meter := newByteMeter(int64(len(body)/2), answers)
	clients := &ShootClients{Timeout: 30 * time.Second, MaxItems: 20000, MaxBytes: 4 << 20, MaxBytesInFlight: budget, Wrap: meter.wrap}
	errs := make(chan error, answers)
	for i := range answers {
		c, err := clients.For(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("shoot--p--%d", i), Name: "access"},
			Data: map[string][]byte{KubeconfigKey: kubeconfig(server.URL, map[string]any{"token": "t"})}})
		require.NoError(t, err)
		go func() {
			_, _, err := c.NodeLeases(context.Background(), true)
			meter.ended()
			errs <- err
		}()
	}
	meter.openWhenStuck(t, clients.budget)
	decoded := 0
	for range answers {
		err := <-errs
		var inc inconclusive
		if err == nil {
			decoded++
		} else if assert.True(t, errors.As(err, &inc), "%v", err) {
			assert.Equal(t, reasonMemoryBudget, inc.reason)
		}
	}
	t.Logf("%d of %d answers of %d KiB decoded; at most %d KiB read at once, budget %d KiB", decoded, answers, len(body)>>10, meter.peak>>10, budget>>10)
	assert.LessOrEqual(t, meter.peak, budget)
	assert.GreaterOrEqual(t, meter.peak, int64(len(body)/2), "the answers were read")
	assert.Positive(t, decoded)
	assert.Zero(t, clients.budget.held, "every byte given back")
}

// A probe whose answer waits for room in the budget until its request times out is inconclusive
// (reason memory_budget): it decides nothing, and is not retried.
func TestAProbeWhoseBudgetWaitEndsIsInconclusive(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.m.Clients.Timeout = 500 * time.Millisecond
	f.m.Clients.MaxBytesInFlight = 1 << 20
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	assert.NotEqual(t, resultInconclusive, f.cycles(t, 1, 10*time.Second)[0], "the budget has room")

	budget := f.m.Clients.budget
	require.NoError(t, budget.acquire(context.Background(), budget.size), "other answers hold the whole budget")
	requests := f.shoot.consistent.Load() + f.shoot.cached.Load()
	refused := testutil.ToFloat64(inconclusiveTotal.WithLabelValues(reasonMemoryBudget))
	for i, result := range f.cycles(t, 6, 10*time.Second) {
		assert.Equal(t, resultInconclusive, result, "cycle %d", i)
	}
	assert.Equal(t, refused+6, testutil.ToFloat64(inconclusiveTotal.WithLabelValues(reasonMemoryBudget)), "one per cycle: no retry")
	assert.Equal(t, requests, f.shoot.consistent.Load()+f.shoot.cached.Load(), "no lease read")
	_, started := f.flowStarted()
	assert.False(t, started, "no scaling on an inconclusive probe")

	budget.release(budget.size)
	results := f.cycles(t, 6, 10*time.Second)
	assert.NotContains(t, results, resultInconclusive, "room again: probed")
}
