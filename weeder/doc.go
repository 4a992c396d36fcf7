// Package weeder restarts pods stuck in CrashLoopBackOff as soon as the service they depend on (etcd,
// kube-apiserver) is ready again, in the shoot namespaces this replica owns.
//
// A service is ready when at least one endpoint across its EndpointSlices is ready (Tracker, which
// also keeps when each service last turned ready). A service turning ready, or first seen ready,
// opens a real weeding window of the configured watchDuration (Registry): for its lifetime a
// namespaced, label-selected pod watch per pod selector deletes every pod that is not terminating
// and has a container waiting in CrashLoopBackOff (ShouldWeed). There is no cluster-wide pod cache.
//
// Every delete is fenced: right before it, sharding.Ownership.Guard must confirm that this replica
// may act on the namespace now (else the delete is not sent, and a log line says why), and the delete
// is sent under the guard's context, which ends at the moment the member lease would fence the
// replica. It carries the UID and resourceVersion of the pod as seen in CrashLoopBackOff, so a
// replacement pod, or a pod that changed (recovered) since, is never hit; such a Conflict is counted
// apart from failures and raises no Event. Deletes go out on a client with a rate limit of its own, so
// that the pod lists and watches of many windows opening at once (a takeover opens one per ready
// service) cannot hold a delete until its fence moment; a delete that fails for a reason that may pass
// (429, 5xx, a timeout, the rate limiter) is tried again, guarded anew, after 1, 2 and 4 s while the
// window is open, since a pod in CrashLoopBackOff may not change, and come through the watch again,
// for minutes.
//
// At most a configured number of windows run at once; more wait in a queue. Real windows go first:
// one that finds every slot taken takes the slot of a running synthetic window (which waits again at
// the head of the synthetic queue), and waits only behind other real windows. A queued window whose
// deadline has passed is dropped without starting. A window ends at its deadline, when this replica
// releases the namespace's partition (or is fenced), or on shutdown, and every goroutine it started
// is gone when it has ended.
//
// How a partition came here decides what Acquired opens:
//   - Handover: the previous holder's windows, which travel in the partition lease, resume for their
//     remaining time, but never past watchDuration from now (their deadlines are another replica's
//     word). A service that turned ready less than watchDuration ago and has no handed window as
//     long gets the window its change opened (handoverMissed): the change may have fallen into the
//     gap between the release and the acquire, when no replica owned the partition.
//   - Resume (this process re-took its own partition after a fence): the windows kept at the fence
//     resume for their remaining time, and a real window opens for each service that turned ready
//     while fenced, or shortly before, and has none (missedWindows); no other ready service gets one.
//   - Crash or Fresh: a synthetic window opens for every service that is ready now, as the original
//     does on a restart.
//
// A list shows only the state at its end: a slice that a list gave the cache (ListedAnnotation, put
// there by the replica's sharded caches), ready and changed since the state before, opens a
// synthetic window for its service, since it may have gone unready and ready again while the cache
// was listing (changedUnseen).
//
// Locking: the Tracker and the Registry lock themselves; mu in Manager guards the running windows'
// watches and what Released keeps of a partition (its windows and when it stopped), and orders every
// start and stop of a window's watch. Decide under mu, wait outside it: Released, the end of a
// window at its deadline and a synthetic window displaced by a real one take the windows' runs out
// of the running ones under mu, then cancel them and wait for their watches (a pod delete in flight
// finishes first) once mu is released, so that no other window, and no reader of Running, waits
// behind a slow delete. Nothing can start those windows again meanwhile: the registry no longer runs
// them, and a released partition is no longer owned. The lock order across sharding and the roles
// is in the sharding package's doc: a partition's lock, then mu, then the coordinator's short lock.
package weeder
