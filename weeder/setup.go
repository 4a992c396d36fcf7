package weeder

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// partitionIndex indexes the cached EndpointSlices by the partition of their namespace.
const partitionIndex = "dwd.partition"

// CacheOptions is the weeder's seed cache: only the EndpointSlices of the configured services,
// selected on the server side.
func CacheOptions(cfg *config.WeederConfig) (map[client.Object]cache.ByObject, error) {
	services := make([]string, 0, len(cfg.ServicesAndDependantSelectors))
	for service := range cfg.ServicesAndDependantSelectors {
		services = append(services, service)
	}
	req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, services)
	if err != nil {
		return nil, fmt.Errorf("selecting the EndpointSlices of %v: %w", services, err)
	}
	return map[client.Object]cache.ByObject{
		&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(*req), Transform: trimSlice},
	}, nil
}

// listedAnnotations are the annotations of every trimmed slice that a list gave: one map for all,
// never written.
var listedAnnotations = map[string]string{ListedAnnotation: "true"}

// trimSlice keeps what readiness needs of an EndpointSlice: its identity, its service label, each
// endpoint's ready condition and whether its state came from a list (ListedAnnotation); no
// addresses, ports, topology, other annotations or managed fields.
func trimSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{AddressType: s.AddressType, ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Labels: map[string]string{discoveryv1.LabelServiceName: s.Labels[discoveryv1.LabelServiceName]},
	}}
	if s.Annotations[ListedAnnotation] != "" {
		out.Annotations = listedAnnotations // read only, shared: a list marks nearly every slice
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			out.Endpoints[i].Conditions.Ready = e.Conditions.Ready
		}
	}
	return out, nil
}

// Options are the weeder's settings and dependencies for Setup.
type Options struct {
	// Config is the weeder's config (required).
	Config *config.WeederConfig
	// Owner tells what this replica owns; the weeder registers with it as a partition handler
	// (required).
	Owner sharding.Owner
	// MaxWindows bounds the weeding windows that run at once (--max-weeding-windows).
	MaxWindows int
	// Audit records the pod deletes sent (the ownership audit); nil records nothing.
	Audit *audit.Log
	// DryRun, when set, is the shadow mode (--dry-run): the pod deletes and the Events are recorded
	// there, not sent.
	DryRun *dryrun.Writes
	// Clock is the time of the windows and their deadlines; defaults to the real clock.
	Clock clock.WithTicker
}

// Setup adds the weeder to mgr, whose cache must have been built with CacheOptions, and registers it
// with opts.Owner, which tells it what this replica owns.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*Manager, error) {
	if opts.Config == nil || opts.Owner == nil {
		return nil, errors.New("setting up the weeder: Options.Config and Options.Owner are required")
	}
	deps, err := setupDeps(ctx, mgr, opts.Owner.Partition)
	if err != nil {
		return nil, err
	}
	if opts.DryRun != nil {
		deps.recorder = opts.DryRun.Recorder()
	}
	m, err := newManager(opts, deps)
	if err != nil {
		return nil, err
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return nil, fmt.Errorf("watching endpoint slices: %w", err)
	}
	if _, err := informer.AddEventHandler(m); err != nil {
		return nil, err
	}
	if err := mgr.Add(m); err != nil {
		return nil, err
	}
	opts.Owner.AddHandler(m)
	return m, nil
}

// setupDeps builds the weeder's clients from mgr's config, its recorder, and the index of the cached
// EndpointSlices by partition (of their namespace, as partition maps it) its namespaces are listed with.
func setupDeps(ctx context.Context, mgr manager.Manager, partition func(namespace string) int) (managerDeps, error) {
	pods, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return managerDeps{}, fmt.Errorf("creating the pod client: %w", err)
	}
	// The deletes get a budget of their own, as large as the seed client's.
	deleteConfig := rest.CopyConfig(mgr.GetConfig())
	deleteConfig.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(max(deleteConfig.QPS, rest.DefaultQPS), max(deleteConfig.Burst, rest.DefaultBurst))
	deletes, err := kubernetes.NewForConfig(deleteConfig)
	if err != nil {
		return managerDeps{}, fmt.Errorf("creating the pod delete client: %w", err)
	}
	key := func(p int) string { return strconv.Itoa(p) }
	err = mgr.GetFieldIndexer().IndexField(ctx, &discoveryv1.EndpointSlice{}, partitionIndex, func(o client.Object) []string {
		return []string{key(partition(o.GetNamespace()))}
	})
	if err != nil {
		return managerDeps{}, fmt.Errorf("indexing endpoint slices: %w", err)
	}
	return managerDeps{client: pods, deletes: deletes.CoreV1(), recorder: mgr.GetEventRecorder("dependency-watchdog-weeder"),
		log: ctrl.Log.WithName("weeder"), namespaces: func(p int) []string { return slicesNamespaces(ctx, mgr.GetCache(), key(p)) }}, nil
}

// slicesNamespaces lists the namespaces of the cached slices in a partition.
func slicesNamespaces(ctx context.Context, c cache.Cache, partition string) []string {
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, list, client.MatchingFields{partitionIndex: partition}); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var namespaces []string
	for _, s := range list.Items {
		if !seen[s.Namespace] {
			seen[s.Namespace] = true
			namespaces = append(namespaces, s.Namespace)
		}
	}
	return namespaces
}
