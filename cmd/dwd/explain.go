package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/explain"
	"github.com/sharded-dwd/dependency-watchdog/replica"
)

// gardenerProberConfig is what `dwd explain` reads without --prober-config: the kubeconfig Secret and
// the dependents of the prober config Gardener deploys.
const gardenerProberConfig = `kubeConfigSecretName: shoot-access-dependency-watchdog-probe
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    optional: false
    scaleUp: {level: 0}
    scaleDown: {level: 1}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    optional: false
    scaleUp: {level: 1}
    scaleDown: {level: 0}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 2}
    scaleDown: {level: 0}
`

// explainFlags are `dwd explain`'s own settings.
type explainFlags struct {
	output, proberConfig, proberGroup, weederGroup string
	events                                         int
}

// newExplainCommand builds `dwd explain`, the read-only answer to "what does dwd do with this shoot, and why".
func newExplainCommand() *cobra.Command {
	o := newOptions(replica.GroupFor(replica.RoleProber))
	f := explainFlags{output: "table", proberGroup: replica.GroupFor(replica.RoleProber), weederGroup: replica.GroupFor(replica.RoleWeeder), events: 10}
	cmd := &cobra.Command{
		Use:   "explain SHOOT_NAMESPACE",
		Short: "Explain what dwd does with one shoot and why: probed or not, its owner, its dependents, the last scale Events",
		Long: `Explain one shoot namespace, read-only: whether the prober probes the shoot and, if not, why (the
lifecycle rule of its Cluster, a missing kubeconfig Secret, or no live owner); the shoot's partition in
the prober's and the weeder's group with the member holding it and that member's state (or the leader
lease of the original's mode when a group has no Leases); the dependent resources with their replicas,
ready replicas and dwd's annotations; and the last Events of dwd's scaler and prober in the namespace.

It reads the Cluster, the kubeconfig Secret's metadata (never its data), the groups' Leases in
--shard-namespace, the leader leases in --leader-election-namespace, the dependents and the namespace's
events.k8s.io Events. A part it may not read is shown as such; the rest is still shown.

-o json prints the same report as one object: shoot, time, probed, unknown (a part it rests on could
not be read), notProbed, cluster, lifecycle,
kubeconfigSecret, owners[] (the fields of dwd shards --shoot -o json, plus leaderLease and error),
dependents[] (kind, name, exists, optional, replicas, readyReplicas, annotations, error), scaledDown,
events[] (time, type, reason, regarding, note, count), eventsError.

The binary answers as kubectl-dwd too: put it on the PATH under that name and run kubectl dwd explain.`,
		Example: `  dwd explain shoot--project--name --shard-namespace=garden
  kubectl dwd explain shoot--project--name -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runExplain(cmd.Context(), cmd.OutOrStdout(), f, args[0])
		},
	}
	addSection(cmd.Flags(), sectionSharding, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.sharding.Namespace, "shard-namespace", o.sharding.Namespace, "Namespace of the groups' Leases (default: $POD_NAMESPACE, else the in-cluster service account's namespace, else garden).")
		fs.StringVar(&f.proberGroup, "prober-group", f.proberGroup, "The prober's sharding group.")
		fs.StringVar(&f.weederGroup, "weeder-group", f.weederGroup, "The weeder's sharding group.")
		fs.StringVar(&o.leaderElection.Namespace, "leader-election-namespace", o.leaderElection.Namespace, "Namespace of the leader leases of the original's mode.")
	})
	addSection(cmd.Flags(), sectionClient, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to the seed's kubeconfig (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config).")
	})
	cmd.Flags().StringVar(&f.proberConfig, "prober-config", "", "The prober config, for the kubeconfig Secret's name and the dependents (default: those of the config Gardener deploys).")
	cmd.Flags().IntVar(&f.events, "events", f.events, "How many of the last Events to show.")
	cmd.Flags().StringVarP(&f.output, "output", "o", f.output, "Output format: table or json.")
	return cmd
}

// runExplain explains shoot and prints the report.
func (o *options) runExplain(ctx context.Context, out io.Writer, f explainFlags, shoot string) error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("-o %q: must be table or json", f.output)
	}
	if f.events < 0 {
		return fmt.Errorf("--events %d: must be 0 or more", f.events)
	}
	cfg, err := explainProberConfig(f.proberConfig)
	if err != nil {
		return err
	}
	if o.sharding.Namespace == "" {
		o.sharding.Namespace = defaultNamespace(o.leaderElection.Namespace)
	}
	rest, err := o.buildRestConfig()
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("a client of the seed: %w", err)
	}
	e, err := explain.Explain(ctx, c, explain.Options{Shoot: shoot, ShardNamespace: o.sharding.Namespace,
		Groups: []string{f.proberGroup, f.weederGroup}, LeaderNamespace: o.leaderElection.Namespace,
		LeaderLeases: map[string]string{f.proberGroup: replica.LeaderLeaseName(replica.RoleProber), f.weederGroup: replica.LeaderLeaseName(replica.RoleWeeder)},
		Prober:       cfg, Events: f.events, Now: time.Now()})
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	return e.WriteTable(out)
}

// explainProberConfig reads the prober config at path, or Gardener's when path is empty.
func explainProberConfig(path string) (*config.ProberConfig, error) {
	if path == "" {
		cfg, _, errs := config.DecodeProberConfigLenient([]byte(gardenerProberConfig))
		return cfg, errs.ToAggregate()
	}
	cfg, _, errs := config.ReadProberConfig(path)
	if len(errs) > 0 {
		return nil, fmt.Errorf("--prober-config %s: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}
