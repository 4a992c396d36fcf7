package sim

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// runDeploymentController plays the seed's deployment controller for the dependents: it reports
// every Deployment's desired replicas as ready at once, so that the scale flows' wait for ready
// replicas ends as it would on a real seed. It runs until ctx ends.
func (s *Seed) runDeploymentController(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(s.Env.Config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	deployments := factory.Apps().V1().Deployments()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	enqueue := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && !ready(d) {
			queue.Add(cache.MetaObjectToName(d))
		}
	}
	if _, err := deployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for range 4 {
		go func() {
			for s.reportReady(ctx, cs, deployments.Lister(), queue) {
			}
		}()
	}
	return nil
}

// ready reports whether a Deployment's status already says its desired replicas are ready.
func ready(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ReadyReplicas == want && d.Status.Replicas == want && d.Status.ObservedGeneration == d.Generation
}

// reportReady handles one queued Deployment; false when the queue has shut down.
func (s *Seed) reportReady(ctx context.Context, cs kubernetes.Interface, lister appslisters.DeploymentLister,
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]) bool {
	name, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(name)
	d, err := lister.Deployments(name.Namespace).Get(name.Name)
	if err != nil || ready(d) {
		queue.Forget(name)
		return true
	}
	d = d.DeepCopy()
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = want, want, want, want
	d.Status.ObservedGeneration = d.Generation
	if _, err := cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		queue.AddRateLimited(name)
		return true
	}
	queue.Forget(name)
	return true
}
