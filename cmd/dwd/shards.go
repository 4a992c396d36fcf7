package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
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

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// States of a member in a shards report.
const (
	memberLive      = "live"      // its member lease is held and within its duration
	memberExpired   = "expired"   // not renewed within its duration, and no clean-leave marker
	memberLeft      = "left"      // it wrote the clean-leave marker
	memberReturning = "returning" // it left to restart and is within its return grace
	memberNoLease   = "no-lease"  // a partition lease names it, but it has no member lease
)

// clusterResource is Gardener's Cluster resource: one cluster-scoped object per shoot, named after the
// shoot's namespace on the seed.
var clusterResource = schema.GroupVersionResource{Group: "extensions.gardener.cloud", Version: "v1alpha1", Resource: "clusters"}

// unheldShown is how many unheld partition numbers the table lists; the JSON report lists them all.
const unheldShown = 10

// shardsReport is what `dwd shards` prints, built by buildShardsReport from the group's Leases and the
// seed's Cluster names. Its JSON field names are part of the command's interface (see its help).
type shardsReport struct {
	Group     string    `json:"group"`
	Namespace string    `json:"namespace"`
	Time      time.Time `json:"time"`
	// Partitions is the partition count the report maps shoots with: the majority's settings', else the
	// count most partition leases are labelled with, else the default.
	Partitions int `json:"partitions"`
	// Settings are the settings most live members advertise (all members when none is live).
	Settings *advertisedSettings `json:"settings,omitempty"`
	Members  []memberReport      `json:"members"`
	// Shoots is the number of Cluster objects; ShootsUnheld of them are in unheld partitions.
	Shoots       int `json:"shoots"`
	ShootsUnheld int `json:"shootsUnheld"`
	// Unheld are the partitions whose lease is missing, names nobody, or names a member that is not live.
	Unheld     []int      `json:"unheldPartitions"`
	Mismatches mismatches `json:"mismatches"`
}

// memberReport is one member of the group: from its member lease, or only named by partition leases.
type memberReport struct {
	Name                 string              `json:"name"`
	State                string              `json:"state"`
	RenewTime            *time.Time          `json:"renewTime,omitempty"`
	LeaseDurationSeconds int64               `json:"leaseDurationSeconds"`
	ReturningSeconds     int64               `json:"returningSeconds,omitempty"`
	Settings             *advertisedSettings `json:"settings,omitempty"`
	// PartitionsHeld counts the partition leases naming it as holder; they count as unheld unless it is live.
	PartitionsHeld int `json:"partitionsHeld"`
	// PartitionsReserved counts the released partitions reserved for it while it restarts.
	PartitionsReserved int `json:"partitionsReserved"`
	// Shoots counts the Clusters whose partition's lease names it.
	Shoots int `json:"shoots"`
}

// advertisedSettings is a member's settings annotation, parsed (sharding.Settings writes it).
type advertisedSettings struct {
	Raw               string   `json:"raw"`
	Partitions        int      `json:"partitions"`
	ReplicationFactor int      `json:"replicationFactor"`
	LoadBound         float64  `json:"loadBound"`
	PartitionFunction string   `json:"partitionFunction"`
	Roles             []string `json:"roles"`
}

// mismatches are what keeps the members of a group from sharing a ring (docs/sharding.md).
type mismatches struct {
	// Members advertise settings other than the report's Settings.
	Members []string `json:"members"`
	// PartitionLeases are labelled with another partition count than the report's Partitions.
	PartitionLeases []partitionLeaseMismatch `json:"partitionLeases"`
}

// partitionLeaseMismatch is a partition lease labelled with another partition count.
type partitionLeaseMismatch struct {
	Name       string `json:"name"`
	Partitions string `json:"partitions"`
	Holder     string `json:"holder"`
}

// newShardsCommand builds `dwd shards`, a read-only view of a sharding group.
func newShardsCommand() *cobra.Command {
	o := newOptions(groupFor(roleProber))
	output := "table"
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
  mismatches: members[] (names), partitionLeases[]: name, partitions, holder;
settings objects: raw, partitions, replicationFactor, loadBound, partitionFunction, roles[].`,
		Example: `  dwd shards --kubeconfig=seed.yaml --shard-namespace=garden
  dwd shards --shard-namespace=garden --shard-group=dwd-prober -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runShards(cmd.Context(), cmd.OutOrStdout(), output)
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
	return cmd
}

// runShards reads the group and prints its report.
func (o *options) runShards(ctx context.Context, out io.Writer, output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("-o %q: must be table or json", output)
	}
	if o.sharding.Namespace == "" {
		o.sharding.Namespace = defaultNamespace(o.leaderElection.namespace)
	}
	cfg, err := o.buildRestConfig()
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	group, ns := o.sharding.GroupName, o.sharding.Namespace
	list, clusters, err := readShards(ctx, cfg, group, ns)
	if err != nil {
		return err
	}
	report := buildShardsReport(group, list, clusters, time.Now())
	report.Namespace = ns
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return printShards(out, report)
}

// readShards lists the group's Leases and the names of the seed's Clusters. Both lists only; an empty
// group is an error that says whether the namespace exists.
func readShards(ctx context.Context, cfg *rest.Config, group, ns string) ([]coordinationv1.Lease, []string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
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

// buildShardsReport describes a group from its Leases and the names of the seed's Clusters at now.
// It is a pure function of its inputs; Namespace is left to the caller.
func buildShardsReport(group string, list []coordinationv1.Lease, clusters []string, now time.Time) shardsReport {
	r := shardsReport{Group: group, Time: now, Mismatches: mismatches{Members: []string{}, PartitionLeases: []partitionLeaseMismatch{}}}
	members := map[string]*memberReport{}
	for i := range list {
		if name, ok := leases.MemberOf(group, &list[i]); ok {
			members[name] = newMemberReport(name, &list[i], now)
		}
	}
	r.Settings = majoritySettings(members)
	r.Partitions = labelledCount(list)
	if r.Settings != nil && r.Settings.Partitions > 0 {
		r.Partitions = r.Settings.Partitions
	}
	holders := r.partitionHolders(group, list, members)
	r.countShoots(clusters, holders, members)
	r.Members = make([]memberReport, 0, len(members))
	for _, m := range members {
		if m.Settings != nil && r.Settings != nil && m.Settings.Raw != r.Settings.Raw {
			r.Mismatches.Members = append(r.Mismatches.Members, m.Name)
		}
		r.Members = append(r.Members, *m)
	}
	slices.SortFunc(r.Members, func(a, b memberReport) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(r.Mismatches.Members)
	return r
}

// newMemberReport reads the member lease l of member at now.
func newMemberReport(member string, l *coordinationv1.Lease, now time.Time) *memberReport {
	a := leases.AdvertOf(member, l)
	m := &memberReport{Name: member, LeaseDurationSeconds: int64(a.Duration / time.Second),
		ReturningSeconds: int64(a.Returning / time.Second), Settings: parseSettings(a.Settings)}
	var renewed time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
		m.RenewTime = &renewed
	}
	switch {
	case a.Left && a.Returning > 0 && now.Before(renewed.Add(a.Returning)):
		m.State = memberReturning
	case a.Left:
		m.State = memberLeft
	case a.Held && m.RenewTime != nil && now.Before(renewed.Add(a.Duration)):
		m.State = memberLive
	default:
		m.State = memberExpired
	}
	return m
}

// majoritySettings returns the settings most live members advertise, or most members when none is
// live; a tie goes to the smaller string, so that the report is stable. Nil when none advertises any.
func majoritySettings(members map[string]*memberReport) *advertisedSettings {
	count := func(liveOnly bool) (best *advertisedSettings) {
		votes := map[string]int{}
		for _, m := range members {
			if m.Settings == nil || (liveOnly && m.State != memberLive) {
				continue
			}
			votes[m.Settings.Raw]++
			if best == nil || votes[m.Settings.Raw] > votes[best.Raw] ||
				(votes[m.Settings.Raw] == votes[best.Raw] && m.Settings.Raw < best.Raw) {
				best = m.Settings
			}
		}
		return best
	}
	return cmp.Or(count(true), count(false))
}

// labelledCount is the partition count most partition leases are labelled with (the smaller on a
// tie), for a group whose members advertise none; the default count when none is labelled.
func labelledCount(list []coordinationv1.Lease) int {
	votes := map[int]int{}
	best := 0
	for i := range list {
		n, ok := leases.PartitionCount(&list[i])
		if !ok || n < 1 || list[i].Labels[leases.KindLabel] != leases.KindPartition {
			continue
		}
		votes[n]++
		if best == 0 || votes[n] > votes[best] || (votes[n] == votes[best] && n < best) {
			best = n
		}
	}
	return cmp.Or(best, config.DefaultPartitionCount)
}

// partitionHolders returns the holder of every partition (index = partition, "" for none), counts the
// partitions each member holds or has reserved, records the unheld ones and the leases labelled with
// another partition count. A holder without a member lease is added to members as no-lease.
func (r *shardsReport) partitionHolders(group string, list []coordinationv1.Lease, members map[string]*memberReport) []string {
	holders := make([]string, r.Partitions)
	for i := range list {
		l := &list[i]
		if l.Labels[leases.KindLabel] != leases.KindPartition {
			continue
		}
		if n, ok := leases.PartitionCount(l); !ok || n != r.Partitions {
			r.Mismatches.PartitionLeases = append(r.Mismatches.PartitionLeases,
				partitionLeaseMismatch{Name: l.Name, Partitions: l.Labels[leases.PartitionsLabel], Holder: leases.Holder(l)})
			continue
		}
		p, ok := leases.PartitionOf(group, r.Partitions, l)
		if !ok {
			continue
		}
		if holder := leases.Holder(l); holder != "" {
			holders[p] = holder
			memberNamed(members, holder).PartitionsHeld++
		} else if reserved := leases.ReservedFor(l); reserved != "" {
			memberNamed(members, reserved).PartitionsReserved++
		}
	}
	slices.SortFunc(r.Mismatches.PartitionLeases, func(a, b partitionLeaseMismatch) int { return cmp.Compare(a.Name, b.Name) })
	r.Unheld = []int{}
	for p, holder := range holders {
		if holder == "" || members[holder].State != memberLive {
			r.Unheld = append(r.Unheld, p)
		}
	}
	return holders
}

// memberNamed returns the member called name, added as no-lease when it has no member lease.
func memberNamed(members map[string]*memberReport, name string) *memberReport {
	if members[name] == nil {
		members[name] = &memberReport{Name: name, State: memberNoLease}
	}
	return members[name]
}

// countShoots counts the shoots (Cluster names) per holder of their partition, and those in unheld
// partitions.
func (r *shardsReport) countShoots(clusters []string, holders []string, members map[string]*memberReport) {
	r.Shoots = len(clusters)
	for _, name := range clusters {
		holder := holders[sharding.PartitionOf(name, r.Partitions)]
		if holder != "" {
			members[holder].Shoots++
		}
		if holder == "" || members[holder].State != memberLive {
			r.ShootsUnheld++
		}
	}
}

// parseSettings parses a settings annotation as sharding.Settings writes it; nil for "". Keys it does
// not know are kept in Raw only, so that a newer member's settings still show.
func parseSettings(raw string) *advertisedSettings {
	if raw == "" {
		return nil
	}
	s := &advertisedSettings{Raw: raw, Roles: []string{}}
	for _, kv := range strings.Split(raw, ",") {
		key, value, _ := strings.Cut(kv, "=")
		switch key {
		case "partitions":
			s.Partitions, _ = strconv.Atoi(value)
		case "replication-factor":
			s.ReplicationFactor, _ = strconv.Atoi(value)
		case "load-bound":
			s.LoadBound, _ = strconv.ParseFloat(value, 64)
		case "partition-function":
			s.PartitionFunction = value
		case "roles":
			if value != "" {
				s.Roles = strings.Split(value, "+")
			}
		}
	}
	return s
}

// printShards prints the report as tables.
func printShards(out io.Writer, r shardsReport) error {
	fmt.Fprintf(out, "Group %s in namespace %s, %d partitions\n\n", r.Group, r.Namespace, r.Partitions)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tSTATE\tRENEWED\tLEASE\tPARTITIONS\tRESERVED\tSHOOTS\tSETTINGS")
	for _, m := range r.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", m.Name, m.State, renewedAgo(m.RenewTime, r.Time),
			leaseColumn(m), m.PartitionsHeld, m.PartitionsReserved, m.Shoots, settingsColumn(m.Settings))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nShoots: %d, %d of them in partitions without a live holder\n", r.Shoots, r.ShootsUnheld)
	fmt.Fprintf(out, "Partitions without a live holder: %s\n", unheldColumn(r.Unheld))
	fmt.Fprintf(out, "Settings of the majority: %s\n", settingsColumn(r.Settings))
	fmt.Fprintf(out, "Members with other settings: %s\n", cmp.Or(strings.Join(r.Mismatches.Members, ", "), "none"))
	var leaseNames []string
	for _, l := range r.Mismatches.PartitionLeases {
		leaseNames = append(leaseNames, fmt.Sprintf("%s (partitions=%q, holder %q)", l.Name, l.Partitions, l.Holder))
	}
	_, err := fmt.Fprintf(out, "Partition leases of another partition count: %s\n", cmp.Or(strings.Join(leaseNames, ", "), "none"))
	return err
}

// renewedAgo is how long before now a lease was renewed, in whole seconds.
func renewedAgo(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return now.Sub(*t).Truncate(time.Second).String() + " ago"
}

// leaseColumn is the lease duration, with the return grace of a member that left to restart.
func leaseColumn(m memberReport) string {
	if m.State == memberNoLease {
		return "-"
	}
	s := (time.Duration(m.LeaseDurationSeconds) * time.Second).String()
	if m.ReturningSeconds > 0 {
		s += fmt.Sprintf(" (returning %s)", time.Duration(m.ReturningSeconds)*time.Second)
	}
	return s
}

// settingsColumn shows settings briefly, in the order of the annotation.
func settingsColumn(s *advertisedSettings) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("P=%d RF=%d LB=%s fn=%s roles=%s", s.Partitions, s.ReplicationFactor,
		strconv.FormatFloat(s.LoadBound, 'g', -1, 64), s.PartitionFunction, strings.Join(s.Roles, "+"))
}

// unheldColumn is the number of unheld partitions and the first few of them.
func unheldColumn(unheld []int) string {
	if len(unheld) == 0 {
		return "none"
	}
	shown := make([]string, 0, unheldShown)
	for _, p := range unheld[:min(len(unheld), unheldShown)] {
		shown = append(shown, strconv.Itoa(p))
	}
	if len(unheld) > unheldShown {
		shown = append(shown, "…")
	}
	return fmt.Sprintf("%d (%s)", len(unheld), strings.Join(shown, ", "))
}
