package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// clusterKind is Gardener's Cluster: one cluster-scoped object per shoot, named after its namespace.
var clusterKind = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}

// annotationPrefix starts the annotations dwd (and the original) writes on the dependents.
const annotationPrefix = "dependency-watchdog.gardener.cloud/"

// readCluster reads the shoot's Cluster and judges it by the prober's lifecycle rules; it reports
// whether the Cluster is there.
func (e *Explanation) readCluster(ctx context.Context, c client.Reader) bool {
	e.Cluster.Name = e.Shoot
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(clusterKind)
	err := c.Get(ctx, client.ObjectKey{Name: e.Shoot}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		cluster = nil
	case err != nil:
		e.Cluster.Error = readError("get on clusters.extensions.gardener.cloud", err)
		return false
	default:
		e.Cluster.Exists = true
	}
	label, reason, err := prober.NotProbedOf(cluster)
	switch {
	case err != nil:
		e.Lifecycle, e.Cluster.Detail = prober.UnprotectedInvalidCluster,
			fmt.Sprintf("the Cluster's shoot cannot be read (%v): no rule stops its probe, and it cannot run; the shoot is unprotected", err)
	case label != "":
		e.Lifecycle, e.Cluster.Detail = label, reason
	}
	return e.Cluster.Exists
}

// readSecret looks up the kubeconfig Secret's metadata only: its data is never read.
func (e *Explanation) readSecret(ctx context.Context, c client.Reader, name string) {
	e.KubeconfigSecret.Name = name
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := c.Get(ctx, client.ObjectKey{Namespace: e.Shoot, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		e.KubeconfigSecret.Error = readError("get on secrets in "+e.Shoot, err)
	default:
		e.KubeconfigSecret.Exists = true
	}
}

// readOwner tells who acts on the shoot in group: from the group's Leases, or, when it has none, from
// the leader lease of the original's mode that opts name for it.
func readOwner(ctx context.Context, c client.Reader, opts Options, group string, cluster bool) Owner {
	var clusters []string
	if cluster {
		clusters = []string{opts.Shoot}
	}
	list := &coordinationv1.LeaseList{}
	err := c.List(ctx, list, client.InNamespace(opts.ShardNamespace), client.MatchingLabels{leases.GroupLabel: group})
	if err != nil {
		return Owner{ShootOwnership: sharding.ShootOwnership{Shoot: opts.Shoot, Group: group, Partition: -1},
			Error: readError("list on leases.coordination.k8s.io in "+opts.ShardNamespace, err)}
	}
	// A live leader of the original's mode acts on every shoot, and the group's members defer to it
	// (during a cut-over, or after a rollback that left the group's Leases): it is the owner then.
	leader := leaderOwner(ctx, c, opts, group, cluster)
	if len(list.Items) == 0 || leader.HolderState == sharding.MemberLive {
		return leader
	}
	return Owner{ShootOwnership: sharding.BuildReport(group, list.Items, clusters, opts.Now).Ownership(opts.Shoot, clusters)}
}

// leaderOwner tells who acts on the shoot for group in the original's mode: the holder of its leader
// lease while it renews.
func leaderOwner(ctx context.Context, c client.Reader, opts Options, group string, cluster bool) Owner {
	o := Owner{ShootOwnership: sharding.ShootOwnership{Shoot: opts.Shoot, Group: group, Cluster: cluster, Partition: -1}}
	name := opts.LeaderLeases[group]
	none := fmt.Sprintf("no Leases of group %s in namespace %s", group, opts.ShardNamespace)
	if name == "" {
		o.Error = none
		return o
	}
	lease := &coordinationv1.Lease{}
	err := c.Get(ctx, client.ObjectKey{Namespace: opts.LeaderNamespace, Name: name}, lease)
	switch {
	case apierrors.IsNotFound(err):
		o.Error = fmt.Sprintf("%s, and no leader lease %s/%s", none, opts.LeaderNamespace, name)
		return o
	case err != nil:
		o.Error = readError("get on leases.coordination.k8s.io in "+opts.LeaderNamespace, err)
		return o
	}
	o.Leader = opts.LeaderNamespace + "/" + name
	if lease.Spec.HolderIdentity != nil {
		o.Holder = *lease.Spec.HolderIdentity
	}
	o.HolderState = sharding.MemberExpired
	if o.Holder != "" && lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil &&
		lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second).After(opts.Now) {
		o.HolderState = sharding.MemberLive
	}
	o.Owned = cluster && o.HolderState == sharding.MemberLive
	return o
}

// readDependents reads each configured dependent resource: replicas, ready replicas and the
// watchdog's annotations.
func (e *Explanation) readDependents(ctx context.Context, c client.Reader, infos []config.DependentResourceInfo) {
	for _, info := range infos {
		d := Dependent{Kind: info.Ref.Kind, Name: info.Ref.Name, Optional: info.Optional}
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(info.Ref.APIVersion)
		obj.SetKind(info.Ref.Kind)
		err := c.Get(ctx, client.ObjectKey{Namespace: e.Shoot, Name: info.Ref.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			d.Error = readError("get on "+strings.ToLower(info.Ref.Kind)+"s in "+e.Shoot, err)
		default:
			d.Exists = true
			if n, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
				d.Replicas = &n
			}
			d.ReadyReplicas, _, _ = unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
			for k, v := range obj.GetAnnotations() {
				if strings.HasPrefix(k, annotationPrefix) {
					if d.Annotations == nil {
						d.Annotations = map[string]string{}
					}
					d.Annotations[k] = v
				}
			}
			_, marked := d.Annotations[scaler.MeltdownProtectionAnnotation]
			e.ScaledDown = e.ScaledDown || marked
		}
		e.Dependents = append(e.Dependents, d)
	}
}

// readEvents reads the namespace's Events of the scaler and the prober, newest first, at most limit.
func (e *Explanation) readEvents(ctx context.Context, c client.Reader, limit int) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(e.Shoot)); err != nil {
		e.EventsError = readError("list on events.events.k8s.io in "+e.Shoot, err)
		return
	}
	for _, ev := range list.Items {
		if ev.Action != scaler.EventAction && ev.Action != prober.EventAction {
			continue
		}
		out := Event{Time: eventTime(ev), Type: ev.Type, Reason: ev.Reason, Note: ev.Note,
			Regarding: ev.Regarding.Kind + "/" + ev.Regarding.Name}
		if ev.Series != nil {
			out.Count = ev.Series.Count
		}
		e.Events = append(e.Events, out)
	}
	slices.SortStableFunc(e.Events, func(a, b Event) int { return b.Time.Compare(a.Time) })
	if limit = max(limit, 0); len(e.Events) > limit {
		e.Events = e.Events[:limit]
	}
}

// eventTime is when an Event last happened: its series' last observation, else its event time, else
// its creation.
func eventTime(ev eventsv1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// readError words a failed read, naming the permission a 403 lacks.
func readError(needs string, err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden: needs " + needs
	}
	return err.Error()
}
