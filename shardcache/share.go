package shardcache

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Share is the partitions of one sharding group whose shoots a replica's caches hold: its
// coordinator sets them (Hold) and asks whether the caches have them (Warm) before it acquires a
// partition. Every sharded informer of the group's kinds reads it. Safe for concurrent use.
type Share struct {
	partitions sharding.Partitions
	// server says whether the informers ask the API server for the share (shard selectors).
	server bool
	// listedAnnotation: Options.ListedAnnotation.
	listedAnnotation string
	log              logr.Logger
	group            string

	mu      sync.Mutex
	current *shareState
	// changed is closed, and replaced, on every change of current.
	changed   chan struct{}
	informers []*informer
	// ignoredLogged is set once the replica said that the API server ignored its selectors.
	ignoredLogged atomic.Bool
}

// shareState is one version of a share; immutable.
type shareState struct {
	version uint64
	// held is indexed by partition; nil before the first Hold (nothing held).
	held []bool
	// selector is the server's shard selector of held over the namespace (sharding.ShardSelector),
	// nothingSelector for an empty share; "" for partitions that are not Selectable.
	selector string
}

// holds reports whether the state holds the shoot of the given namespace.
func (s *shareState) holds(partitions sharding.Partitions, key string) bool {
	if s.held == nil {
		return false
	}
	p := partitions.Of(key)
	return p >= 0 && p < len(s.held) && s.held[p]
}

// selectorOf is the shard selector of the partitions held marks, nothingSelector for none.
func selectorOf(partitions sharding.Partitions, held []bool) string {
	if s := sharding.ShardSelector(partitions.Ranges(held)); s != "" {
		return s
	}
	return nothingSelector
}

// nothingSelector selects the namespaces whose FNV-1a hash is 0: a selector must name a range, and an
// empty share holds none.
var nothingSelector = sharding.ShardSelector([]sharding.HashRange{{Start: 0, End: 1}})

// Options are a Share's settings.
type Options struct {
	// Partitions is the group's partition function and count.
	Partitions sharding.Partitions
	// Server asks the API server to send only the share (config.CacheShardingServer); it needs
	// Partitions to be Selectable, and is ignored otherwise. Without it the informers filter.
	Server bool
	// Group names the sharding group in logs and metrics.
	Group string
	// Log defaults to a logger that discards.
	Log logr.Logger
	// ListedAnnotation, when set, is put (value "true") on every object its informers give the store
	// from a list (a List, a watch-list's initial events, the list of partitions that came), never on
	// one from a watch event. A list shows only the state at its end: a handler that sees a change of
	// such an object cannot tell which states it passed through since the one before (a relist
	// follows a gap of seconds, after a merged watch ended or the share changed too often within
	// one; docs/caches.md). Only the cache's copy carries it; nothing is written.
	ListedAnnotation string
}

// NewShare returns the share of a group, holding nothing until the first Hold.
func NewShare(opts Options) *Share {
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	// Before the first Hold the share is empty: a server that selects sends nothing.
	empty := &shareState{}
	if opts.Partitions.Selectable() {
		empty.selector = nothingSelector
	}
	return &Share{partitions: opts.Partitions, server: opts.Server && opts.Partitions.Selectable(), listedAnnotation: opts.ListedAnnotation,
		log: log, group: opts.Group, current: empty, changed: make(chan struct{})}
}

// ListedAnnotation is the annotation the share's informers put on what a list gave
// (Options.ListedAnnotation); "" for none.
func (s *Share) ListedAnnotation() string { return s.listedAnnotation }

// Hold sets the partitions the caches hold (indexed by partition): the member's share and the
// partitions it holds. A change makes every sharded informer select the new share within its
// stream, without a restart; partitions that left are dropped from the caches.
func (s *Share) Hold(held []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current.held != nil && slices.Equal(s.current.held, held) {
		return
	}
	next := &shareState{version: s.current.version + 1, held: append([]bool(nil), held...)}
	if s.partitions.Selectable() {
		next.selector = selectorOf(s.partitions, next.held)
	}
	s.current = next
	close(s.changed)
	s.changed = make(chan struct{})
	heldPartitions.WithLabelValues(s.group).Set(float64(countTrue(next.held)))
}

// Warm reports whether every sharded informer of the share holds partition p: it is in the share
// its stream selects and every object of p it received is in the informer's store. The coordinator
// acquires p only then.
func (s *Share) Warm(p int) bool {
	s.mu.Lock()
	informers := s.informers
	s.mu.Unlock()
	if len(informers) == 0 {
		return false // nothing that could hold it
	}
	for _, i := range informers {
		if !i.warm(p) {
			return false
		}
	}
	return true
}

// state returns the current share and the channel closed at its next change.
func (s *Share) state() (*shareState, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, s.changed
}

func (s *Share) add(i *informer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.informers = append(s.informers, i)
}

// ignored records that the API server did not apply a selector for resource: the informer filters
// what it receives instead (memory is still divided, traffic is not). Logged once per share.
func (s *Share) ignored(resource, how string) {
	selectorIgnored.WithLabelValues(s.group, resource).Inc()
	if s.ignoredLogged.CompareAndSwap(false, true) {
		s.log.Info("The API server ignores shard selectors (feature gate ShardedListAndWatch off, or a server before Kubernetes 1.36): this replica filters what it receives, so its memory holds its share but it receives the whole seed",
			"group", s.group, "resource", resource, "seen", how)
	}
}

func countTrue(mask []bool) int {
	n := 0
	for _, b := range mask {
		if b {
			n++
		}
	}
	return n
}
