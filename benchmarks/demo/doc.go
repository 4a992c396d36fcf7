// Package demo is the scripted outage of `make demo` (dwd-sim demo): Run starts a seed with simulated
// shoots (package sim) and dwd replicas as separate processes under exactly the RBAC of
// deploy/overlays/sharded (their kubeconfig impersonates its ServiceAccount), and plays the script
// with a live view of what each replica does: a meltdown in some shoots (scale-down in level order),
// their recovery (scale-up), a replica killed (its shoots taken over) and its return, an etcd that
// recovers (crash-looping pods weeded), and a replica stopped gracefully (its shoots handed over at
// once). Each step checks that it did what it should; the summary fails when one did not.
//
// The steps are methods of Demo, so that the end-to-end stories can play them against other replicas
// (the original's command lines under Gardener's RBAC). Demo's output is written by the script and the
// live view side by side: SetUp wraps it in a sim.LockedWriter, and the step results are kept under mu.
package demo
