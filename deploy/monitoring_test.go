package deploy

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// strictly decodes an object of a build into prometheus-operator's Go type T, failing on any field the
// type does not have (a misspelt field, or one of another version of the API).
func strictly[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	data, err := json.Marshal(o.Object)
	require.NoError(t, err)
	v := new(T)
	require.NoError(t, yaml.UnmarshalStrict(data, v), "%s %s", o.GetKind(), o.GetName())
	return v
}

// podMonitors returns the PodMonitors of objs, decoded strictly.
func podMonitors(t *testing.T, objs []*unstructured.Unstructured) []*monitoringv1.PodMonitor {
	t.Helper()
	var out []*monitoringv1.PodMonitor
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" {
			out = append(out, strictly[monitoringv1.PodMonitor](t, o))
		}
	}
	return out
}

// scraperAccounts are the accounts whose token a PodMonitor of objs sends, by the
// service-account-token Secret its authorization names.
func scraperAccounts(t *testing.T, objs []*unstructured.Unstructured) map[string]bool {
	t.Helper()
	secrets := map[string]*corev1.Secret{}
	for _, s := range typed[corev1.Secret](t, objs, "Secret") {
		secrets[s.Namespace+"/"+s.Name] = s
	}
	out := map[string]bool{}
	for _, pm := range podMonitors(t, objs) {
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Authorization == nil || ep.Authorization.Credentials == nil {
				continue
			}
			s, ok := secrets[pm.Namespace+"/"+ep.Authorization.Credentials.Name]
			require.True(t, ok, "the PodMonitor's token Secret %s is in its namespace", ep.Authorization.Credentials.Name)
			require.Equal(t, corev1.SecretTypeServiceAccountToken, s.Type)
			out[s.Annotations[corev1.ServiceAccountNameKey]] = true
		}
	}
	return out
}

func TestPrometheusKustomizationHoldsOnlyTheTwoCustomResources(t *testing.T) {
	var got []string
	for _, o := range mustBuild(t, "prometheus") {
		got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	assert.ElementsMatch(t, []string{"PodMonitor/garden/dwd", "PrometheusRule/garden/dwd"}, got)
}

func TestPrometheusCustomResourcesApplyAsShipped(t *testing.T) {
	requireDeployCRDs(t)
	objs := mustBuild(t, "prometheus")
	createNamespaces(t, objs)
	c, warned := warningClient(t)
	warned.take()
	for _, o := range objs {
		assert.NoError(t, dryRunApply(context.Background(), c, o), "%s %s", o.GetKind(), o.GetName())
		assert.Empty(t, warned.take(), "%s %s: the API server warns", o.GetKind(), o.GetName())
	}
}

func TestMonitoringComponentFollowsTheOverlaysNamespace(t *testing.T) {
	for _, overlay := range Overlays() {
		resources, components := monitoring(overlay)
		t.Run(overlay, func(t *testing.T) {
			objs := buildComposed(t, append([]string{overlay}, resources...), components)
			var got []string
			for _, o := range objs {
				if o.GetKind() == "PodMonitor" || o.GetKind() == "PrometheusRule" {
					got = append(got, o.GetKind()+"/"+o.GetNamespace())
				}
			}
			ns := buildNamespace(overlay)
			assert.ElementsMatch(t, []string{"PodMonitor/" + ns, "PrometheusRule/" + ns}, got, "in the namespace of dwd's pods")
		})
	}
}

// TestPrometheusObjectsDecodeStrictlyAsPrometheusOperatorTypes decodes the PodMonitor and
// PrometheusRule of every build that holds them into prometheus-operator's types, strictly.
func TestPrometheusObjectsDecodeStrictlyAsPrometheusOperatorTypes(t *testing.T) {
	builds := map[string][]*unstructured.Unstructured{"prometheus": mustBuild(t, "prometheus")}
	for _, overlay := range Overlays() {
		name, objs := withMetricsAuth(t, overlay)
		builds[name] = objs
	}
	for name, objs := range builds {
		t.Run(name, func(t *testing.T) {
			kinds := map[string]int{}
			for _, o := range objs {
				switch o.GetKind() {
				case "PodMonitor":
					strictly[monitoringv1.PodMonitor](t, o)
				case "PrometheusRule":
					strictly[monitoringv1.PrometheusRule](t, o)
				default:
					continue
				}
				kinds[o.GetKind()]++
			}
			assert.Equal(t, map[string]int{"PodMonitor": 1, "PrometheusRule": 1}, kinds)
		})
	}
}

func TestStrictDecodingRefusesAMisspeltField(t *testing.T) {
	for file, into := range map[string]any{podMonitorFile: &monitoringv1.PodMonitor{}, prometheusRuleFile: &monitoringv1.PrometheusRule{}} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			o := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal(data, &o.Object))
			data, err = json.Marshal(o.Object)
			require.NoError(t, err)
			require.NoError(t, yaml.UnmarshalStrict(data, into), "the file as it is decodes")
			require.NoError(t, unstructured.SetNestedField(o.Object, true, "spec", "honourLabels"))
			data, err = json.Marshal(o.Object)
			require.NoError(t, err)
			assert.ErrorContains(t, yaml.UnmarshalStrict(data, into), "honourLabels")
		})
	}
}

func TestMetricsAuthScrapesOverHTTPSWithTheScrapersToken(t *testing.T) {
	for _, overlay := range Overlays() {
		name, objs := withMetricsAuth(t, overlay)
		t.Run(name, func(t *testing.T) {
			pms := podMonitors(t, objs)
			require.Len(t, pms, 1)
			pm := pms[0]
			require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
			ep := pm.Spec.PodMetricsEndpoints[0]
			require.NotNil(t, ep.Scheme)
			assert.Equal(t, "https", string(*ep.Scheme))
			require.NotNil(t, ep.Authorization)
			assert.Equal(t, "Bearer", ep.Authorization.Type)
			require.NotNil(t, ep.TLSConfig, "dwd's certificate: skipped or its CA")

			accounts := scraperAccounts(t, objs)
			require.Len(t, accounts, 1)
			var sa string
			for a := range accounts {
				sa = a
			}
			present := slices.ContainsFunc(typed[corev1.ServiceAccount](t, objs, "ServiceAccount"), func(a *corev1.ServiceAccount) bool {
				return a.Name == sa && a.Namespace == pm.Namespace
			})
			assert.True(t, present, "the scraper's account %s is in the PodMonitor's namespace", sa)
			assert.True(t, bindsMetricsReader(t, objs, pm.Namespace, sa), "%s may get /metrics", sa)
		})
	}
}

// bindsMetricsReader reports whether a ClusterRoleBinding of objs binds the account namespace/name to
// a ClusterRole of objs that allows get on /metrics.
func bindsMetricsReader(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) bool {
	t.Helper()
	roles := rules(t, objs)
	for _, b := range typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding") {
		subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}
		if !slices.Contains(b.Subjects, subject) {
			continue
		}
		for _, r := range roles[refKey(b.RoleRef, "")] {
			if slices.Contains(r.NonResourceURLs, "/metrics") && slices.Contains(r.Verbs, "get") {
				return true
			}
		}
	}
	return false
}

func TestRunbooksComponentReplacesTheBaseOfEveryRunbookURL(t *testing.T) {
	const base = "https://wiki.example.internal/dwd/monitoring.html"
	mem, err := inMemory()
	require.NoError(t, err)
	require.NoError(t, mem.WriteFile("/test/kustomization.yaml", []byte(
		"resources: [../prometheus, runbooks.yaml]\ncomponents: [../components/runbooks]\n")))
	require.NoError(t, mem.WriteFile("/test/runbooks.yaml", []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: dwd-runbooks
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  url: `+base+"\n")))
	objs, err := build(mem, "test")
	require.NoError(t, err)
	var rule *monitoringv1.PrometheusRule
	for _, o := range objs {
		require.NotEqual(t, "ConfigMap", o.GetKind(), "the local-config ConfigMap is not applied")
		if o.GetKind() == "PrometheusRule" {
			rule = strictly[monitoringv1.PrometheusRule](t, o)
		}
	}
	require.NotNil(t, rule)
	alerts := alertRules(t)
	var got []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Annotations["runbook_url"])
		}
	}
	require.Len(t, got, len(alerts))
	for i, r := range alerts {
		assert.Equal(t, base+"#"+strings.ToLower(r.Alert), got[i], r.Alert)
	}
}
