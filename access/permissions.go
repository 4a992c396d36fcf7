package access

import (
	"fmt"
	"strings"
)

// Permission is one verb on one kind of object: in one namespace, or in all when Namespace is empty;
// on one object when Name is set.
type Permission struct {
	Verb, Group, Resource, Namespace, Name string
	// For names the code that needs the permission, for the log line.
	For string
	// Optional: without it a feature is off (Events, the leave mode's reads), and the replica works.
	// Without a required one it does not work, and stays unready.
	Optional bool
	// Without says, for an optional permission, what the replica does without it.
	Without string
}

// String reads like an RBAC rule: "list coordination.k8s.io/leases in garden".
func (p Permission) String() string {
	resource := p.Resource
	if p.Group != "" {
		resource = p.Group + "/" + p.Resource
	}
	if p.Name != "" {
		resource += " " + p.Name
	}
	where := "in all namespaces"
	if p.Namespace != "" {
		where = "in " + p.Namespace
	}
	return fmt.Sprintf("%s %s %s", p.Verb, resource, where)
}

// Needs says what a replica runs, from which Required derives its permissions.
type Needs struct {
	Prober, Weeder bool
	// ScaledKinds are the kinds of the prober's dependent resources (apps/v1 Deployment, StatefulSet),
	// once each; none means Deployment, the only kind Gardener configures.
	ScaledKinds []string
	// ShardNamespace is the namespace of the sharding group's Leases; empty when the replica runs as
	// the original does, one leader owning every shoot.
	ShardNamespace string
	// PodNamespace is the namespace of the replica's Pod, read on a graceful stop with
	// --leave-mode=auto; empty when the replica does not read it.
	PodNamespace string
	// LeaderNamespace and LeaderLease name the original's leader lease; empty without leader election.
	LeaderNamespace, LeaderLease string
	// WatchedLeaders name the leader leases of the original's mode, in WatchedLeaderNamespace, that a
	// sharded replica watches to hold no shoot while another process leads (sharding.Runner).
	WatchedLeaderNamespace string
	WatchedLeaders         []string
	// MetricsAuth: the metrics endpoint authenticates and authorizes its callers.
	MetricsAuth bool
	// DryRun: the shadow mode (--dry-run) writes nothing to a shoot's control plane, so it needs no
	// scale patch, no pod delete and no Event: a shadow runs on read-only permissions (and its own
	// Leases).
	DryRun bool
}

// required is the Without of a required permission: none, the replica does not work without it.
const required = ""

// Required returns every permission a replica with needs uses on the seed, each once.
func Required(n Needs) []Permission {
	var out []Permission
	var add adder = func(group, resource, namespace, name, why string, without string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, Permission{Verb: v, Group: group, Resource: resource, Namespace: namespace, Name: name, For: why,
				Optional: without != "", Without: without})
		}
	}
	if n.Prober {
		proberNeeds(n, add)
	}
	if n.Weeder {
		weederNeeds(n, add)
	}
	if !n.DryRun {
		add("events.k8s.io", "events", "", "", "events.k8s.io/v1 Events on scaled Deployments, weeded Pods, broken Secrets and Clusters, and the replica's Pod (access.Recorder)",
			"no Event is recorded (the original records none)", "create", "patch")
	}
	if n.ShardNamespace != "" {
		add("coordination.k8s.io", "leases", n.ShardNamespace, "", "the sharding group's member and partition Leases (sharding.Runner, leases.Store)", required,
			"get", "list", "watch", "create", "update", "delete")
	}
	// In the shard namespace, the group's own permissions on Leases cover them.
	for _, name := range n.WatchedLeaders {
		if n.WatchedLeaderNamespace == n.ShardNamespace {
			break
		}
		add("coordination.k8s.io", "leases", n.WatchedLeaderNamespace, name,
			"the leader lease of the original's mode: while another process holds it, this group holds no shoot (sharding.Runner)", required,
			"get", "list", "watch")
	}
	if n.PodNamespace != "" {
		add("", "pods", n.PodNamespace, "", "--leave-mode=auto: whether a graceful stop restarts (sharding.StatefulSetPod)",
			"every graceful stop hands the share over", "get")
		add("apps", "statefulsets", n.PodNamespace, "", "--leave-mode=auto: whether a graceful stop scales down (sharding.StatefulSetPod)",
			"every graceful stop hands the share over", "get")
	}
	if n.LeaderLease != "" {
		add("coordination.k8s.io", "leases", n.LeaderNamespace, "", "the leader lease (leader election)", required, "create")
		add("coordination.k8s.io", "leases", n.LeaderNamespace, n.LeaderLease, "the leader lease (leader election)", required, "get", "update")
	}
	if n.MetricsAuth {
		add("authentication.k8s.io", "tokenreviews", "", "", "--metrics-secure: authenticating a metrics scrape", required, "create")
		add("authorization.k8s.io", "subjectaccessreviews", "", "", "--metrics-secure: authorizing a metrics scrape", required, "create")
	}
	return unique(out)
}

// adder adds a permission for each of verbs.
type adder func(group, resource, namespace, name, why string, without string, verbs ...string)

// proberNeeds adds what the prober uses: its caches, and its scale writes unless in dry run.
func proberNeeds(n Needs, add adder) {
	add("extensions.gardener.cloud", "clusters", "", "", "the prober's Cluster cache (prober.Setup)", required, "list", "watch")
	add("", "secrets", "", "", "the prober's cache of shoot kubeconfig Secrets (prober.CacheOptions)", required, "list", "watch")
	kinds := n.ScaledKinds
	if len(kinds) == 0 {
		kinds = []string{"Deployment"}
	}
	for _, kind := range kinds {
		resource := strings.ToLower(kind) + "s"
		add("apps", resource, "", "", "the prober's dependent-resource caches (prober.NewDependentCache)", required, "list", "watch")
		if !n.DryRun {
			add("apps", resource, "", "", "the scaler's read after a conflict (scaler/request.go)", required, "get")
			add("apps", resource, "", "", "the scaler's scale writes (scaler.Scaler)", required, "patch")
		}
	}
	add("machine.sapcloud.io", "machines", "", "", "the prober's candidate-node rules (prober/candidates.go)", required, "list", "watch")
}

// weederNeeds adds what the weeder uses: its caches and watches, and its pod deletes unless in dry run.
func weederNeeds(n Needs, add adder) {
	add("discovery.k8s.io", "endpointslices", "", "", "the weeder's readiness of services (weeder.Setup)", required, "list", "watch")
	add("", "pods", "", "", "the weeder's windows (weeder/window.go)", required, "list", "watch")
	if !n.DryRun {
		add("", "pods", "", "", "the weeder's deletes (weeder/window.go)", required, "delete")
	}
}

// unique drops the repeats of a permission that two needs share (creating Leases, for sharding
// behind leader election), keeping the first.
func unique(ps []Permission) []Permission {
	type key struct{ verb, group, resource, namespace, name string }
	seen := map[key]bool{}
	out := ps[:0]
	for _, p := range ps {
		k := key{p.Verb, p.Group, p.Resource, p.Namespace, p.Name}
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}
