package deploy

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Gardener's conventions for the original's workloads (gardener/gardener,
// pkg/component/nodemanagement/dependencywatchdog/bootstrap.go and the constants it uses).
const (
	gardenerBinary        = "/usr/local/bin/dependency-watchdog"
	gardenerConfigDir     = "/etc/dependency-watchdog/config"
	gardenerConfigKey     = "dep-config.yaml"
	gardenerPriorityClass = "gardener-system-800"
	haTypeLabel           = "high-availability-config.resources.gardener.cloud/type"
	haReplicasAnnotation  = "high-availability-config.resources.gardener.cloud/replicas"
)

// gardenerRoles are the original's roles as Gardener runs them: the flags it gives each, and the
// network-policy labels of its pods.
var gardenerRoles = map[string]struct {
	flags   []string
	network map[string]string
}{
	"prober": {
		flags: []string{"--config-file=" + gardenerConfigDir + "/" + gardenerConfigKey, "--kube-api-qps=20.0", "--kube-api-burst=100", "--zap-log-level=INFO"},
		network: map[string]string{
			"networking.gardener.cloud/to-dns":                                                         "allowed",
			"networking.gardener.cloud/to-runtime-apiserver":                                           "allowed",
			"networking.gardener.cloud/to-public-networks":                                             "allowed",
			"networking.gardener.cloud/to-private-networks":                                            "allowed",
			"networking.resources.gardener.cloud/to-all-istio-ingresses-istio-ingressgateway-tcp-9443": "allowed",
			"networking.resources.gardener.cloud/to-all-shoots-kube-apiserver-tcp-443":                 "allowed",
		},
	},
	"weeder": {
		flags: []string{"--config-file=" + gardenerConfigDir + "/" + gardenerConfigKey},
		network: map[string]string{
			"networking.gardener.cloud/to-dns":               "allowed",
			"networking.gardener.cloud/to-runtime-apiserver": "allowed",
		},
	},
}

func TestGardenerOverlayTakesTheOriginalsShape(t *testing.T) {
	objs := mustBuild(t, "overlays/gardener")
	byName := map[string]workload{}
	for _, w := range workloads(t, objs) {
		byName[w.meta.Name] = w
	}
	require.ElementsMatch(t, []string{"dependency-watchdog-prober", "dependency-watchdog-weeder"}, slices.Collect(maps.Keys(byName)))
	for role, want := range gardenerRoles {
		t.Run(role, func(t *testing.T) {
			w := byName["dependency-watchdog-"+role]
			require.Equal(t, "StatefulSet", w.kind)
			app := "dependency-watchdog-" + role
			assert.Equal(t, app, w.meta.Labels["app"])
			assert.Equal(t, app, w.template.Labels["app"])
			assert.Equal(t, "controller", w.meta.Labels[haTypeLabel])
			require.NotNil(t, w.replicas)
			assert.Equal(t, strconv.Itoa(int(*w.replicas)), w.meta.Annotations[haReplicasAnnotation],
				"Gardener's resource manager keeps the replicas the annotation gives")
			assert.Equal(t, gardenerPriorityClass, w.template.Spec.PriorityClassName)
			assert.Equal(t, want.network, networkLabels(w.template.Labels))
			assert.Nil(t, w.template.Spec.AutomountServiceAccountToken, "Gardener's resource manager mounts the token")

			require.Len(t, w.template.Spec.Containers, 1)
			c := w.template.Spec.Containers[0]
			assert.Equal(t, "dependency-watchdog", c.Name)
			// The binary as the command and the rest as its arguments, as in the base: a component
			// adds flags to the arguments (components/metrics-auth).
			assert.Equal(t, []string{gardenerBinary}, c.Command)
			require.NotEmpty(t, c.Args)
			assert.Equal(t, role, c.Args[0])
			for _, f := range want.flags {
				assert.Contains(t, c.Args, f)
			}
			assert.Empty(t, flagValues(c.Args, "enable-leader-election"), "sharded, not leader-elected")
			assert.Equal(t, []string{"dwd-" + role}, flagValues(c.Args, "shard-group"))
			assert.Equal(t, []string{overlayNamespaces["overlays/gardener"].shards}, flagValues(c.Args, "shard-namespace"),
				"the Leases in a namespace of their own, not in garden")
			assertGardenerConfigMount(t, objs, w, c, role)
		})
	}
}

// assertGardenerConfigMount checks that the container reads the role's ConfigMap, holding only
// dep-config.yaml, at Gardener's path.
func assertGardenerConfigMount(t *testing.T, objs []*unstructured.Unstructured, w workload, c corev1.Container, role string) {
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, gardenerConfigDir, c.VolumeMounts[0].MountPath)
	var cm *corev1.ConfigMap
	for _, v := range w.template.Spec.Volumes {
		if v.Name == c.VolumeMounts[0].Name && v.ConfigMap != nil {
			cm = configMapNamed(t, objs, v.ConfigMap.Name)
		}
	}
	require.NotNil(t, cm, "the mount is a ConfigMap of the overlay")
	assert.True(t, strings.HasPrefix(cm.Name, "dependency-watchdog-"+role+"-config-"), cm.Name)
	assert.Equal(t, []string{gardenerConfigKey}, slices.Collect(maps.Keys(cm.Data)))
}

func TestGardenerOverlayNamesNothingAsGardenerDoes(t *testing.T) {
	// Gardener's ConfigMaps carry the first 8 hex digits of their data's SHA-256 (MakeUnique).
	gardenerConfigMap := regexp.MustCompile(`^dependency-watchdog-(prober|weeder)-config-[0-9a-f]{8}$`)
	taken := map[string]bool{}
	for role := range gardenerRoles {
		name := "dependency-watchdog-" + role
		for _, kind := range []string{"ServiceAccount", "Deployment", "PodDisruptionBudget", "VerticalPodAutoscaler"} {
			taken[kind+"/"+name] = true
		}
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			taken[kind+"/gardener.cloud:"+name] = true
		}
	}
	for _, o := range mustBuild(t, "overlays/gardener") {
		id := o.GetKind() + "/" + o.GetName()
		assert.False(t, taken[id], "%s is an object Gardener creates for the original", id)
		assert.False(t, o.GetKind() == "ConfigMap" && gardenerConfigMap.MatchString(o.GetName()), id)
	}
}

func TestGardenerConfigsAreTheBases(t *testing.T) {
	base := configMaps(t, mustBuild(t, "base"))[0].Data
	objs := mustBuild(t, "overlays/gardener")
	prober := configMapWithPrefix(t, objs, "dependency-watchdog-prober-config-").Data[gardenerConfigKey]
	weeder := configMapWithPrefix(t, objs, "dependency-watchdog-weeder-config-").Data[gardenerConfigKey]
	assert.Equal(t, configtest.Prober(t, base["prober.yaml"]), configtest.Prober(t, prober))
	assert.Equal(t, configtest.Weeder(t, base["weeder.yaml"]), configtest.Weeder(t, weeder))
}

// networkLabels returns the network-policy labels among labels.
func networkLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, "networking.") {
			out[k] = v
		}
	}
	return out
}

func configMapNamed(t *testing.T, objs []*unstructured.Unstructured, name string) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range configMaps(t, objs) {
		if cm.Name == name {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

func configMapWithPrefix(t *testing.T, objs []*unstructured.Unstructured, prefix string) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range configMaps(t, objs) {
		if strings.HasPrefix(cm.Name, prefix) {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %s...", prefix)
	return nil
}

// TestGardenerServicesLetTheSeedPrometheusScrape: garden denies ingress by default, and Gardener's
// resource manager opens a pod's port to the seed's Prometheus only when a Service selecting the pod
// names it in the scrape-targets annotation.
func TestGardenerServicesLetTheSeedPrometheusScrape(t *testing.T) {
	const annotation = "networking.resources.gardener.cloud/from-all-seed-scrape-targets-allowed-ports"
	objs := mustBuild(t, "overlays/gardener")
	services := typed[corev1.Service](t, objs, "Service")
	for _, w := range workloads(t, objs) {
		t.Run(w.meta.Name, func(t *testing.T) {
			var metricsPort int32
			for _, c := range w.template.Spec.Containers {
				for _, p := range c.Ports {
					if p.Name == "metrics" {
						metricsPort = p.ContainerPort
					}
				}
			}
			require.NotZero(t, metricsPort, "the container has a metrics port")
			i := slices.IndexFunc(services, func(s *corev1.Service) bool { return s.Name == w.serviceName })
			require.GreaterOrEqual(t, i, 0, "the governing Service %s exists", w.serviceName)
			svc := services[i]
			for k, v := range svc.Spec.Selector {
				assert.Equal(t, v, w.template.Labels[k], "the Service selects the pods")
			}
			var ports []struct {
				Protocol string `json:"protocol"`
				Port     int32  `json:"port"`
			}
			require.NoError(t, json.Unmarshal([]byte(svc.Annotations[annotation]), &ports), "%s: %q", annotation, svc.Annotations[annotation])
			assert.Contains(t, ports, struct {
				Protocol string `json:"protocol"`
				Port     int32  `json:"port"`
			}{"TCP", metricsPort})
		})
	}
}
