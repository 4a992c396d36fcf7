package main

import (
	"github.com/spf13/cobra"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
)

func newDemoCommand() *cobra.Command {
	o := demo.Options{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run three dwd replicas against simulated shoots through a scripted outage",
		Long: `Starts a local seed with simulated shoots and three dwd replicas as separate processes, shows
what each replica does, and plays a script: a meltdown in some shoots (scale-down in level order), their
recovery (scale-up), one replica killed (its shoots taken over), its return, an etcd endpoint that
recovers (crash-looping pods weeded), and one replica stopped gracefully (its shoots handed over at
once). The replicas run with exactly the permissions of deploy/overlays/sharded: the seed applies its
ServiceAccount, roles and bindings, and the replicas' kubeconfig impersonates that ServiceAccount. It
ends with a summary and exits 1 if a step did not do what it should.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			return demo.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().IntVar(&o.Shoots, "shoots", 300, "Number of simulated shoots.")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 3, "Nodes per shoot.")
	cmd.Flags().IntVar(&o.Replicas, "replicas", 3, "Number of dwd replicas.")
	cmd.Flags().StringVar(&o.Dwd, "dwd", "", "Path of the dwd binary (default: dwd next to this binary).")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "Folder for configs and replica logs (default: a new temporary folder).")
	cmd.Flags().StringVar(&o.LogLevel, "replica-log-level", "info", "The replicas' --zap-log-level (debug, info, error).")
	return cmd
}
