package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The paths of dwd in the image (the Dockerfile's entrypoint, and the original's binary path).
var imageBinaries = []string{"/usr/local/bin/dwd", "/usr/local/bin/dependency-watchdog"}

// startLine is what dwd logs once its flags and configs are accepted and it starts (cmd/dwd/run.go).
const startLine = "Starting replica"

// startTimeout bounds how long dwd may take to log its start line.
const startTimeout = 30 * time.Second

// metricsAuth is the component every overlay is also tested with, together with its monitoring.
const metricsAuth = "components/metrics-auth"

// monitoring returns what adds dwd's PodMonitor and PrometheusRule to an overlay, as a resource or a
// component of a kustomization of the user's: deploy/prometheus for overlays/gardener, which is in
// garden as they are; components/monitoring, which moves them to the namespace of the StatefulSet
// dwd, for the others.
func monitoring(overlay string) (resources, components []string) {
	if overlay == "overlays/gardener" {
		return []string{"prometheus"}, nil
	}
	return nil, []string{"components/monitoring"}
}

// withMetricsAuth builds an overlay with its monitoring and components/metrics-auth, as a user adds
// them; the name of the build is "overlays/sharded+components/monitoring+components/metrics-auth".
func withMetricsAuth(t *testing.T, overlay string) (string, []*unstructured.Unstructured) {
	t.Helper()
	resources, components := monitoring(overlay)
	components = append(components, metricsAuth)
	name := strings.Join(append(append([]string{overlay}, resources...), components...), "+")
	return name, buildComposed(t, append([]string{overlay}, resources...), components)
}

// testBuilds are what the integration tests apply and run: every overlay, alone and with its
// monitoring and the metrics-auth component.
func testBuilds(t *testing.T) map[string][]*unstructured.Unstructured {
	builds := map[string][]*unstructured.Unstructured{}
	for _, overlay := range Overlays() {
		builds[overlay] = mustBuild(t, overlay)
		name, objs := withMetricsAuth(t, overlay)
		builds[name] = objs
	}
	return builds
}

// buildComposed builds a kustomization of the user's that lists kustomizations of the tree under
// resources and components of the tree under components. It lives in the test's in-memory copy of
// the tree only.
func buildComposed(t *testing.T, resources, components []string) []*unstructured.Unstructured {
	t.Helper()
	mem, err := inMemory()
	require.NoError(t, err)
	list := func(paths []string) string {
		var quoted []string
		for _, p := range paths {
			quoted = append(quoted, "../"+p)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	kustomization := "resources: " + list(resources) + "\n"
	if len(components) > 0 {
		kustomization += "components: " + list(components) + "\n"
	}
	require.NoError(t, mem.WriteFile("/test/kustomization.yaml", []byte(kustomization)))
	objs, err := build(mem, "test")
	require.NoError(t, err)
	return objs
}

// launch is how a container of a build runs here: its command line and environment as the kubelet
// would give them, with the files of its ConfigMap volumes in a directory of the test.
type launch struct {
	argv    []string
	env     []string
	configs []configFile
}

// configFile is a config a container reads: which role's, from which key of which ConfigMap, and
// where the test wrote it.
type configFile struct {
	role, configMap, key, path string
}

// prepare turns a container of a build into a launch of the binary bin against the test API server,
// for a pod in namespace whose Leases go to shards when its command line names their namespace
// (overlays/gardener's dwd-shards), so that no two tests share a group.
func prepare(t *testing.T, objs []*unstructured.Unstructured, w workload, c corev1.Container, namespace, shards, bin string) launch {
	t.Helper()
	argv := commandLine(c)
	if len(c.Command) == 0 {
		argv = append([]string{imageBinaries[0]}, argv...)
	}
	require.Contains(t, imageBinaries, argv[0], "the container runs dwd from the image")
	argv[0] = bin
	vars := containerEnv(t, w, c, namespace)
	for i := range argv {
		argv[i] = expand(argv[i], vars)
		if strings.HasPrefix(argv[i], "--shard-namespace=") && argv[i] != "--shard-namespace="+namespace {
			argv[i] = "--shard-namespace=" + shards
		}
	}
	mounts := writeMounts(t, objs, w, c)
	for i := range argv {
		for mountPath, dir := range mounts {
			argv[i] = strings.ReplaceAll(argv[i], mountPath+"/", dir+"/")
		}
	}
	l := launch{argv: argv, env: processEnv(vars)}
	l.configs = configFiles(t, objs, w, c, mounts, argv)
	l.argv = append(l.argv, "--kubeconfig="+env.KubeconfigFile(t), "--metrics-bind-addr=127.0.0.1:0", "--health-bind-addr=127.0.0.1:0")
	return l
}

// containerEnv returns the container's variables as the kubelet sets them, for a pod of w in namespace.
func containerEnv(t *testing.T, w workload, c corev1.Container, namespace string) map[string]string {
	t.Helper()
	pod := map[string]string{"metadata.name": w.meta.Name + "-0", "metadata.namespace": namespace, "metadata.uid": "0a1b2c3d-test-pod-uid"}
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil && pod[e.ValueFrom.FieldRef.FieldPath] != "":
			vars[e.Name] = pod[e.ValueFrom.FieldRef.FieldPath]
		default:
			t.Fatalf("env %s: the test has no value for its source; add one", e.Name)
		}
	}
	return vars
}

// envRef is a reference to a variable in a container's command line, which the kubelet expands.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces the references to defined variables in s, as the kubelet does.
func expand(s string, vars map[string]string) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// processEnv is this process's environment without what would stand in for the container's, plus
// the container's variables.
func processEnv(vars map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "POD_") {
			out = append(out, kv)
		}
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// writeMounts writes the keys of the ConfigMaps the container mounts into directories of the test
// and returns them by mount path.
func writeMounts(t *testing.T, objs []*unstructured.Unstructured, w workload, c corev1.Container) map[string]string {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range w.template.Spec.Volumes {
		volumes[v.Name] = v
	}
	dirs := map[string]string{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		require.True(t, ok, "volume %s", m.Name)
		dir := filepath.Join(t.TempDir(), m.Name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		dirs[strings.TrimSuffix(m.MountPath, "/")] = dir
		if v.EmptyDir != nil {
			continue // an empty folder, as the kubelet makes it
		}
		require.NotNil(t, v.ConfigMap, "volume %s: the test knows only ConfigMap and emptyDir volumes; add the others", m.Name)
		cm := configMapNamed(t, objs, v.ConfigMap.Name)
		for key, path := range projected(cm, v.ConfigMap.Items) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, path), []byte(cm.Data[key]), 0o600))
		}
	}
	return dirs
}

// projected returns the files a ConfigMap volume shows, by key: every key, or the items given.
func projected(cm *corev1.ConfigMap, items []corev1.KeyToPath) map[string]string {
	out := map[string]string{}
	for key := range cm.Data {
		out[key] = key
	}
	if len(items) > 0 {
		clear(out)
		for _, it := range items {
			out[it.Key] = it.Path
		}
	}
	return out
}

// configFiles returns the configs the command line argv names, each with the role that reads it and
// the ConfigMap key it comes from.
func configFiles(t *testing.T, objs []*unstructured.Unstructured, w workload, c corev1.Container, mounts map[string]string, argv []string) []configFile {
	t.Helper()
	volumeOf := map[string]string{} // mount directory → ConfigMap
	for _, m := range c.VolumeMounts {
		for _, v := range w.template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				volumeOf[mounts[strings.TrimSuffix(m.MountPath, "/")]] = v.ConfigMap.Name
			}
		}
	}
	roles := map[string]string{"prober-config": "prober", "weeder-config": "weeder", "config-file": argv[1]}
	var out []configFile
	for flag, role := range roles {
		for _, path := range flagValues(argv, flag) {
			cm, ok := volumeOf[filepath.Dir(path)]
			require.True(t, ok, "--%s=%s is in a ConfigMap the container mounts", flag, path)
			out = append(out, configFile{role: role, configMap: cm, key: filepath.Base(path), path: path})
		}
	}
	return out
}

// runUntilStarted runs l until dwd logs its start line, then stops it with SIGTERM as the kubelet
// does, waits for it to exit within grace and returns what it logged. A command line or config dwd
// rejects makes it exit first, with the problem in its output, which the failure shows.
func runUntilStarted(t *testing.T, l launch, grace time.Duration) string {
	t.Helper()
	cmd := exec.Command(l.argv[0], l.argv[1:]...)
	cmd.Env = l.env
	out := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	exitedEarly := false
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, startTimeout, true,
		func(context.Context) (bool, error) {
			select {
			case exitErr = <-exited:
				exitedEarly = true
				return true, nil
			default:
				return strings.Contains(out.String(), startLine), nil
			}
		})
	if exitedEarly {
		t.Fatalf("dwd exited (%v) before it started: %q\n%s", exitErr, l.argv[1:], out)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("dwd did not log %q within %s: %q\n%s", startLine, startTimeout, l.argv[1:], out)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		assert.NoError(t, err, "dwd stops cleanly on SIGTERM:\n%s", out)
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("dwd did not stop within the grace period (%s) after SIGTERM:\n%s", grace, out)
	}
	return out.String()
}

func TestEveryContainerStartsWithItsCommandLine(t *testing.T) {
	env.Require(t)
	bin := test.BuildDwd(t)
	for name, objs := range testBuilds(t) {
		for _, w := range workloads(t, objs) {
			for _, c := range w.template.Spec.Containers {
				t.Run(name+"/"+w.meta.Name+"/"+c.Name, func(t *testing.T) {
					t.Parallel()
					l := prepare(t, objs, w, c, env.Namespace(t), env.Namespace(t), bin)
					runUntilStarted(t, l, time.Duration(*w.template.Spec.TerminationGracePeriodSeconds)*time.Second)
				})
			}
		}
	}
}

func TestEveryConfigValidatesWithDwd(t *testing.T) {
	env.Require(t)
	bin := test.BuildDwd(t)
	for name, objs := range testBuilds(t) {
		t.Run(name, func(t *testing.T) {
			read := map[string]bool{}
			for _, w := range workloads(t, objs) {
				for _, c := range w.template.Spec.Containers {
					for _, f := range prepare(t, objs, w, c, "default", "default", bin).configs {
						read[f.configMap+"/"+f.key] = true
						assertValid(t, bin, f)
					}
				}
			}
			for _, cm := range configMaps(t, objs) {
				for key := range cm.Data {
					assert.True(t, read[cm.Name+"/"+key], "%s/%s is read by no container", cm.Name, key)
				}
			}
		})
	}
}

func TestDwdRejectsAConfigWithAnUnknownKey(t *testing.T) {
	env.Require(t)
	bin := test.BuildDwd(t)
	objs := mustBuild(t, "overlays/sharded")
	w := workloads(t, objs)[0]
	for _, f := range prepare(t, objs, w, w.template.Spec.Containers[0], "default", "default", bin).configs {
		data, err := os.ReadFile(f.path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(f.path, append(data, "probeIntervall: 5s\n"...), 0o600))
		out, err := exec.Command(bin, "config", "validate", "--"+f.role+"-config="+f.path).CombinedOutput()
		assert.Error(t, err, "a misspelt key fails validation, so the check above can fail")
		assert.Contains(t, string(out), "probeIntervall")
	}
}

// assertValid validates a config strictly with dwd.
func assertValid(t *testing.T, bin string, f configFile) {
	t.Helper()
	require.True(t, slices.Contains([]string{"prober", "weeder"}, f.role), "role of %s/%s: %s", f.configMap, f.key, f.role)
	out, err := exec.Command(bin, "config", "validate", "--"+f.role+"-config="+f.path).CombinedOutput()
	assert.NoError(t, err, "%s/%s:\n%s", f.configMap, f.key, out)
	assert.Equal(t, "valid\n", string(out), "%s/%s", f.configMap, f.key)
}

func TestMetricsAuthComponentWorksWithEveryOverlay(t *testing.T) {
	reviews := []permission{{"create", "authentication.k8s.io", "tokenreviews", "", ""},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", ""}}
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			_, objs := withMetricsAuth(t, overlay)
			ws := workloads(t, objs)
			require.Len(t, ws, len(workloads(t, mustBuild(t, overlay))), "the component adds no workload")
			for _, w := range ws {
				for _, c := range w.template.Spec.Containers {
					assert.Equal(t, []string{"--metrics-secure"}, slices.DeleteFunc(commandLine(c), func(a string) bool {
						return !strings.HasPrefix(a, "--metrics-secure")
					}), "%s/%s serves /metrics behind authentication, once", w.meta.Name, c.Name)
				}
				got := granted(t, objs, buildNamespace(overlay), w.template.Spec.ServiceAccountName)
				for _, p := range reviews {
					assert.True(t, got[p], "%s's account %s may %s %s/%s", w.meta.Name, w.template.Spec.ServiceAccountName, p.verb, p.group, p.resource)
				}
			}
			reader := rules(t, objs)[roleKey("ClusterRole", "", "dwd-metrics-reader")]
			assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader,
				"a role for the scraper")
		})
	}
}

// components/audit-log gives every dwd container of every overlay an ownership audit on a writable
// volume of its own (the root file system is read-only): the real dwd, started with the container's
// command line and that volume, writes its start record there.
func TestAuditLogComponentWritesTheAuditWithEveryOverlay(t *testing.T) {
	requireDeployCRDs(t)
	bin := test.BuildDwd(t)
	for _, overlay := range Overlays() {
		objs := buildComposed(t, []string{overlay}, []string{"components/audit-log"})
		createNamespaces(t, objs)
		createPriorityClasses(t, objs)
		c, warned := warningClient(t)
		for _, o := range objs {
			assert.NoError(t, dryRunApply(context.Background(), c, o), "%s %s applies", o.GetKind(), o.GetName())
			assert.Empty(t, warned.take(), "%s %s: the API server warns", o.GetKind(), o.GetName())
		}
		for _, w := range workloads(t, objs) {
			c := w.template.Spec.Containers[0]
			t.Run(overlay+"/"+w.meta.Name, func(t *testing.T) {
				t.Parallel()
				assert.Contains(t, commandLine(c), "--audit-log=/var/log/dwd/audit.jsonl")
				assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "audit-log", MountPath: "/var/log/dwd"})
				l := prepare(t, objs, w, c, env.Namespace(t), env.Namespace(t), bin)
				i := slices.IndexFunc(l.argv, func(a string) bool { return strings.HasPrefix(a, "--audit-log=") })
				require.GreaterOrEqual(t, i, 0)
				path := strings.TrimPrefix(l.argv[i], "--audit-log=")
				require.NotEqual(t, "/var/log/dwd/audit.jsonl", path, "the volume is the test's folder")
				runUntilStarted(t, l, time.Duration(*w.template.Spec.TerminationGracePeriodSeconds)*time.Second)
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Contains(t, string(data), `"event":"start"`, "the audit's start record")
			})
		}
	}
}
