// Command managedresource prints a kustomization of the deploy tree (overlays/gardener by default, or
// a kustomization of your own that holds it with components) as a Gardener seed ManagedResource and
// the Secret that holds its objects (deploy.ManagedResource), for `kubectl apply -f -`:
//
//	go run ./deploy/managedresource -k deploy/overlays/gardener | kubectl apply -f -
//
// (make managedresource). docs/gardener.md says when and why. It needs neither dwd nor a cluster.
package main
