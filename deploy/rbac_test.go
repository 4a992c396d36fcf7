package deploy

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sharded-dwd/dependency-watchdog/access"
	"github.com/sharded-dwd/dependency-watchdog/config"
)

// permission is one verb on one kind of object, in one namespace or in all ("").
type permission struct{ verb, group, resource, namespace, name string }

func TestEachAccountHasExactlyThePermissionsDwdChecks(t *testing.T) {
	for build, objs := range testBuilds(t) {
		for _, w := range workloads(t, objs) {
			for _, c := range w.template.Spec.Containers {
				t.Run(build+"/"+w.meta.Name+"/"+c.Name, func(t *testing.T) {
					ns := buildNamespace(build)
					want := map[permission]bool{}
					for _, p := range access.Required(needs(t, c, ns)) {
						want[permission{p.Verb, p.Group, p.Resource, p.Namespace, p.Name}] = true
					}
					got := granted(t, objs, ns, w.template.Spec.ServiceAccountName)
					assert.Empty(t, difference(want, got), "dwd needs these (access.Required) and no rule grants them")
					assert.Empty(t, difference(got, want), "rules grant these and dwd needs none (access.Required)")
				})
			}
		}
	}
}

func TestLeasesAreWrittenOnlyInTheShardNamespace(t *testing.T) {
	for build, objs := range testBuilds(t) {
		t.Run(build, func(t *testing.T) {
			shards := buildNamespaces(build).shards
			// Every container keeps its Leases there: no overlay runs leader election (needs refuses
			// it), whose lease would be another.
			for _, w := range workloads(t, objs) {
				for _, c := range w.template.Spec.Containers {
					assert.Equal(t, shards, needs(t, c, buildNamespace(build)).ShardNamespace, "%s/%s: --shard-namespace", w.meta.Name, c.Name)
				}
			}
			// A ClusterRole applies in every namespace a ClusterRoleBinding, or a RoleBinding anywhere,
			// gives it: none may grant on Leases.
			for _, r := range typed[rbacv1.ClusterRole](t, objs, "ClusterRole") {
				assert.False(t, grantsOnLeases(r.Rules), "ClusterRole %s grants on leases", r.Name)
			}
			// Outside it, a Role may only let a group read the leader leases of the original's mode.
			for _, r := range typed[rbacv1.Role](t, objs, "Role") {
				for _, rule := range r.Rules {
					assert.False(t, grantsOnLeases([]rbacv1.PolicyRule{rule}) && r.Namespace != shards && !readsLeaderLeases(rule),
						"Role %s/%s grants on leases outside the shard namespace %s more than reading a leader lease", r.Namespace, r.Name, shards)
				}
			}
		})
	}
}

// readsLeaderLeases reports whether rule grants no more than reading named leader leases.
func readsLeaderLeases(rule rbacv1.PolicyRule) bool {
	if len(rule.ResourceNames) == 0 {
		return false
	}
	for _, name := range rule.ResourceNames {
		if !strings.HasSuffix(name, "-leader-election") {
			return false
		}
	}
	for _, v := range rule.Verbs {
		if v != "get" && v != "list" && v != "watch" {
			return false
		}
	}
	return true
}

// grantsOnLeases reports whether a rule of rules allows any verb on coordination.k8s.io leases.
func grantsOnLeases(rules []rbacv1.PolicyRule) bool {
	for _, r := range rules {
		group := slices.Contains(r.APIGroups, "coordination.k8s.io") || slices.Contains(r.APIGroups, rbacv1.APIGroupAll)
		resource := slices.Contains(r.Resources, "leases") || slices.Contains(r.Resources, rbacv1.ResourceAll)
		if group && resource && len(r.Verbs) > 0 {
			return true
		}
	}
	return false
}

// difference returns what a has and b has not, readably.
func difference(a, b map[permission]bool) []string {
	var out []string
	for p := range a {
		if !b[p] {
			where := "in all namespaces"
			if p.namespace != "" {
				where = "in " + p.namespace
			}
			object := p.group + "/" + p.resource
			if p.name != "" {
				object += " " + p.name
			}
			out = append(out, p.verb+" "+object+" "+where)
		}
	}
	slices.Sort(out)
	return out
}

// needs reads from a container's command line what its dwd runs, as cmd/dwd does, for a pod in ns.
func needs(t *testing.T, c corev1.Container, ns string) access.Needs {
	t.Helper()
	args := commandLine(c)
	if len(c.Command) > 0 {
		args = args[1:] // the binary; the image's entrypoint otherwise
	}
	require.NotEmpty(t, args)
	n := access.Needs{MetricsAuth: boolFlag(t, args, "metrics-secure")}
	switch args[0] {
	case "run":
		n.Prober, n.Weeder = len(flagValues(args, "prober-config")) > 0, len(flagValues(args, "weeder-config")) > 0
	case "prober":
		n.Prober = true
	case "weeder":
		n.Weeder = true
	default:
		t.Fatalf("dwd %s runs no replica", args[0])
	}
	require.False(t, boolFlag(t, args, "enable-leader-election"), "the test derives no leader election's needs; add them")
	n.ShardNamespace = ns
	if v := flagValues(args, "shard-namespace"); len(v) > 0 && v[len(v)-1] != "$(POD_NAMESPACE)" {
		n.ShardNamespace = v[len(v)-1]
	}
	// A sharded replica watches the leader lease of each of its roles (cmd/dwd leaderLeaseName), in
	// --leader-election-namespace, garden by default.
	n.WatchedLeaderNamespace = "garden"
	if v := flagValues(args, "leader-election-namespace"); len(v) > 0 {
		n.WatchedLeaderNamespace = strings.ReplaceAll(v[len(v)-1], "$(POD_NAMESPACE)", ns)
	}
	for role, runs := range map[string]bool{"prober": n.Prober, "weeder": n.Weeder} {
		if runs {
			n.WatchedLeaders = append(n.WatchedLeaders, "dwd-"+role+"-leader-election")
		}
	}
	slices.Sort(n.WatchedLeaders)
	leave := config.LeaveAuto
	if v := flagValues(args, "leave-mode"); len(v) > 0 {
		leave = v[len(v)-1]
	}
	if leave == config.LeaveAuto {
		n.PodNamespace = ns
	}
	return n
}

// boolFlag returns the value of a boolean flag in args: false when absent, true when given bare.
func boolFlag(t *testing.T, args []string, name string) bool {
	t.Helper()
	value := false
	for _, a := range args {
		switch {
		case a == "--"+name:
			value = true
		case strings.HasPrefix(a, "--"+name+"="):
			v, err := strconv.ParseBool(strings.TrimPrefix(a, "--"+name+"="))
			require.NoError(t, err, a)
			value = v
		}
	}
	return value
}

// granted returns what the RBAC of objs lets the ServiceAccount ns/account do: cluster-wide through
// ClusterRoleBindings, in a RoleBinding's namespace through it (the account's own, or another such as
// the shard namespace).
func granted(t *testing.T, objs []*unstructured.Unstructured, ns, account string) map[permission]bool {
	t.Helper()
	roles := rules(t, objs)
	out := map[permission]bool{}
	add := func(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespace string) {
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == account && s.Namespace == ns
		}) {
			return
		}
		rs, ok := roles[refKey(ref, namespace)]
		require.True(t, ok, "the binding's role %s is in the build", refKey(ref, namespace))
		for _, r := range rs {
			for _, p := range rulePermissions(r, namespace) {
				out[p] = true
			}
		}
	}
	for _, b := range typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding") {
		add(b.RoleRef, b.Subjects, "")
	}
	for _, b := range typed[rbacv1.RoleBinding](t, objs, "RoleBinding") {
		require.NotEmpty(t, b.Namespace, "RoleBinding %s", b.Name)
		add(b.RoleRef, b.Subjects, b.Namespace)
	}
	return out
}

// rulePermissions returns what a resource rule allows in namespace.
func rulePermissions(r rbacv1.PolicyRule, namespace string) []permission {
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	var out []permission
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				for _, name := range names {
					out = append(out, permission{v, g, res, namespace, name})
				}
			}
		}
	}
	return out
}

// Every workload's Lease traffic in its shard namespace has a priority level of its own (API Priority
// and Fairness), not the service-accounts schema every other workload of the seed shares: a renewal
// queued past the renew deadline fences the member (docs/sharding.md, "Rate limits").
func TestLeaseTrafficHasAPriorityLevelOfItsOwn(t *testing.T) {
	for build, objs := range testBuilds(t) {
		t.Run(build, func(t *testing.T) {
			shards := buildNamespaces(build).shards
			levels := map[string]bool{}
			for _, l := range typed[flowcontrolv1.PriorityLevelConfiguration](t, objs, "PriorityLevelConfiguration") {
				levels[l.Name] = l.Spec.Type == flowcontrolv1.PriorityLevelEnablementLimited
			}
			schemas := typed[flowcontrolv1.FlowSchema](t, objs, "FlowSchema")
			for _, w := range workloads(t, objs) {
				account := flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: w.template.Spec.ServiceAccountName, Namespace: w.meta.Namespace}}
				found := false
				for _, fs := range schemas {
					for _, rule := range fs.Spec.Rules {
						if slices.ContainsFunc(rule.Subjects, func(s flowcontrolv1.Subject) bool { return reflect.DeepEqual(s, account) }) &&
							slices.ContainsFunc(rule.ResourceRules, func(r flowcontrolv1.ResourcePolicyRule) bool {
								return slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
									slices.Contains(r.Namespaces, shards) && slices.Contains(r.Verbs, "update")
							}) {
							found = true
							assert.True(t, levels[fs.Spec.PriorityLevelConfiguration.Name], "FlowSchema %s names a limited priority level of the build", fs.Name)
							assert.Less(t, fs.Spec.MatchingPrecedence, int32(9000), "FlowSchema %s comes before service-accounts", fs.Name)
						}
					}
				}
				assert.True(t, found, "%s/%s: no FlowSchema for its Lease updates in %s", w.meta.Namespace, w.template.Spec.ServiceAccountName, shards)
			}
		})
	}
}
