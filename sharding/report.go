package sharding

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// States of a member in a group's Report.
const (
	MemberLive      = "live"      // its member lease is held and within its duration
	MemberExpired   = "expired"   // not renewed within its duration, and no clean-leave marker
	MemberLeft      = "left"      // it wrote the clean-leave marker
	MemberReturning = "returning" // it left to restart and is within its return grace
	MemberNoLease   = "no-lease"  // a partition lease names it, but it has no member lease
)

// unheldShown is how many unheld partition numbers the table lists; the JSON report lists them all.
const unheldShown = 10

// Report describes a group for `dwd shards`: built by BuildReport from the group's Leases and the
// seed's Cluster names. Its JSON field names are part of that command's interface (see its help).
type Report struct {
	Group     string    `json:"group"`
	Namespace string    `json:"namespace"`
	Time      time.Time `json:"time"`
	// Partitions is the partition count the report maps shoots with: the majority's settings', else the
	// count most partition leases are labelled with, else the default.
	Partitions int `json:"partitions"`
	// Settings are the settings most live members advertise (all members when none is live).
	Settings *ReportSettings `json:"settings,omitempty"`
	Members  []ReportMember  `json:"members"`
	// Shoots is the number of Cluster objects; ShootsUnheld of them are in unheld partitions.
	Shoots       int `json:"shoots"`
	ShootsUnheld int `json:"shootsUnheld"`
	// Unheld are the partitions whose lease is missing, names nobody, or names a member that is not live.
	Unheld     []int            `json:"unheldPartitions"`
	Mismatches ReportMismatches `json:"mismatches"`
	// Warnings are what the caller found wrong around the group (dwd shards: a StatefulSet whose
	// replicas Gardener will reset), one sentence each.
	Warnings []string `json:"warnings,omitempty"`

	// holders and reserved name, per partition, the holder of its lease and the member it is
	// reserved for ("" for none), for Ownership.
	holders, reserved []string
}

// ReportMember is one member of the group: from its member lease, or only named by partition leases.
type ReportMember struct {
	Name                 string          `json:"name"`
	State                string          `json:"state"`
	RenewTime            *time.Time      `json:"renewTime,omitempty"`
	LeaseDurationSeconds int64           `json:"leaseDurationSeconds"`
	ReturningSeconds     int64           `json:"returningSeconds,omitempty"`
	Settings             *ReportSettings `json:"settings,omitempty"`
	// PartitionsHeld counts the partition leases naming it as holder; they count as unheld unless it is live.
	PartitionsHeld int `json:"partitionsHeld"`
	// PartitionsReserved counts the released partitions reserved for it while it restarts.
	PartitionsReserved int `json:"partitionsReserved"`
	// Shoots counts the Clusters whose partition's lease names it.
	Shoots int `json:"shoots"`
}

// ReportSettings is a member's settings annotation, parsed (sharding.Settings writes it).
type ReportSettings struct {
	Raw               string   `json:"raw"`
	Partitions        int      `json:"partitions"`
	ReplicationFactor int      `json:"replicationFactor"`
	LoadBound         float64  `json:"loadBound"`
	PartitionFunction string   `json:"partitionFunction"`
	Roles             []string `json:"roles"`
}

// ReportMismatches are what keeps the members of a group from sharing a ring (docs/sharding.md).
type ReportMismatches struct {
	// Members advertise settings other than the report's Settings.
	Members []string `json:"members"`
	// PartitionLeases are labelled with another partition count than the report's Partitions.
	PartitionLeases []PartitionLeaseMismatch `json:"partitionLeases"`
}

// PartitionLeaseMismatch is a partition lease labelled with another partition count.
type PartitionLeaseMismatch struct {
	Name       string `json:"name"`
	Partitions string `json:"partitions"`
	Holder     string `json:"holder"`
}

// BuildReport describes a group from its Leases and the names of the seed's Clusters at now.
// It is a pure function of its inputs; Namespace is left to the caller.
func BuildReport(group string, list []coordinationv1.Lease, clusters []string, now time.Time) Report {
	r := Report{Group: group, Time: now, Mismatches: ReportMismatches{Members: []string{}, PartitionLeases: []PartitionLeaseMismatch{}}}
	members := map[string]*ReportMember{}
	for i := range list {
		if name, ok := leases.MemberOf(group, &list[i]); ok {
			members[name] = newReportMember(name, &list[i], now)
		}
	}
	r.Settings = majoritySettings(members)
	r.Partitions = labelledCount(list)
	if r.Settings != nil && r.Settings.Partitions > 0 {
		r.Partitions = r.Settings.Partitions
	}
	holders := r.partitionHolders(group, list, members)
	r.holders = holders
	r.countShoots(clusters, holders, members)
	r.Members = make([]ReportMember, 0, len(members))
	for _, m := range members {
		if m.Settings != nil && r.Settings != nil && m.Settings.Raw != r.Settings.Raw {
			r.Mismatches.Members = append(r.Mismatches.Members, m.Name)
		}
		r.Members = append(r.Members, *m)
	}
	slices.SortFunc(r.Members, func(a, b ReportMember) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(r.Mismatches.Members)
	return r
}

// newReportMember reads the member lease l of member at now.
func newReportMember(member string, l *coordinationv1.Lease, now time.Time) *ReportMember {
	a := leases.AdvertOf(member, l)
	m := &ReportMember{Name: member, LeaseDurationSeconds: int64(a.Duration / time.Second),
		ReturningSeconds: int64(a.Returning / time.Second), Settings: parseSettings(a.Settings)}
	var renewed time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
		m.RenewTime = &renewed
	}
	switch {
	case a.Left && a.Returning > 0 && now.Before(renewed.Add(a.Returning)):
		m.State = MemberReturning
	case a.Left:
		m.State = MemberLeft
	case a.Held && m.RenewTime != nil && now.Before(renewed.Add(a.Duration)):
		m.State = MemberLive
	default:
		m.State = MemberExpired
	}
	return m
}

// majoritySettings returns the settings most live members advertise, or most members when none is
// live; a tie goes to the smaller string, so that the report is stable. Nil when none advertises any.
func majoritySettings(members map[string]*ReportMember) *ReportSettings {
	count := func(liveOnly bool) (best *ReportSettings) {
		votes := map[string]int{}
		for _, m := range members {
			if m.Settings == nil || (liveOnly && m.State != MemberLive) {
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
func (r *Report) partitionHolders(group string, list []coordinationv1.Lease, members map[string]*ReportMember) []string {
	holders := make([]string, r.Partitions)
	r.reserved = make([]string, r.Partitions)
	for i := range list {
		l := &list[i]
		if l.Labels[leases.KindLabel] != leases.KindPartition {
			continue
		}
		if n, ok := leases.PartitionCount(l); !ok || n != r.Partitions {
			r.Mismatches.PartitionLeases = append(r.Mismatches.PartitionLeases,
				PartitionLeaseMismatch{Name: l.Name, Partitions: l.Labels[leases.PartitionsLabel], Holder: leases.Holder(l)})
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
			r.reserved[p] = reserved
		}
	}
	slices.SortFunc(r.Mismatches.PartitionLeases, func(a, b PartitionLeaseMismatch) int { return cmp.Compare(a.Name, b.Name) })
	r.Unheld = []int{}
	for p, holder := range holders {
		if holder == "" || members[holder].State != MemberLive {
			r.Unheld = append(r.Unheld, p)
		}
	}
	return holders
}

// memberNamed returns the member called name, added as no-lease when it has no member lease.
func memberNamed(members map[string]*ReportMember, name string) *ReportMember {
	if members[name] == nil {
		members[name] = &ReportMember{Name: name, State: MemberNoLease}
	}
	return members[name]
}

// countShoots counts the shoots (Cluster names) per holder of their partition, and those in unheld
// partitions.
func (r *Report) countShoots(clusters []string, holders []string, members map[string]*ReportMember) {
	r.Shoots = len(clusters)
	partitions := Partitions{Count: r.Partitions}
	if r.Settings != nil {
		partitions.Function = r.Settings.PartitionFunction
	}
	for _, name := range clusters {
		var holder string
		if p := partitions.Of(name); p >= 0 && p < len(holders) {
			holder = holders[p]
		}
		if holder != "" {
			members[holder].Shoots++
		}
		if holder == "" || members[holder].State != MemberLive {
			r.ShootsUnheld++
		}
	}
}

// ShootOwnership is who owns one shoot namespace in a group, as its Leases say (dwd shards --shoot).
type ShootOwnership struct {
	Shoot string `json:"shoot"`
	Group string `json:"group"`
	// Cluster is whether the seed has the shoot's Cluster: without one, no member probes it.
	Cluster bool `json:"cluster"`
	// Partition is the shoot's partition under the group's settings; -1 without settings.
	Partition         int    `json:"partition"`
	PartitionFunction string `json:"partitionFunction"`
	// Holder is the member the partition's lease names, HolderState its state; "" for none.
	Holder      string `json:"holder"`
	HolderState string `json:"holderState,omitempty"`
	// ReservedFor is the member a restart keeps the partition for, while nobody holds it.
	ReservedFor string `json:"reservedFor,omitempty"`
	// Owned is whether a live member holds the partition: the shoot has a watchdog of this group.
	Owned bool `json:"owned"`
}

// Ownership tells who owns shoot in the report's group; clusters are the seed's Cluster names.
func (r Report) Ownership(shoot string, clusters []string) ShootOwnership {
	o := ShootOwnership{Shoot: shoot, Group: r.Group, Cluster: slices.Contains(clusters, shoot), Partition: -1}
	partitions := Partitions{Count: r.Partitions}
	if r.Settings != nil {
		partitions.Function = r.Settings.PartitionFunction
	}
	o.PartitionFunction = partitions.function()
	if r.Partitions <= 0 {
		return o
	}
	o.Partition = partitions.Of(shoot)
	if o.Partition < 0 || o.Partition >= len(r.holders) {
		return o
	}
	o.Holder, o.ReservedFor = r.holders[o.Partition], r.reserved[o.Partition]
	for _, m := range r.Members {
		if m.Name == o.Holder {
			o.HolderState = m.State
		}
	}
	o.Owned = o.Holder != "" && o.HolderState == MemberLive
	return o
}

// WriteTable prints the ownership for a person.
func (o ShootOwnership) WriteTable(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Shoot\t%s\n", o.Shoot)
	fmt.Fprintf(w, "Group\t%s\n", o.Group)
	fmt.Fprintf(w, "Cluster\t%s\n", map[bool]string{true: "present", false: "missing: no member probes the shoot"}[o.Cluster])
	fmt.Fprintf(w, "Partition\t%d (%s)\n", o.Partition, o.PartitionFunction)
	fmt.Fprintf(w, "Holder\t%s\n", cmp.Or(strings.TrimSpace(o.Holder+" "+o.HolderState), "none"))
	if o.ReservedFor != "" {
		fmt.Fprintf(w, "Reserved for\t%s (restarting)\n", o.ReservedFor)
	}
	fmt.Fprintf(w, "Owned\t%s\n", map[bool]string{true: "yes: a live member holds its partition", false: "no: no live member holds its partition"}[o.Owned])
	return w.Flush()
}

// parseSettings parses a settings annotation as sharding.Settings writes it; nil for "". Keys it does
// not know are kept in Raw only, so that a newer member's settings still show.
func parseSettings(raw string) *ReportSettings {
	if raw == "" {
		return nil
	}
	s := &ReportSettings{Raw: raw, Roles: []string{}}
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

// WriteTable prints the report as tables.
func (r Report) WriteTable(out io.Writer) error {
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
	for _, warning := range r.Warnings {
		if err == nil {
			_, err = fmt.Fprintf(out, "Warning: %s\n", warning)
		}
	}
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
func leaseColumn(m ReportMember) string {
	if m.State == MemberNoLease {
		return "-"
	}
	s := (time.Duration(m.LeaseDurationSeconds) * time.Second).String()
	if m.ReturningSeconds > 0 {
		s += fmt.Sprintf(" (returning %s)", time.Duration(m.ReturningSeconds)*time.Second)
	}
	return s
}

// settingsColumn shows settings briefly, in the order of the annotation.
func settingsColumn(s *ReportSettings) string {
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
