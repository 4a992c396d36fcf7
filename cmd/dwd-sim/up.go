package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

func newUpCommand() *cobra.Command {
	var shoots, nodes int
	var dir string
	var scenario scenarioFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a seed with simulated shoots and run until interrupted",
		Args:  cobra.NoArgs,
		Long: `Starts a seed (kube-apiserver and etcd) with simulated shoots and runs until interrupted. The
shoots' API servers are healthy, or play the scenario the flags give: a meltdown, an outage, or one of
the lies a prober must not act on (a stale watch cache, a slow body, skewed clocks, huge lists).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			if sc, err := scenario.scenario(); err != nil || sc.Validate() != nil {
				return errors.Join(err, sc.Validate())
			}
			if dir == "" {
				var err error
				if dir, err = os.MkdirTemp("", "dwd-sim-"); err != nil {
					return err
				}
			}
			seed, err := sim.StartSeed(cmd.Context(), dir)
			if err != nil {
				return err
			}
			defer func() { _ = seed.Stop() }()
			start := time.Now()
			err = seed.CreateShoots(cmd.Context(), 0, shoots, nodes, sim.ProgressPrinter(cmd.OutOrStdout(), "shoots"))
			if err != nil {
				return err
			}
			if err := scenario.apply(seed.Shoots, shoots); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n%d shoots ready in %s\nseed kubeconfig: %s\nshoot API servers: %s\n",
				shoots, time.Since(start).Round(time.Second), seed.KubeconfigPath(), seed.Shoots.URL())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().IntVar(&shoots, "shoots", 100, "Number of simulated shoots.")
	cmd.Flags().IntVar(&nodes, "nodes", 3, "Nodes per shoot.")
	cmd.Flags().StringVar(&dir, "dir", "", "Folder for the kubeconfig and logs (default: a new temporary folder).")
	scenario.addFlags(cmd.Flags())
	return cmd
}
