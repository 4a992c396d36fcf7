// Package access checks, from inside a replica, that the seed API server lets it do what its roles
// need, and says plainly what is missing.
//
// A watchdog that may not list what it watches does not fail: its informers retry forever, and it
// probes nothing. Checker asks the API server, with SelfSubjectAccessReviews (which every
// authenticated user may create), for each Permission a replica needs, logs every missing one once
// with what needs it, keeps the replica unready while a required one is missing, and checks again
// periodically, since RBAC applied after the pod started is common: every Interval while one is
// missing, backing off to MaxInterval once none is, and at once when a seed client of the replica
// (wrapped by WatchForbidden) is answered 403. Optional permissions (Events) only
// switch their feature off: Recorder drops the Events the replica may not write, instead of letting
// the event broadcaster log a "forbidden" line for each.
//
// Required lists, per role and mode, what the code of this module needs, with the code that needs it;
// the manifests under deploy/ grant exactly these, and their tests check it.
package access
