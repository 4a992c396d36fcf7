package access

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// DefaultInterval is how often Checker asks again while a permission is missing or unknown.
const DefaultInterval = 30 * time.Second

// DefaultMaxInterval is the longest Checker waits between two checks once every permission has an
// answer and no required one is missing: from DefaultInterval, each such check doubles the wait up to
// it. A 403 answer from the seed (WatchForbidden) brings the next check forward, at most one per
// Interval.
const DefaultMaxInterval = 10 * time.Minute

// reviewTimeout bounds one SelfSubjectAccessReview.
const reviewTimeout = 5 * time.Second

// Checker asks the API server whether the replica has each of Permissions, at start and then every
// Interval while one is missing or unknown, backing off to MaxInterval once none is, and at once
// after the seed answered a request 403 (WatchForbidden). It serves the answer as a readiness check.
// It is a manager.Runnable that every replica runs, the leader election's standbys too: a standby
// that could not work once elected is not ready.
type Checker struct {
	Reviews     authorizationclient.SelfSubjectAccessReviewInterface
	Permissions []Permission
	Log         logr.Logger
	Clock       clock.WithTicker
	// Interval is the wait between checks while a permission is missing or unknown; DefaultInterval
	// when zero. MaxInterval bounds the wait once none is; DefaultMaxInterval when zero.
	Interval    time.Duration
	MaxInterval time.Duration

	mu sync.Mutex
	// allowed holds the last answer for each permission; a permission without one is unknown.
	allowed map[Permission]bool
	// forbidden asks the loop for a check (WatchForbidden).
	forbidden chan struct{}
	initOnce  sync.Once
}

func (c *Checker) init() {
	c.initOnce.Do(func() { c.forbidden = make(chan struct{}, 1) })
}

// Start checks until ctx ends.
func (c *Checker) Start(ctx context.Context) error {
	registerMetrics()
	c.init()
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var wait time.Duration
	for {
		c.CheckOnce(ctx)
		checked := clk.Now()
		wait = c.nextWait(wait)
		forbidden, ok := c.await(ctx, clk, wait)
		if !ok {
			return nil
		}
		if !forbidden {
			continue
		}
		wait = 0
		// At most one check a 403 asks for per Interval: a 403 need not be about RBAC (a namespace
		// being deleted, an admission webhook), and a client refused over and over must not make the
		// checker ask more often than it did before it backed off.
		if rest := c.interval() - clk.Since(checked); rest > 0 {
			spacing := clk.NewTimer(rest)
			select {
			case <-ctx.Done():
				spacing.Stop()
				return nil
			case <-spacing.C():
			}
		}
	}
}

// await waits for wait, or until a 403 answer while every required permission is granted (forbidden);
// a 403 while one is missing says nothing new (a cache that may not list retries on its own). ok is
// false once ctx ended.
func (c *Checker) await(ctx context.Context, clk clock.Clock, wait time.Duration) (forbidden, ok bool) {
	timer := clk.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-timer.C():
			return false, true
		case <-c.forbidden:
			if c.settled() {
				return true, true
			}
		}
	}
}

// nextWait is the wait after a check, given the one before it (0 at first): Interval while a
// permission is missing or unknown, else twice the last, at least Interval and at most MaxInterval.
func (c *Checker) nextWait(last time.Duration) time.Duration {
	interval, maxInterval := c.interval(), c.MaxInterval
	if maxInterval <= 0 {
		maxInterval = DefaultMaxInterval
	}
	if !c.settled() || last == 0 {
		return interval
	}
	return max(interval, min(2*last, maxInterval))
}

// interval is Interval, or DefaultInterval when it is not set.
func (c *Checker) interval() time.Duration {
	if c.Interval <= 0 {
		return DefaultInterval
	}
	return c.Interval
}

// settled reports whether every permission has an answer and no required one is missing; an optional
// one missing is how the replica was deployed (Gardener grants no Events), not a reason to ask often.
func (c *Checker) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.Permissions {
		allowed, known := c.allowed[p]
		if !known || (!allowed && !p.Optional) {
			return false
		}
	}
	return true
}

// WatchForbidden wraps a seed client's transport so that an answer 403 Forbidden brings the next
// check forward: a permission taken away shows at once, in the log and in readiness, not after the
// backed-off wait. A 403 while a required permission is known to be missing brings nothing forward.
// The checker's own client must not be wrapped.
func (c *Checker) WatchForbidden(rt http.RoundTripper) http.RoundTripper {
	c.init()
	return forbiddenTransport{next: rt, checker: c}
}

type forbiddenTransport struct {
	next    http.RoundTripper
	checker *Checker
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport underneath.
func (t forbiddenTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t forbiddenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		select {
		case t.checker.forbidden <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// NeedLeaderElection is false: every replica checks, leader or not.
func (c *Checker) NeedLeaderElection() bool { return false }

// CheckOnce asks about every permission once and logs what changed: permissions found missing, or
// found again, one line for the verbs of one resource that one piece of code needs.
func (c *Checker) CheckOnce(ctx context.Context) {
	var lost, granted []Permission
	for _, p := range c.Permissions {
		allowed, err := c.review(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				c.Log.V(1).Info("Cannot check a permission", "permission", p.String(), "err", err)
			}
			continue
		}
		switch c.record(p, allowed) {
		case changedLost:
			lost = append(lost, p)
		case changedGranted:
			granted = append(granted, p)
		}
	}
	for _, g := range byNeed(lost) {
		p := g[0]
		keys := []any{"verbs", verbs(g), "group", p.Group, "resource", p.Resource, "namespace", p.Namespace, "name", p.Name, "neededFor", p.For}
		if p.Optional {
			c.Log.Info("Missing optional permission", append(keys, "without", p.Without)...)
			continue
		}
		// An error: the replica cannot do its work, and stays unready until this is granted.
		c.Log.Error(nil, "Missing permission", keys...)
	}
	for _, g := range byNeed(granted) {
		c.Log.Info("Permission granted", "verbs", verbs(g), "group", g[0].Group, "resource", g[0].Resource,
			"namespace", g[0].Namespace, "name", g[0].Name, "neededFor", g[0].For)
	}
	missingRequired.Set(float64(len(c.missing(false))))
}

// change is what an answer changed.
type change int

const (
	unchanged change = iota
	changedLost
	changedGranted
)

// record keeps an answer and says what it changed: a permission missing at the first answer counts
// as lost.
func (c *Checker) record(p Permission, allowed bool) change {
	c.mu.Lock()
	defer c.mu.Unlock()
	before, known := c.allowed[p]
	if c.allowed == nil {
		c.allowed = map[Permission]bool{}
	}
	c.allowed[p] = allowed
	switch {
	case !allowed && (!known || before):
		return changedLost
	case allowed && known && !before:
		return changedGranted
	}
	return unchanged
}

// byNeed groups permissions that differ only in their verb, in their order.
func byNeed(ps []Permission) [][]Permission {
	var groups [][]Permission
	index := map[Permission]int{}
	for _, p := range ps {
		key := p
		key.Verb = ""
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

// verbs returns the verbs of ps.
func verbs(ps []Permission) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Verb)
	}
	return out
}

// review asks the API server whether this replica may do p.
func (c *Checker) review(ctx context.Context, p Permission) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := c.Reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: p.Verb, Group: p.Group, Resource: p.Resource, Namespace: p.Namespace, Name: p.Name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed && !review.Status.Denied, nil
}

// Allowed reports whether the replica has p by the last answer, and whether there was one.
func (c *Checker) Allowed(p Permission) (allowed, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	allowed, known = c.allowed[p]
	return allowed, known
}

// missing returns the permissions denied or not yet answered; optional ones too when optional.
func (c *Checker) missing(optional bool) []Permission {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Permission
	for _, p := range c.Permissions {
		if allowed := c.allowed[p]; !allowed && (optional || !p.Optional) {
			out = append(out, p)
		}
	}
	return out
}

// ReadyCheck fails while a required permission is missing or not yet checked, naming them.
func (c *Checker) ReadyCheck(*http.Request) error {
	missing := c.missing(false)
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for _, p := range missing {
		names = append(names, p.String())
	}
	return fmt.Errorf("missing or unchecked permissions: %s", strings.Join(names, "; "))
}
