package explain

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Options say where to look.
type Options struct {
	// Shoot is the shoot namespace to explain; its Cluster has the same name.
	Shoot string
	// ShardNamespace holds the groups' Leases; Groups are the groups to look in (the prober's first).
	ShardNamespace string
	Groups         []string
	// LeaderNamespace and LeaderLeases are the leader leases of the original's mode, by group: a group
	// without Leases may run that way.
	LeaderNamespace string
	LeaderLeases    map[string]string
	// Prober is the prober config: its kubeconfig Secret name and dependent resources.
	Prober *config.ProberConfig
	// Events bounds the Events shown, newest first.
	Events int
	// Now is the time the report is made at (member states are judged at it).
	Now time.Time
}

// Explanation is the report. Its JSON field names are the interface of `dwd explain -o json`.
type Explanation struct {
	Shoot string    `json:"shoot"`
	Time  time.Time `json:"time"`
	// Probed is whether the shoot's probe runs: a Cluster that no rule stops, a kubeconfig Secret, and
	// a live owner in the prober's group. NotProbed says why not, in words. Unknown is set when a part it
	// rests on could not be read: Probed is false then, and NotProbed names the part.
	Probed    bool   `json:"probed"`
	Unknown   bool   `json:"unknown,omitempty"`
	NotProbed string `json:"notProbed,omitempty"`
	Cluster   Part   `json:"cluster"`
	// Lifecycle is the rule that stops the probe, as dwd_shoots_not_probed's reason label; "" for none.
	Lifecycle        string      `json:"lifecycle,omitempty"`
	KubeconfigSecret Part        `json:"kubeconfigSecret"`
	Owners           []Owner     `json:"owners"`
	Dependents       []Dependent `json:"dependents"`
	ScaledDown       bool        `json:"scaledDown"`
	Events           []Event     `json:"events"`
	EventsError      string      `json:"eventsError,omitempty"`
}

// Part is an object the report looked for: its name, whether it is there, and what stopped the read.
type Part struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Owner is who acts on the shoot in one group: a member holding its partition, or the leader of the
// original's mode (Leader set). Error says why it could not be told.
type Owner struct {
	sharding.ShootOwnership
	Leader string `json:"leaderLease,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Dependent is one configured dependent resource as the seed holds it.
type Dependent struct {
	Kind          string            `json:"kind"`
	Name          string            `json:"name"`
	Exists        bool              `json:"exists"`
	Optional      bool              `json:"optional"`
	Replicas      *int64            `json:"replicas,omitempty"`
	ReadyReplicas int64             `json:"readyReplicas"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	Error         string            `json:"error,omitempty"`
}

// Event is one events.k8s.io Event of the scaler or the prober in the namespace.
type Event struct {
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Regarding string    `json:"regarding"`
	Note      string    `json:"note"`
	Count     int32     `json:"count,omitempty"`
}

// Explain reads what opts name through c and reports it. It fails only on options it cannot work with;
// a read that fails is reported in its part.
func Explain(ctx context.Context, c client.Reader, opts Options) (*Explanation, error) {
	if opts.Shoot == "" || opts.Prober == nil || len(opts.Groups) == 0 {
		return nil, fmt.Errorf("explain: the shoot namespace, the prober config and a group are required")
	}
	e := &Explanation{Shoot: opts.Shoot, Time: opts.Now, Owners: []Owner{}, Dependents: []Dependent{}, Events: []Event{}}
	cluster := e.readCluster(ctx, c)
	e.readSecret(ctx, c, opts.Prober.KubeConfigSecretName)
	for _, group := range opts.Groups {
		e.Owners = append(e.Owners, readOwner(ctx, c, opts, group, cluster))
	}
	e.readDependents(ctx, c, opts.Prober.DependentResourceInfos)
	e.readEvents(ctx, c, opts.Events)
	e.NotProbed, e.Unknown = e.whyNotProbed()
	e.Probed = e.NotProbed == ""
	return e, nil
}

// whyNotProbed says why the shoot's probe does not run, from the parts read, "" when it runs, and
// whether that is unknown: a part could not be read.
func (e *Explanation) whyNotProbed() (reason string, unknown bool) {
	switch {
	case e.Cluster.Error != "":
		return "unknown: the Cluster could not be read: " + e.Cluster.Error, true
	case e.Cluster.Detail != "":
		return e.Cluster.Detail, false
	case e.KubeconfigSecret.Error != "":
		return "unknown: the kubeconfig Secret could not be read: " + e.KubeconfigSecret.Error, true
	case !e.KubeconfigSecret.Exists:
		return fmt.Sprintf("the kubeconfig Secret %s is missing: the shoot is unprotected", e.KubeconfigSecret.Name), false
	}
	prober := e.Owners[0]
	switch {
	case prober.Error != "":
		return fmt.Sprintf("unknown: the owner in group %s could not be told: %s", prober.Group, prober.Error), true
	case !prober.Owned && prober.Leader != "":
		return fmt.Sprintf("no live leader holds the leader lease %s", prober.Leader), false
	case !prober.Owned:
		return fmt.Sprintf("no live member of group %s holds partition %d", prober.Group, prober.Partition), false
	}
	return "", false
}
