package test

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AwaitGranted waits until cfg (impersonating a user or ServiceAccount just bound to rules) may do
// everything rules name in namespace ns, by its own SelfSubjectAccessReviews. The API server's RBAC
// authorizer learns of a new Role and RoleBinding through a watch: a test that checks a denial, or a
// grant, right after creating them sees the authorizer's lag, more of it on a loaded machine.
func AwaitGranted(t testing.TB, cfg *rest.Config, ns string, rules []rbacv1.PolicyRule) {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("a client of the impersonating config: %v", err)
	}
	for _, attrs := range resourceAttributes(ns, rules) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true,
			func(ctx context.Context) (bool, error) {
				answer, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				return err == nil && answer.Status.Allowed, nil
			})
		if err != nil {
			t.Fatalf("%s %s.%s in %q not granted within 10s of binding it: %v", attrs.Verb, attrs.Resource, attrs.Group, ns, err)
		}
	}
}

// UserWithRole binds user in ns to a Role with rules, waits until the API server grants them, and
// returns a config that impersonates user.
func (e *Environment) UserWithRole(t testing.TB, ns, user string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s/%s: %v", obj, ns, user, err)
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	AwaitGranted(t, cfg, ns, rules)
	return cfg
}

// resourceAttributes lists every group, resource and verb the rules name, in ns.
func resourceAttributes(ns string, rules []rbacv1.PolicyRule) []authorizationv1.ResourceAttributes {
	var attrs []authorizationv1.ResourceAttributes
	for _, rule := range rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb})
				}
			}
		}
	}
	return attrs
}
