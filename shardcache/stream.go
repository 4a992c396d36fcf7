package shardcache

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// stream is the watch an informer's reflector reads: the server's events of the share the store
// holds and, when the share changes, the change itself, within the stream. The objects of the
// partitions that left are deleted at once; those of the partitions that came are listed (only
// them), added, and watched from the list's resource version by a second server watch whose events
// the stream merges with the first's. A reflector that relisted instead would wait its backoff
// first (0.8–1.6 s) and list the whole share. When a watch of a merged stream ends, the stream ends
// with an "expired" error: the reflector then lists the current share in one piece, after the
// partitions were acquired.
type stream struct {
	// ctx ends with the reflector's context or Stop, and with it a change of share in flight.
	ctx    context.Context
	cancel context.CancelFunc
	i      *informer
	// opts are the reflector's watch options (selectors, bookmarks, timeout), for the watches of new
	// partitions.
	opts metav1.ListOptions
	out  chan watch.Event
	done chan struct{}
	stop sync.Once
	// sources are the server's watches the stream merges, the reflector's first; events arrive on
	// events, tagged with their source.
	sources []*source
	events  chan sourced
	wg      sync.WaitGroup
}

// maxSources bounds the server watches of one stream: another change of share that adds partitions
// ends the stream, and the reflector lists the share in one piece (a watch of a filtering cache
// receives the whole kind).
const maxSources = 3

// source is one server watch of a stream. asked is the share it selects: an object outside it is not
// the source's to send, so the server ignored the selector (or the informer filters). accept are the
// partitions whose events it passes on: asked, less the partitions that left the share since, so
// that a partition that comes back, watched anew, is never watched twice.
type source struct {
	w      watch.Interface
	asked  *shareState
	accept []bool
	// rv is the resource version of the last event the watch sent, or the one it started from: a
	// watch of fewer partitions resumes there, and after a change of share that only dropped
	// partitions a bookmark there keeps the reflector's resume point from going back to the
	// deletes' versions.
	rv string
}

// sourced is an event of a source's watch w, or its end (closed).
type sourced struct {
	src    *source
	w      watch.Interface
	ev     watch.Event
	closed bool
}

func newStream(ctx context.Context, i *informer, server watch.Interface, scope *shareState, opts metav1.ListOptions) *stream {
	opts.SendInitialEvents, opts.ResourceVersionMatch = nil, ""
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{ctx: ctx, cancel: cancel, i: i, opts: opts, out: make(chan watch.Event), done: make(chan struct{}), events: make(chan sourced)}
	s.add(newSource(server, scope, opts.ResourceVersion))
	go s.run()
	return s
}

func newSource(w watch.Interface, asked *shareState, rv string) *source {
	return &source{w: w, asked: asked, accept: slices.Clone(asked.held), rv: rv}
}

// accepts reports whether the source passes on the events of namespace ns.
func (src *source) accepts(partitions sharding.Partitions, ns string) bool {
	p := partitions.Of(ns)
	return src.accept != nil && p >= 0 && p < len(src.accept) && src.accept[p]
}

// ResultChan is the stream's events.
func (s *stream) ResultChan() <-chan watch.Event { return s.out }

// Stop ends the stream and the server's watches under it, and a change of share in flight.
func (s *stream) Stop() {
	s.stop.Do(func() {
		close(s.done)
		s.cancel()
	})
}

// add starts passing the events of src to the stream.
func (s *stream) add(src *source) {
	s.sources = append(s.sources, src)
	s.follow(src, src.w)
}

// follow passes the events of w, the watch of src, to the stream, and its end.
func (s *stream) follow(src *source, w watch.Interface) {
	s.wg.Go(func() {
		for ev := range w.ResultChan() {
			select {
			case s.events <- sourced{src: src, w: w, ev: ev}:
			case <-s.done:
				return
			}
		}
		select {
		case s.events <- sourced{src: src, w: w, closed: true}:
		case <-s.done:
		}
	})
}

func (s *stream) run() {
	defer close(s.out)
	defer func() {
		s.Stop()
		for _, src := range s.sources {
			src.w.Stop()
		}
		s.wg.Wait()
	}()
	for {
		current, changed := s.i.share.state()
		if s.stopped() {
			return
		}
		if s.i.stale(current) {
			if !s.reselect(current) {
				return
			}
			continue
		}
		select {
		case <-s.done:
			return
		case <-s.ctx.Done():
			return
		case <-changed:
		case e := <-s.events:
			if !s.next(e) {
				return
			}
		}
	}
}

// stopped reports whether the stream was stopped or its context ended.
func (s *stream) stopped() bool {
	select {
	case <-s.done:
		return true
	case <-s.ctx.Done():
		return true
	default:
		return false
	}
}

// next passes on an event of a source; false when the stream ends. A stream of one watch ends when
// it does, and the reflector watches again from the last resource version it saw; a merged stream
// cannot resume so, as its watches stand at different resource versions.
func (s *stream) next(e sourced) bool {
	if e.w != e.src.w {
		return true // a watch replaced by one of fewer partitions, which resumes where it was
	}
	merged := len(s.sources) > 1
	switch {
	case e.closed && merged:
		return s.expire("a watch of the merged share ended")
	case e.closed:
		return false
	case e.ev.Type == watch.Error && merged:
		return s.expire("a watch of the merged share failed")
	case e.ev.Type == watch.Error:
		// The reflector ends its watch on an error; nothing may change the state after it.
		s.send(e.ev)
		return false
	}
	if o, err := meta.Accessor(e.ev.Object); err == nil && o.GetResourceVersion() != "" {
		e.src.rv = o.GetResourceVersion()
	}
	return s.handle(e.src, e.ev)
}

// stale reports whether the store holds another share than current, and may change to it now (not
// while a watch-list's initial events are being received).
func (i *informer) stale(current *shareState) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.held != nil && !i.initial && i.held.version != current.version
}

// send passes an event to the reflector; false once the stream is stopped.
func (s *stream) send(ev watch.Event) bool {
	select {
	case s.out <- ev:
		return true
	case <-s.done:
		return false
	case <-s.ctx.Done():
		return false
	}
}

// handle passes a server event on, or drops an object outside the share the store holds or outside
// what its source selects; the latter tells that the server ignored the selector.
func (s *stream) handle(src *source, ev watch.Event) bool {
	i := s.i
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		o, err := meta.Accessor(ev.Object)
		if err != nil {
			return s.send(ev)
		}
		shardKey, key := i.shardKey(o), storeKey(o)
		i.mu.Lock()
		if !i.held.holds(i.share.partitions, shardKey) || !src.accepts(i.share.partitions, shardKey) {
			i.mu.Unlock()
			received.WithLabelValues(i.share.group, i.resource, "watch", "dropped").Inc()
			if i.selects(src.asked) && !src.asked.holds(i.share.partitions, shardKey) {
				i.share.ignored(i.resource, "watch event outside the selector")
			}
			return true
		}
		if rv, known := i.forwarded[key]; (ev.Type == watch.Deleted && !known) || (ev.Type != watch.Deleted && known && rv == o.GetResourceVersion()) {
			// What the store was given already (the list of a partition that came raced its watch).
			i.mu.Unlock()
			return true
		}
		if ev.Type == watch.Deleted {
			delete(i.forwarded, key)
			delete(i.pending, key)
		} else {
			i.forwarded[key] = o.GetResourceVersion()
			if i.initial { // a watch-list's initial events are a list
				i.pending[key] = struct{}{}
				i.markListed(o)
			}
		}
		i.count()
		i.mu.Unlock()
		received.WithLabelValues(i.share.group, i.resource, "watch", "kept").Inc()
	case watch.Bookmark:
		if o, err := meta.Accessor(ev.Object); err == nil && o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			if !s.send(ev) {
				return false
			}
			i.mu.Lock()
			i.initial = false
			i.mu.Unlock()
			return true
		}
	}
	return s.send(ev)
}

// reselect changes the stream to the share next: it deletes the objects of the partitions that left,
// lists those of the partitions that came (only them), adds them, and watches them from the list's
// resource version beside the stream's other watches. On a failure it ends the stream with an
// expired error, so that the reflector lists the current share itself.
func (s *stream) reselect(next *shareState) bool {
	i := s.i
	if len(s.sources) >= maxSources {
		return s.expire("the share changed too often within one watch")
	}
	i.mu.Lock()
	came := &shareState{version: next.version, held: slices.Clone(next.held)}
	for p, before := 0, i.held.held; p < len(came.held); p++ {
		came.held[p] = came.held[p] && (before == nil || !before[p])
	}
	i.mu.Unlock()
	if i.share.partitions.Selectable() {
		came.selector = selectorOf(i.share.partitions, came.held)
	}
	var added []watch.Event
	var w watch.Interface
	var rv string
	if countTrue(came.held) > 0 {
		var err error
		if added, w, rv, err = s.listAndWatch(came); err != nil {
			if s.stopped() {
				return false
			}
			return s.expire(err.Error())
		}
	}
	gone := s.drop(next)
	if w != nil {
		s.add(newSource(w, came, rv))
	}
	if err := s.narrow(); err != nil {
		if s.stopped() {
			return false
		}
		return s.expire(err.Error())
	}
	if w == nil && len(s.sources) == 1 && s.sources[0].rv != "" {
		// Only deletes, of older versions: the reflector resumes from the watch's last one.
		added = append(added, watch.Event{Type: watch.Bookmark, Object: i.object("", s.sources[0].rv)})
	}
	for _, ev := range append(gone, added...) {
		if !s.send(ev) {
			return false // torn: the next watch makes the reflector list
		}
	}
	i.mu.Lock()
	i.torn = false
	i.mu.Unlock()
	reselects.WithLabelValues(i.share.group, i.resource).Inc()
	return true
}

// listAndWatch lists the objects of the partitions of came, records them as given to the store (and
// pending until it has them), and watches them from the list's resource version.
//
// The list asks for a state not older than the stream's own resource version, which the API server's
// watch cache answers as soon as it has that version (it has, when the list reaches the API server the
// watch came from; another one behind the same address may wait for it, or answer "too large resource
// version", which ends the stream and the reflector lists the share in one piece). A
// consistent read (no resource version) would first ask etcd for its current revision and wait for
// the cache to reach it; a kind nobody writes (Machines, the dependents) reaches it only by a progress
// notification, and a cache that does not catch up within its timeout sends the list to etcd. Any
// state at least as new as the stream is as good: the watch of the partitions that came starts where
// the list stands.
func (s *stream) listAndWatch(came *shareState) ([]watch.Event, watch.Interface, string, error) {
	i := s.i
	opts := i.withSelector(metav1.ListOptions{LabelSelector: s.opts.LabelSelector, FieldSelector: s.opts.FieldSelector}, came)
	if rv := s.sources[0].rv; rv != "" {
		opts.ResourceVersion, opts.ResourceVersionMatch = rv, metav1.ResourceVersionMatchNotOlderThan
	}
	obj, err := i.inner.ListWithContext(s.ctx, opts)
	if err != nil {
		return nil, nil, "", err
	}
	kept, err := i.filterList(obj, came, "reselect")
	if err != nil {
		return nil, nil, "", err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, nil, "", err
	}
	l, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, nil, "", err
	}
	rv := l.GetResourceVersion()
	w, err := i.inner.WatchWithContext(s.ctx, s.watchOptions(came, rv))
	if err != nil {
		return nil, nil, "", err
	}
	events := make([]watch.Event, 0, len(kept))
	i.mu.Lock()
	defer i.mu.Unlock()
	i.torn = true
	for n, o := range kept {
		key := storeKey(o)
		i.forwarded[key] = o.GetResourceVersion()
		i.pending[key] = struct{}{}
		events = append(events, watch.Event{Type: watch.Added, Object: items[n]})
	}
	return events, w, rv, nil
}

// watchOptions are the options of a watch of the share state from resource version rv, with the
// reflector's selectors, bookmarks and timeout.
func (s *stream) watchOptions(state *shareState, rv string) metav1.ListOptions {
	return s.i.withSelector(metav1.ListOptions{LabelSelector: s.opts.LabelSelector, FieldSelector: s.opts.FieldSelector,
		ResourceVersion: rv, AllowWatchBookmarks: s.opts.AllowWatchBookmarks, TimeoutSeconds: s.opts.TimeoutSeconds}, state)
}

// narrow ends each watch that passes on no partition any more, unless it is the only one (a watch
// of a share that was empty, in a filtering cache, receives the whole kind), and renews, where the
// server selects, each watch that passes on fewer partitions than it asks for with a watch of just
// those, from the resource version it had reached, so that the server stops sending what left.
func (s *stream) narrow() error {
	i := s.i
	kept := s.sources[:0]
	for _, src := range s.sources {
		if countTrue(src.accept) == 0 && len(s.sources) > 1 {
			src.w.Stop()
			src.w = nil // its end is not the stream's
			continue
		}
		if slices.Equal(src.accept, src.asked.held) || !i.selects(src.asked) || src.rv == "" {
			kept = append(kept, src)
			continue
		}
		asked := &shareState{held: slices.Clone(src.accept)}
		asked.selector = selectorOf(i.share.partitions, asked.held)
		w, err := i.inner.WatchWithContext(s.ctx, s.watchOptions(asked, src.rv))
		if err != nil {
			return err
		}
		src.w.Stop()
		src.w, src.asked = w, asked
		s.follow(src, w)
		kept = append(kept, src)
	}
	s.sources = kept
	return nil
}

// drop records next as the share the store holds, narrows what each watch passes on to it, and
// returns the deletes of the objects the store was given outside next.
func (s *stream) drop(next *shareState) []watch.Event {
	i := s.i
	i.mu.Lock()
	defer i.mu.Unlock()
	i.torn = true
	for _, src := range s.sources {
		for p := range src.accept {
			src.accept[p] = src.accept[p] && p < len(next.held) && next.held[p]
		}
	}
	var events []watch.Event
	for key, rv := range i.forwarded {
		if ns, _, _ := toolscache.SplitMetaNamespaceKey(key); !next.holds(i.share.partitions, ns) {
			events = append(events, watch.Event{Type: watch.Deleted, Object: i.tombstone(key, rv)})
			delete(i.forwarded, key)
			delete(i.pending, key)
		}
	}
	i.held = next
	i.count()
	return events
}

// expire ends the stream with an expired error: the reflector lists again, selecting the current
// share.
func (s *stream) expire(reason string) bool {
	s.i.share.log.V(1).Info("A sharded cache lists its share again",
		"group", s.i.share.group, "resource", s.i.resource, "reason", reason)
	status := apierrors.NewResourceExpired(reason).ErrStatus
	s.send(watch.Event{Type: watch.Error, Object: &status})
	return false
}
