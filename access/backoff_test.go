package access

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeReviews answers every SelfSubjectAccessReview from allowed by verb and counts them.
func fakeReviews(allowed func(verb string) bool, count *atomic.Int32) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		count.Add(1)
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		review.Status.Allowed = allowed(review.Spec.ResourceAttributes.Verb)
		return true, review, nil
	})
	return cs
}

// startChecker runs a checker of backoffPermissions, answered by allowed, with an Interval of 30 s and
// maxInterval, on a fake clock until the test ends; it returns once the first check is done.
func startChecker(t *testing.T, allowed func(verb string) bool, maxInterval time.Duration) (*Checker, *clocktesting.FakeClock, *atomic.Int32) {
	reviews := &atomic.Int32{}
	clk := clocktesting.NewFakeClock(time.Now())
	c := &Checker{Reviews: fakeReviews(allowed, reviews).AuthorizationV1().SelfSubjectAccessReviews(), Permissions: backoffPermissions,
		Interval: 30 * time.Second, MaxInterval: maxInterval, Clock: clk, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return reviews.Load() == int32(len(backoffPermissions)) }, 10*time.Second, time.Millisecond, "the first check")
	return c, clk, reviews
}

// after steps the clock by d once the checker waits for it, and waits for want reviews in all.
func after(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, reviews *atomic.Int32, want int32) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the checker waits")
	clk.Step(d)
	require.Eventually(t, func() bool { return reviews.Load() == want }, 10*time.Second, time.Millisecond,
		"%d reviews after %s more (have %d)", want, d, reviews.Load())
}

// forbidden sends a request through c.WatchForbidden to a server that answers 403.
func forbidden(t *testing.T, c *Checker) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer srv.Close()
	resp, err := (&http.Client{Transport: c.WatchForbidden(http.DefaultTransport)}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
}

var backoffPermissions = []Permission{
	{Verb: "list", Resource: "leases", For: "the leases"},
	{Verb: "create", Group: "events.k8s.io", Resource: "events", For: "Events", Optional: true},
}

// Once every permission has its answer and no required one is missing, the checker asks half as
// often at each check, down to once per MaxInterval; an optional permission missing does not keep it
// asking every Interval (Gardener grants no Events).
func TestTheCheckerBacksOffOnceNoRequiredPermissionIsMissing(t *testing.T) {
	_, clk, reviews := startChecker(t, func(verb string) bool { return verb == "list" }, 2*time.Minute)
	after(t, clk, 30*time.Second, reviews, 4)
	after(t, clk, 59*time.Second, reviews, 4)
	after(t, clk, time.Second, reviews, 6) // 60 s
	after(t, clk, 2*time.Minute, reviews, 8)
	after(t, clk, 2*time.Minute, reviews, 10) // at MaxInterval
}

// While a required permission is missing, the checker asks every Interval.
func TestTheCheckerAsksEveryIntervalWhileARequiredPermissionIsMissing(t *testing.T) {
	c, clk, reviews := startChecker(t, func(string) bool { return false }, 2*time.Minute)
	for n := int32(4); n <= 8; n += 2 {
		after(t, clk, 30*time.Second, reviews, n)
	}
	forbidden(t, c)
	assert.Never(t, func() bool { return reviews.Load() > 8 }, 300*time.Millisecond, 10*time.Millisecond,
		"a 403 while a permission is known to be missing brings no check forward")
	require.Eventually(t, func() bool {
		clk.Step(time.Second)
		return reviews.Load() == 10
	}, 10*time.Second, 10*time.Millisecond, "the next check comes after its interval")
}

// A 403 answer to any client wrapped by WatchForbidden brings the next check forward, unless one ran
// within the last Interval (a client refused over and over must not make the checker ask more often
// than before it backed off); after it the wait starts again from Interval.
func TestA403BringsThePermissionCheckForward(t *testing.T) {
	c, clk, reviews := startChecker(t, func(string) bool { return true }, 10*time.Minute)
	after(t, clk, 30*time.Second, reviews, 4) // the next wait is 60 s
	after(t, clk, 30*time.Second, reviews, 4)

	forbidden(t, c)
	require.Eventually(t, func() bool { return reviews.Load() == 6 }, 10*time.Second, time.Millisecond,
		"a check at once, 30 s before the backed-off one")

	forbidden(t, c)
	assert.Never(t, func() bool { return reviews.Load() > 6 }, 300*time.Millisecond, 10*time.Millisecond,
		"no check within an Interval of the last")
	require.Eventually(t, func() bool {
		clk.Step(time.Second)
		return reviews.Load() == 8
	}, 10*time.Second, 10*time.Millisecond, "the check an Interval after the last")
	after(t, clk, 30*time.Second, reviews, 10)
}
