package leases

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Store reads and writes the Leases of one namespace. Update must fail with a Conflict error (see
// k8s.io/apimachinery/pkg/api/errors) when the Lease's resourceVersion is not the stored one, and
// Create with AlreadyExists when the Lease exists: the protocol's compare-and-swap rests on that.
type Store interface {
	// Get reads a Lease from the store itself, never from a cache.
	Get(ctx context.Context, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	// Delete deletes the Lease if its resourceVersion is still resourceVersion, else fails with a
	// Conflict error.
	Delete(ctx context.Context, name, resourceVersion string) error
}

// APIStore is a Store on the API server.
type APIStore struct {
	Leases coordinationv1client.LeaseInterface
}

var _ Store = APIStore{}

// Get reads the Lease from the API server (a quorum read).
func (s APIStore) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	return s.Leases.Get(ctx, name, metav1.GetOptions{})
}

// Create creates the Lease.
func (s APIStore) Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return s.Leases.Create(ctx, lease, metav1.CreateOptions{})
}

// Update replaces the Lease if its resourceVersion is still the stored one.
func (s APIStore) Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return s.Leases.Update(ctx, lease, metav1.UpdateOptions{})
}

// Delete deletes the Lease with a resourceVersion precondition.
func (s APIStore) Delete(ctx context.Context, name, resourceVersion string) error {
	return s.Leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &resourceVersion}})
}
