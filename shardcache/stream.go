package shardcache

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// stream is the watch an informer's reflector reads: the server's events of the share the store
// holds, and, when the share changes, the change itself, within the stream: the objects that left
// are deleted, those that came are added, and the stream goes on selecting the new share. A
// reflector that relisted instead would wait its backoff first (0.8–1.6 s) and replace its whole
// store; the stream does it in one list of the new share and sends only what differs.
type stream struct {
	ctx    context.Context
	i      *informer
	server watch.Interface
	// opts are the reflector's watch options (selectors, bookmarks, timeout), for the watch of a
	// new share.
	opts metav1.ListOptions
	out  chan watch.Event
	done chan struct{}
	stop sync.Once
}

func newStream(ctx context.Context, i *informer, server watch.Interface, opts metav1.ListOptions) *stream {
	opts.SendInitialEvents, opts.ResourceVersionMatch = nil, ""
	s := &stream{ctx: ctx, i: i, server: server, opts: opts, out: make(chan watch.Event), done: make(chan struct{})}
	go s.run()
	return s
}

// ResultChan is the stream's events.
func (s *stream) ResultChan() <-chan watch.Event { return s.out }

// Stop ends the stream and the server's watch under it.
func (s *stream) Stop() { s.stop.Do(func() { close(s.done) }) }

func (s *stream) run() {
	defer close(s.out)
	defer func() { s.server.Stop() }()
	for {
		current, changed := s.i.share.state()
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
		case ev, ok := <-s.server.ResultChan():
			if !ok || !s.handle(ev) {
				return
			}
		}
	}
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

// handle passes a server event on, or drops an object outside the share the store holds: the
// server ignored the selector, or the informer filters.
func (s *stream) handle(ev watch.Event) bool {
	i := s.i
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		o, err := meta.Accessor(ev.Object)
		if err != nil {
			return s.send(ev)
		}
		i.mu.Lock()
		held := i.held
		if !held.holds(i.share.partitions, i.shardKey(o)) {
			i.mu.Unlock()
			received.WithLabelValues(i.share.group, i.resource, "watch", "dropped").Inc()
			if i.selects(held) {
				i.share.ignored(i.resource, "watch event outside the selector")
			}
			return true
		}
		key := storeKey(o)
		if ev.Type == watch.Deleted {
			delete(i.forwarded, key)
			delete(i.pending, key)
		} else {
			i.forwarded[key] = o.GetResourceVersion()
			if i.initial {
				i.pending[key] = struct{}{}
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

// reselect changes the stream to the share next: it lists next, sends what differs from what the
// store was given (deletes for objects gone or outside next, adds and updates for the rest), a
// bookmark at the list's resource version, and watches next from there. On a failure it ends the
// stream with an expired error, so that the reflector lists the current share itself.
func (s *stream) reselect(next *shareState) bool {
	i := s.i
	s.server.Stop()
	opts := i.withSelector(metav1.ListOptions{LabelSelector: s.opts.LabelSelector, FieldSelector: s.opts.FieldSelector}, next)
	obj, err := i.inner.ListWithContext(s.ctx, opts)
	if err != nil {
		return s.expire("listing the new share: " + err.Error())
	}
	kept, err := i.filterList(obj, next, "reselect")
	if err != nil {
		return s.expire(err.Error())
	}
	rv := ""
	if l, err := meta.ListAccessor(obj); err == nil {
		rv = l.GetResourceVersion()
	}
	events := i.diff(obj, kept, next)
	for _, ev := range events {
		if !s.send(ev) {
			return false
		}
	}
	if !s.send(watch.Event{Type: watch.Bookmark, Object: i.object("", rv)}) {
		return false
	}
	opts.ResourceVersion, opts.AllowWatchBookmarks, opts.TimeoutSeconds = rv, s.opts.AllowWatchBookmarks, s.opts.TimeoutSeconds
	w, err := i.inner.WatchWithContext(s.ctx, opts)
	if err != nil {
		return s.expire("watching the new share: " + err.Error())
	}
	s.server = w
	reselects.WithLabelValues(i.share.group, i.resource).Inc()
	return true
}

// diff records next as the share the store holds, with the listed objects (kept, the items of
// list), and returns the events that bring the store there from what it was given.
func (i *informer) diff(list runtime.Object, kept []metav1.Object, next *shareState) []watch.Event {
	items, _ := meta.ExtractList(list)
	i.mu.Lock()
	defer i.mu.Unlock()
	before, held := i.forwarded, i.held
	after := make(map[string]string, len(kept))
	var events []watch.Event
	for n, o := range kept {
		key, rv := storeKey(o), o.GetResourceVersion()
		after[key] = rv
		old, had := before[key]
		switch {
		case !had:
			events = append(events, watch.Event{Type: watch.Added, Object: items[n]})
		case old != rv:
			events = append(events, watch.Event{Type: watch.Modified, Object: items[n]})
		}
		if !held.holds(i.share.partitions, i.shardKey(o)) {
			i.pending[key] = struct{}{}
		}
	}
	for key, rv := range before {
		if _, ok := after[key]; !ok {
			events = append(events, watch.Event{Type: watch.Deleted, Object: i.object(key, rv)})
			delete(i.pending, key)
		}
	}
	i.forwarded, i.held = after, next
	i.count()
	return events
}

// expire ends the stream with an expired error: the reflector lists again, selecting the current
// share.
func (s *stream) expire(reason string) bool {
	s.i.share.log.Info("Could not change a cache to the replica's new share within its watch; it lists the share again",
		"group", s.i.share.group, "resource", s.i.resource, "reason", reason)
	status := apierrors.NewResourceExpired(reason).ErrStatus
	s.send(watch.Event{Type: watch.Error, Object: &status})
	return false
}
