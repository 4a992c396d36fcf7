// Package weeder restarts pods stuck in CrashLoopBackOff as soon as the service they depend on (etcd,
// kube-apiserver) is ready again, in the shoot namespaces this replica owns.
//
// A service is ready when at least one endpoint across its EndpointSlices is ready (Tracker). A
// service turning ready, or first seen ready, opens a weeding window of the configured watchDuration
// (Registry): for its lifetime a namespaced, label-selected pod watch per pod selector deletes every
// pod that is not terminating and has a container waiting in CrashLoopBackOff (ShouldWeed), with a
// UID precondition so that a replacement pod is never hit. There is no cluster-wide pod cache.
//
// At most a configured number of windows run at once; more wait in a queue, oldest first. A window
// ends at its deadline, when this replica releases the namespace's partition, or on shutdown, and
// every goroutine it started is gone when it has ended. On a graceful release the open windows travel
// to the next holder in the partition lease and resume there for their remaining time; after a crash
// the next holder opens windows for the services that are ready in the namespaces it acquired.
//
// Locking: the Tracker and the Registry lock themselves; mu in Manager guards the running windows'
// watches and the windows kept for a handover, and orders every start and stop of a window's watch.
package weeder
