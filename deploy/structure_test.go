package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
)

// The ports dwd serves on by default (cmd/dwd/options.go; the original's).
const (
	metricsPort = 9643
	healthPort  = 9644
	nonRootID   = 65532
)

// forEachContainer runs check on every container of every workload of every test build.
func forEachContainer(t *testing.T, check func(t *testing.T, w workload, c corev1.Container)) {
	for name, objs := range testBuilds(t) {
		for _, w := range workloads(t, objs) {
			for _, c := range w.template.Spec.Containers {
				t.Run(fmt.Sprintf("%s/%s/%s", name, w.meta.Name, c.Name), func(t *testing.T) { check(t, w, c) })
			}
		}
	}
}

func TestContainersAreLockedDown(t *testing.T) {
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		pod := w.template.Spec.SecurityContext
		require.NotNil(t, pod, "a pod security context")
		sc := c.SecurityContext
		require.NotNil(t, sc, "a container security context")
		assert.True(t, deref(sc.RunAsNonRoot, pod.RunAsNonRoot), "runAsNonRoot")
		assert.EqualValues(t, nonRootID, deref(sc.RunAsUser, pod.RunAsUser), "runAsUser")
		assert.EqualValues(t, nonRootID, deref(sc.RunAsGroup, pod.RunAsGroup), "runAsGroup")
		assert.True(t, deref(sc.ReadOnlyRootFilesystem, nil), "readOnlyRootFilesystem")
		assert.False(t, deref(sc.AllowPrivilegeEscalation, ptrTo(true)), "allowPrivilegeEscalation")
		assert.False(t, deref(sc.Privileged, nil), "privileged")
		require.NotNil(t, sc.Capabilities, "capabilities")
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "every capability dropped")
		assert.Empty(t, sc.Capabilities.Add, "none added")
		seccomp := cmpOr(sc.SeccompProfile, pod.SeccompProfile)
		require.NotNil(t, seccomp, "a seccomp profile")
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp.Type)
		spec := w.template.Spec
		assert.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC, "no host namespaces")
		for _, m := range c.VolumeMounts {
			assert.True(t, m.ReadOnly, "volume %s mounted read-only", m.Name)
		}
	})
}

func TestContainersRunTheImageTheKustomizationSets(t *testing.T) {
	want := baseImage(t)
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		assert.Equal(t, want, c.Image, "the base's images entry sets every container's image")
	})
}

// The base names the image `make image` builds by default: one name, whichever an operator reads first.
func TestTheBaseNamesTheImageMakeBuilds(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile's IMAGE default")
	name, _, _ := strings.Cut(baseImage(t), ":")
	assert.Equal(t, string(m[1]), name)
}

// baseImage returns the image the images entry of the base's kustomization.yaml sets, name:tag.
func baseImage(t *testing.T) string {
	t.Helper()
	data, err := tree.ReadFile("base/kustomization.yaml")
	require.NoError(t, err)
	var k types.Kustomization
	require.NoError(t, yaml.UnmarshalStrict(data, &k))
	require.Len(t, k.Images, 1)
	img := k.Images[0]
	require.Equal(t, "dwd", img.Name, "the entry replaces the image the StatefulSet names")
	require.NotEmpty(t, img.NewName)
	require.NotEmpty(t, img.NewTag, "a tag, not latest by default")
	return img.NewName + ":" + img.NewTag
}

func TestProbesAskTheHealthEndpoints(t *testing.T) {
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		assert.Equal(t, int32(metricsPort), portNamed(t, c, "metrics"), "the metrics port is named for a ServiceMonitor")
		for _, p := range []struct {
			probe *corev1.Probe
			path  string
		}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
			require.NotNil(t, p.probe, p.path)
			require.NotNil(t, p.probe.HTTPGet, p.path)
			assert.Equal(t, p.path, p.probe.HTTPGet.Path)
			assert.Equal(t, int32(healthPort), resolvePort(t, c, p.probe.HTTPGet.Port), "%s on the health port", p.path)
		}
		liveness := c.LivenessProbe
		tolerated := time.Duration(liveness.PeriodSeconds*liveness.FailureThreshold) * time.Second
		assert.Greater(t, tolerated, config.DefaultMemberLeaseDuration,
			"the liveness probe must not restart a replica within a member lease duration of failures")
		assert.Empty(t, flagValues(commandLine(c), "health-bind-addr"), "the probes assume the default health address")
	})
}

func TestContainersGetTheirPodFromTheDownwardAPI(t *testing.T) {
	want := map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"}
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		got := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				got[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		assert.Equal(t, want, got)
	})
}

func TestGracePeriodOutlastsALeave(t *testing.T) {
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		// A leave runs two steps, each bounded by the renew deadline (sharding/runner.go shutdown).
		deadline := config.DefaultMemberRenewDeadline
		if v := flagValues(commandLine(c), "member-renew-deadline"); len(v) > 0 {
			var err error
			deadline, err = time.ParseDuration(v[len(v)-1])
			require.NoError(t, err)
		}
		grace := w.template.Spec.TerminationGracePeriodSeconds
		require.NotNil(t, grace)
		assert.Greater(t, time.Duration(*grace)*time.Second, 2*deadline)
	})
}

func TestContainersRequestWhatTheyUse(t *testing.T) {
	forEachContainer(t, func(t *testing.T, w workload, c corev1.Container) {
		req, lim := c.Resources.Requests, c.Resources.Limits
		require.False(t, req.Cpu().IsZero(), "a CPU request")
		require.False(t, req.Memory().IsZero(), "a memory request")
		require.False(t, lim.Memory().IsZero(), "a memory limit")
		assert.GreaterOrEqual(t, lim.Memory().Cmp(*req.Memory()), 0, "the memory limit is at least the request")
		assert.True(t, lim.Cpu().IsZero(), "no CPU limit: throttling delays lease renewals")
	})
}

func TestEachWorkloadHasItsOwnBudgetAndService(t *testing.T) {
	for _, overlay := range Overlays() {
		objs := mustBuild(t, overlay)
		all := workloads(t, objs)
		for _, w := range all {
			t.Run(overlay+"/"+w.meta.Name, func(t *testing.T) {
				selector, err := metav1.LabelSelectorAsSelector(w.selector)
				require.NoError(t, err)
				require.True(t, selector.Matches(labels.Set(w.template.Labels)), "the workload selects its pods")
				var mine []*policyv1.PodDisruptionBudget
				var names []string
				for _, pdb := range budgets(t, objs) {
					if selects(t, pdb.Spec.Selector, w) {
						mine = append(mine, pdb)
						names = append(names, pdb.Name)
					}
					for _, other := range all {
						if other.meta.Name != w.meta.Name {
							assert.False(t, selects(t, pdb.Spec.Selector, other) && selects(t, pdb.Spec.Selector, w),
								"budget %s selects the pods of %s and %s", pdb.Name, w.meta.Name, other.meta.Name)
						}
					}
				}
				require.Len(t, names, 1, "one budget selects the pods (the eviction API refuses a pod two select)")
				assert.Equal(t, intstr.FromInt32(1), *mine[0].Spec.MaxUnavailable)
				assert.Equal(t, policyv1.AlwaysAllow, *mine[0].Spec.UnhealthyPodEvictionPolicy)
				if w.kind == "StatefulSet" {
					assertGoverningService(t, objs, overlay, w)
				}
			})
		}
	}
}

// assertGoverningService checks that the StatefulSet's service is a headless Service of the build
// that selects its pods and serves their metrics port.
func assertGoverningService(t *testing.T, objs []*unstructured.Unstructured, overlay string, w workload) {
	var svc *corev1.Service
	for _, s := range typed[corev1.Service](t, objs, "Service") {
		if s.Name == w.serviceName {
			svc = s
		}
	}
	require.NotNil(t, svc, "%s: the StatefulSet's service %q", overlay, w.serviceName)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless")
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)), "the Service selects the pods")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	assert.Equal(t, int32(metricsPort), svc.Spec.Ports[0].Port)
}

func TestBindingsNameTheOverlaysAccounts(t *testing.T) {
	for name, objs := range testBuilds(t) {
		t.Run(name, func(t *testing.T) {
			accounts := map[string]bool{}
			for _, sa := range typed[corev1.ServiceAccount](t, objs, "ServiceAccount") {
				accounts[sa.Name] = true
			}
			used := map[string]bool{}
			for _, w := range workloads(t, objs) {
				require.True(t, accounts[w.template.Spec.ServiceAccountName], "%s runs as an account of the overlay", w.meta.Name)
				used[w.template.Spec.ServiceAccountName] = true
			}
			// The scraper of components/metrics-auth runs no workload: the PodMonitor sends its token.
			for sa := range scraperAccounts(t, objs) {
				used[sa] = true
			}
			roles := rules(t, objs)
			for _, b := range bindings(t, objs) {
				assert.Contains(t, roles, refKey(b.RoleRef, b.Namespace), "%s binds a role of the overlay", b.Name)
				require.NotEmpty(t, b.Subjects, b.Name)
				for _, s := range b.Subjects {
					assert.Equal(t, rbacv1.ServiceAccountKind, s.Kind, b.Name)
					assert.True(t, used[s.Name], "%s binds %s, the account of a workload or the scraper's", b.Name, s.Name)
					assert.Equal(t, buildNamespace(name), s.Namespace, "%s binds the account in the overlay's namespace", b.Name)
				}
			}
		})
	}
}

func TestNoRuleHasAWildcard(t *testing.T) {
	builds := testBuilds(t)
	builds["base"] = mustBuild(t, "base")
	for path, objs := range builds {
		for name, rs := range rules(t, objs) {
			for _, r := range rs {
				for _, v := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs) {
					assert.NotContains(t, v, "*", "%s: %s", path, name)
				}
			}
		}
	}
}

func TestBaseConfigsAreGardeners(t *testing.T) {
	base := configMaps(t, mustBuild(t, "base"))
	require.Len(t, base, 1)
	prober := configtest.Prober(t, base[0].Data["prober.yaml"])
	assert.Equal(t, configtest.Prober(t, readFile(t, "../config/testdata/prober-gardener.yaml")), prober,
		"the prober config Gardener writes (config/testdata)")
	weeder := configtest.Weeder(t, base[0].Data["weeder.yaml"])
	assert.Equal(t, configtest.Weeder(t, readFile(t, "../config/testdata/weeder-example.yaml")), weeder,
		"the weeder config Gardener writes (config/testdata)")
}

// readFile returns the contents of the file at path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// deref returns *p, else *fallback, else the zero value.
func deref[T any](p, fallback *T) T {
	if p != nil {
		return *p
	}
	if fallback != nil {
		return *fallback
	}
	var zero T
	return zero
}

func ptrTo[T any](v T) *T { return &v }

// cmpOr returns the first non-nil pointer.
func cmpOr[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// portNamed returns the container port of the given name.
func portNamed(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// resolvePort returns the number of a probe's port, looking a named one up in the container.
func resolvePort(t *testing.T, c corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	return portNamed(t, c, port.StrVal)
}

// commandLine is the container's command and arguments.
func commandLine(c corev1.Container) []string {
	return slices.Concat(c.Command, c.Args)
}

// flagValues returns the values given to --name in args, in order.
func flagValues(args []string, name string) []string {
	var values []string
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"+name+"="):
			values = append(values, strings.TrimPrefix(a, "--"+name+"="))
		case a == "--"+name && i+1 < len(args):
			values = append(values, args[i+1])
		}
	}
	return values
}

// selects reports whether a label selector matches the pods of a workload.
func selects(t *testing.T, sel *metav1.LabelSelector, w workload) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return !s.Empty() && s.Matches(labels.Set(w.template.Labels))
}

// binding is a RoleBinding or a ClusterRoleBinding (whose Namespace is empty).
type binding struct {
	Name      string
	Namespace string
	RoleRef   rbacv1.RoleRef
	Subjects  []rbacv1.Subject
}

func bindings(t *testing.T, objs []*unstructured.Unstructured) []binding {
	var out []binding
	for _, b := range typed[rbacv1.RoleBinding](t, objs, "RoleBinding") {
		out = append(out, binding{b.Kind + "/" + b.Namespace + "/" + b.Name, b.Namespace, b.RoleRef, b.Subjects})
	}
	for _, b := range typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding") {
		out = append(out, binding{b.Kind + "/" + b.Name, "", b.RoleRef, b.Subjects})
	}
	return out
}
