package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// clusterResource is Gardener's Cluster resource: one cluster-scoped object per shoot, named after the
// shoot's namespace on the seed.
var clusterResource = schema.GroupVersionResource{Group: "extensions.gardener.cloud", Version: "v1alpha1", Resource: "clusters"}

// newShardsCommand builds `dwd shards`, a read-only view of a sharding group.
func newShardsCommand() *cobra.Command {
	o := newOptions(replica.GroupFor(replica.RoleProber))
	output, shoot := "table", ""
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Show the members of a sharding group, the partitions and shoots they hold, and what is wrong",
		Long: `Show a sharding group as its Leases and the seed's Cluster objects describe it, read-only (it lists
Leases in --shard-namespace and Clusters, and reads the namespace only to explain an empty group):
every member with its state, the settings it advertises, the partitions it holds and the shoots in
them; the partitions without a live holder; and the members and partition leases that disagree with
the group's settings.

A member is live while its lease names it and renewTime + leaseDurationSeconds is in the future (on
this machine's clock, so clock skew shifts it), returning while it restarts within its return grace,
left after a clean leave, expired otherwise, and no-lease when only partition leases name it. A
partition is unheld when its lease is missing, names nobody (or a reserved restarting member), or
names a member that is not live. Exits 0 whenever the report could be made, problems included.

-o json prints the same report as one object:
  group, namespace, time, settings (what most live members advertise, else most members),
  partitions (the count shoots are mapped with: the settings', else the partition leases' label),
  members[]: name, state (live|expired|left|returning|no-lease), renewTime, leaseDurationSeconds,
    returningSeconds, settings, partitionsHeld, partitionsReserved, shoots,
  shoots, shootsUnheld, unheldPartitions[] (all of them),
  mismatches: members[] (names), partitionLeases[]: name, partitions, holder,
  warnings[] (dwd's StatefulSets, label app.kubernetes.io/name=dwd, whose spec.replicas differs from
    Gardener's high-availability-config.resources.gardener.cloud/replicas annotation, which Gardener's
    resource manager applies at the next update);
settings objects: raw, partitions, replicationFactor, loadBound, partitionFunction, roles[].

--shoot NS prints only who owns one shoot namespace (-o json: shoot, group, cluster, partition,
partitionFunction, holder, holderState, reservedFor, owned).`,
		Example: `  dwd shards --kubeconfig=seed.yaml --shard-namespace=garden
  dwd shards --shard-namespace=garden --shard-group=dwd-prober -o json
  dwd shards --shard-namespace=garden --shoot=shoot--project--name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runShards(cmd.Context(), cmd.OutOrStdout(), output, shoot)
		},
	}
	s := &o.sharding
	addSection(cmd.Flags(), sectionSharding, func(fs *pflag.FlagSet) {
		fs.StringVar(&s.GroupName, "shard-group", s.GroupName, "Name of the group to show, as dwd run's --shard-group: dwd-prober (the default) or dwd-weeder for the groups a replica of that role joins.")
		fs.StringVar(&s.Namespace, "shard-namespace", s.Namespace, "Namespace of the group's Leases (default: $POD_NAMESPACE, else the in-cluster service account's namespace, else garden).")
	})
	addSection(cmd.Flags(), sectionClient, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to the seed's kubeconfig (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config).")
	})
	cmd.Flags().StringVarP(&output, "output", "o", output, "Output format: table or json.")
	cmd.Flags().StringVar(&shoot, "shoot", "", "Show only who owns this shoot namespace: its partition, the partition's holder and its state, and whether the seed has its Cluster.")
	return cmd
}

// runShards reads the group and prints its report, or only who owns shoot when it is set.
func (o *options) runShards(ctx context.Context, out io.Writer, output, shoot string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("-o %q: must be table or json", output)
	}
	if o.sharding.Namespace == "" {
		o.sharding.Namespace = defaultNamespace(o.leaderElection.Namespace)
	}
	cfg, err := o.buildRestConfig()
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	group, ns := o.sharding.GroupName, o.sharding.Namespace
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, clusters, err := readShards(ctx, cfg, cs, group, ns)
	if err != nil {
		return err
	}
	report := sharding.BuildReport(group, list, clusters, time.Now())
	report.Namespace = ns
	if shoot != "" {
		return printOwnership(out, output, report.Ownership(shoot, clusters))
	}
	report.Warnings = replicaWarnings(ctx, cs, ns)
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.WriteTable(out)
}

// readShards lists the group's Leases and the names of the seed's Clusters. Both lists only; an empty
// group is an error that says whether the namespace exists.
func readShards(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, group, ns string) ([]coordinationv1.Lease, []string, error) {
	sel := labels.SelectorFromSet(labels.Set{leases.GroupLabel: group}).String()
	list, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, nil, listError(fmt.Sprintf("listing the Leases of group %q in namespace %q", group, ns), "list on leases.coordination.k8s.io in "+ns, err)
	}
	if len(list.Items) == 0 {
		return nil, nil, emptyGroupError(ctx, cs, group, ns)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	objs, err := md.Resource(clusterResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, listError("listing the Clusters (extensions.gardener.cloud/v1alpha1)", "list on clusters.extensions.gardener.cloud", err)
	}
	names := make([]string, 0, len(objs.Items))
	for _, c := range objs.Items {
		names = append(names, c.Name)
	}
	return list.Items, names, nil
}

// HAReplicasAnnotation is the annotation from which the high-availability webhook of Gardener's
// resource manager sets a StatefulSet's spec.replicas at every update of it.
const HAReplicasAnnotation = "high-availability-config.resources.gardener.cloud/replicas"

// replicaWarnings warns about each of dwd's StatefulSets in ns (label app.kubernetes.io/name=dwd)
// whose spec.replicas differs from its HAReplicasAnnotation: a `kubectl scale` that Gardener will undo
// at the next update. A list that fails is a warning too; the report does not depend on it.
func replicaWarnings(ctx context.Context, cs kubernetes.Interface, ns string) []string {
	list, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=dwd"})
	if err != nil {
		return []string{fmt.Sprintf("the StatefulSets in %s were not checked for %s: %v", ns, HAReplicasAnnotation, err)}
	}
	var warnings []string
	for _, s := range list.Items {
		want, ok := s.Annotations[HAReplicasAnnotation]
		// The webhook leaves a StatefulSet scaled to 0 alone (the way to stop a group, or to change its
		// ring settings).
		if !ok || s.Spec.Replicas == nil || *s.Spec.Replicas == 0 || want == fmt.Sprint(*s.Spec.Replicas) {
			continue
		}
		warnings = append(warnings, fmt.Sprintf("StatefulSet %s has spec.replicas %d but %s=%q: Gardener's resource manager sets spec.replicas from the annotation at the next update of the StatefulSet, so a kubectl scale is undone; change the annotation (docs/operations.md, \"Scaling out and in\")",
			s.Name, *s.Spec.Replicas, HAReplicasAnnotation, want))
	}
	return warnings
}

// listError says what a failed list needed when the seed forbade it.
func listError(what, needs string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: forbidden; dwd shards needs %s: %w", what, needs, err)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: the seed does not serve this resource: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// emptyGroupError explains a group without Leases: a namespace that does not exist, or a group that
// has none there (a wrong --shard-group, or no replica ever ran). The namespace is only looked up to
// say which; a lookup that fails says nothing more.
func emptyGroupError(ctx context.Context, cs kubernetes.Interface, group, ns string) error {
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q does not exist (--shard-namespace)", ns)
	}
	return fmt.Errorf("no Leases of group %q in namespace %q: check --shard-group and --shard-namespace", group, ns)
}

// printOwnership prints who owns one shoot, as a table or as JSON.
func printOwnership(out io.Writer, output string, o sharding.ShootOwnership) error {
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(o)
	}
	return o.WriteTable(out)
}
