package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

// Names the simulated seed uses, as Gardener does.
const (
	KubeconfigSecretName = "shoot-access-dependency-watchdog-probe"
	EtcdService          = "etcd-main-client"
	APIServerService     = "kube-apiserver"
)

// Dependents are the Deployments the prober scales, with the replicas a simulated shoot starts with.
var Dependents = map[string]int32{"kube-controller-manager": 1, "machine-controller-manager": 1, "cluster-autoscaler": 1}

var (
	clusterGVK = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}
	machineGVK = schema.GroupVersionKind{Group: "machine.sapcloud.io", Version: "v1alpha1", Kind: "Machine"}
)

// Seed is a running simulated seed with its shoots' API servers, and a stand-in for the seed's
// deployment controller that reports the dependents' replicas ready.
type Seed struct {
	Env    *test.Environment
	Shoots *ShootServer
	// Dir holds the seed's kubeconfig and whatever the caller writes next to it.
	Dir string
	// stop ends the deployment controller.
	stop context.CancelFunc
}

// StartSeed starts the seed's control plane and the shoot server of default options; dir receives
// the kubeconfig.
func StartSeed(ctx context.Context, dir string) (*Seed, error) {
	return StartSeedWith(ctx, dir, SeedOptions{})
}

// SeedOptions tune the seed of StartSeedWith.
type SeedOptions struct {
	// Shoots are the shoot server's options.
	Shoots ShootServerOptions
	// WithoutShardSelectors runs kube-apiserver with the feature gate ShardedListAndWatch off.
	WithoutShardSelectors bool
}

// StartSeedWith starts the seed's control plane and a shoot server of the options; dir receives the
// kubeconfig.
func StartSeedWith(ctx context.Context, dir string, opts SeedOptions) (*Seed, error) {
	env, err := test.StartWith(test.StartOptions{WithoutShardSelectors: opts.WithoutShardSelectors})
	if err != nil {
		return nil, err
	}
	shoots, err := NewShootServer(opts.Shoots)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	if err := shoots.Start(ctx); err != nil {
		_ = env.Stop()
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	s := &Seed{Env: env, Shoots: shoots, Dir: dir, stop: stop}
	if err := os.WriteFile(s.KubeconfigPath(), env.KubeConfig, 0o600); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.runDeploymentController(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// KubeconfigPath is the path of the seed's kubeconfig.
func (s *Seed) KubeconfigPath() string {
	return filepath.Join(s.Dir, "seed.kubeconfig")
}

// Stop stops the deployment controller, the shoot server and the seed's control plane.
func (s *Seed) Stop() error {
	s.stop()
	_ = s.Shoots.Close()
	return s.Env.Stop()
}

// ShootName is the namespace of simulated shoot i: shoot--sim--<six base-36 digits>, the digits a
// bijection of i (i × 2654435761 + 12345 mod 36⁶), so that the names differ in all their last six
// characters as real shoot names differ, not in their last one or two. FNV-1a, the hash of the
// partitions that an API server can select (fnv1a64-range-v1), puts names that differ only at their
// end into a few partitions: shoot--sim--s0000 … s4999 filled 76 of 887 partitions, these fill 882,
// and the busiest of three replicas holds 1.06 × the mean (docs/caches.md).
func ShootName(i int) string {
	const digits = 36 * 36 * 36 * 36 * 36 * 36
	v := (uint64(i)*2654435761 + 12345) % digits
	return fmt.Sprintf("shoot--sim--%06s", strconv.FormatUint(v, 36))
}

// NodeNames are the node names of a simulated shoot.
func NodeNames(shoot string, nodes int) []string {
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-node-%d", shoot, i)
	}
	return names
}

// CreateShoots creates shoots [from, to) with the given number of nodes each, concurrently;
// progress, if set, is told how many are done.
func (s *Seed) CreateShoots(ctx context.Context, from, to, nodes int, progress func(done, total int)) error {
	var done atomic.Int64
	return forShoots(from, to, func(i int) error {
		if err := s.CreateShoot(ctx, ShootName(i), nodes); err != nil {
			return err
		}
		if n := done.Add(1); progress != nil {
			progress(int(n), to-from)
		}
		return nil
	})
}

// forShoots calls fn for shoots [from, to), 16 at a time, and returns the first error.
func forShoots(from, to int, fn func(i int) error) error {
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := from; i < to; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				once.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	return firstErr
}

// TouchSecrets changes an annotation of the kubeconfig Secret of shoots [from, to), concurrently:
// one watch event of the seed per shoot, for whoever caches them.
func (s *Seed) TouchSecrets(ctx context.Context, from, to int) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"sim.dwd.gardener.cloud/touched":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	return forShoots(from, to, func(i int) error {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KubeconfigSecretName, Namespace: ShootName(i)}}
		return s.Env.Client.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch))
	})
}

// CreateShoot creates everything of one shoot in the seed and registers its API server.
func (s *Seed) CreateShoot(ctx context.Context, name string, nodes int) error {
	nodeNames := NodeNames(name, nodes)
	s.Shoots.AddShoot(name, nodeNames)
	c := s.Env.Client
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		cluster(name),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KubeconfigSecretName, Namespace: name},
			Data: map[string][]byte{"kubeconfig": s.Shoots.Kubeconfig(name)}},
		endpointSlice(name, EtcdService, true),
		endpointSlice(name, APIServerService, true),
	}
	for dep, replicas := range Dependents {
		objects = append(objects, deployment(name, dep, replicas))
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s in %s: %w", o, o.GetName(), name, err)
		}
	}
	for _, node := range nodeNames {
		if err := createMachine(ctx, c, name, node); err != nil {
			return err
		}
	}
	for _, pod := range []struct{ name, role string }{{"kube-apiserver-0", "apiserver"}, {"kube-controller-manager-0", "controller-manager"}} {
		if err := CreatePod(ctx, c, name, pod.name, pod.role, ""); err != nil {
			return err
		}
	}
	return nil
}

// cluster is the Cluster of a shoot whose last reconcile succeeded, with one worker pool.
func cluster(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	u.SetName(name)
	u.Object["spec"] = map[string]any{
		"cloudProfile": map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile"},
		"seed":         map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed"},
		"shoot": map[string]any{
			"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
			"metadata": map[string]any{"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
			"spec": map[string]any{
				"hibernation": map[string]any{"enabled": false},
				"provider":    map[string]any{"workers": []any{map[string]any{"name": "pool-a"}}},
			},
			"status": map[string]any{"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded"}},
		},
	}
	return u
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "registry.invalid/" + name}}}},
	}}
}

// endpointSlice is a slice of service with one endpoint of the given readiness.
func endpointSlice(ns, service string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-sim", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
	}
}

// SetServiceReady changes the readiness of a shoot's service endpoint.
func (s *Seed) SetServiceReady(ctx context.Context, ns, service string, ready bool) error {
	slice := &discoveryv1.EndpointSlice{}
	if err := s.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service + "-sim"}, slice); err != nil {
		return err
	}
	slice.Endpoints[0].Conditions.Ready = ptr.To(ready)
	return s.Env.Client.Update(ctx, slice)
}

func createMachine(ctx context.Context, c client.Client, ns, node string) error {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(machineGVK)
	m.SetNamespace(ns)
	m.SetName("machine-" + node)
	m.SetLabels(map[string]string{"node": node})
	m.Object["spec"] = map[string]any{"class": map[string]any{"kind": "MachineClass", "name": "sim"}}
	if err := c.Create(ctx, m); err != nil {
		return fmt.Errorf("creating machine of %s: %w", node, err)
	}
	if err := unstructured.SetNestedField(m.Object, "Running", "status", "currentStatus", "phase"); err != nil {
		return err
	}
	return c.Status().Update(ctx, m)
}

// CreatePod creates a control-plane pod with role; waiting, if set, is the reason its container
// waits with (e.g. CrashLoopBackOff), else it runs.
func CreatePod(ctx context.Context, c client.Client, ns, name, role, waiting string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{"gardener.cloud/role": "controlplane", "role": role}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/" + role}}}}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
	}
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if waiting != "" {
		state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: state}}
	return c.Status().Update(ctx, pod)
}

// CreateNamespace creates a namespace, for example the one the replicas' Leases live in.
func (s *Seed) CreateNamespace(ctx context.Context, name string) error {
	return s.Env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// KubeconfigAs is the seed's kubeconfig with every user impersonating user (users[].user.as): the
// administrator's credentials still authenticate, and the API server authorizes each request as user.
// For a ServiceAccount, user is system:serviceaccount:<namespace>:<name>; the API server adds its
// groups (system:serviceaccounts and system:serviceaccounts:<namespace>).
func (s *Seed) KubeconfigAs(user string) ([]byte, error) {
	cfg, err := clientcmd.Load(s.Env.KubeConfig)
	if err != nil {
		return nil, fmt.Errorf("reading the seed's kubeconfig: %w", err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	return clientcmd.Write(*cfg)
}

// WriteKubeconfigAs writes KubeconfigAs(user) to file in Dir and returns its path.
func (s *Seed) WriteKubeconfigAs(file, user string) (string, error) {
	data, err := s.KubeconfigAs(user)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, file)
	return path, os.WriteFile(path, data, 0o600)
}
