// Package weeder restarts pods stuck in CrashLoopBackOff as soon as the service they depend on (etcd,
// kube-apiserver) is ready again: a service turning ready, judged from its EndpointSlices, opens a
// bounded weeding window with a namespaced, label-selected pod watch that deletes crash-looping pods.
//
// Windows are capped in number, end at their deadline or when this replica releases the namespace, and
// every goroutine a window starts is gone when it ends.
package weeder
