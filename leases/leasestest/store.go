// Package leasestest provides an in-memory leases.Store for tests: compare-and-swap on
// resourceVersion, the API server's error types, and a log of every write that a test can replay as a
// watch would deliver it, with any delay it likes.
package leasestest

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// Event is one write, as a watch would deliver it.
type Event struct {
	// At is the time of the write, from the store's clock.
	At    time.Time
	Lease *coordinationv1.Lease
	// Deleted is true when the write deleted Lease (its last stored state).
	Deleted bool
}

// Store is an in-memory Lease store. It is safe for concurrent use.
type Store struct {
	// Now is the store's clock, read at every write; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	rv      int
	objects map[string]*coordinationv1.Lease
	log     []Event
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{objects: map[string]*coordinationv1.Lease{}}
}

// Get returns a copy of the stored Lease, or a NotFound error.
func (s *Store) Get(_ context.Context, name string) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.objects[name]
	if !ok {
		return nil, apierrors.NewNotFound(leaseResource, name)
	}
	return l.DeepCopy(), nil
}

// Create stores a new Lease, or fails with AlreadyExists.
func (s *Store) Create(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[lease.Name]; ok {
		return nil, apierrors.NewAlreadyExists(leaseResource, lease.Name)
	}
	return s.write(lease), nil
}

// Update replaces a Lease whose resourceVersion is the stored one, or fails with Conflict or NotFound.
func (s *Store) Update(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.objects[lease.Name]
	if !ok {
		return nil, apierrors.NewNotFound(leaseResource, lease.Name)
	}
	if stored.ResourceVersion != lease.ResourceVersion {
		return nil, apierrors.NewConflict(leaseResource, lease.Name, errors.New("the object has been modified"))
	}
	return s.write(lease), nil
}

func (s *Store) write(lease *coordinationv1.Lease) *coordinationv1.Lease {
	s.rv++
	stored := lease.DeepCopy()
	stored.ResourceVersion = strconv.Itoa(s.rv)
	s.objects[stored.Name] = stored
	s.log = append(s.log, Event{At: s.now(), Lease: stored})
	return stored.DeepCopy()
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Holder returns the stored holder of a Lease, "" when it has none or does not exist.
func (s *Store) Holder(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.objects[name]
	if !ok || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Events returns the writes from index from on; the stored Leases in them must not be changed.
func (s *Store) Events(from int) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.log[min(from, len(s.log)):]...)
}

// Delete deletes a Lease whose resourceVersion is resourceVersion, or any version when that is "";
// it fails with Conflict or NotFound.
func (s *Store) Delete(_ context.Context, name, resourceVersion string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.objects[name]
	if !ok {
		return apierrors.NewNotFound(leaseResource, name)
	}
	if resourceVersion != "" && stored.ResourceVersion != resourceVersion {
		return apierrors.NewConflict(leaseResource, name, errors.New("the object has been modified"))
	}
	delete(s.objects, name)
	s.log = append(s.log, Event{At: s.now(), Lease: stored, Deleted: true})
	return nil
}

// List returns copies of every stored Lease in name order, as an up-to-date cache would.
func (s *Store) List() []*coordinationv1.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := InNameOrder(s.objects)
	for i, l := range list {
		list[i] = l.DeepCopy()
	}
	return list
}

// InNameOrder returns the Leases of a map keyed by name, in name order.
func InNameOrder(leases map[string]*coordinationv1.Lease) []*coordinationv1.Lease {
	names := make([]string, 0, len(leases))
	for name := range leases {
		names = append(names, name)
	}
	sort.Strings(names)
	list := make([]*coordinationv1.Lease, 0, len(names))
	for _, name := range names {
		list = append(list, leases[name])
	}
	return list
}
