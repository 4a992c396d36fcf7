package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/spf13/cobra"
)

// errInvalid marks a failure whose details the command has already printed.
var errInvalid = errors.New("invalid")

// newRootCommand builds the `dwd` command tree.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "dwd",
		Short: "Sharded dependency watchdog for Gardener seeds",
		Long: `dwd protects the shoot control planes of a Gardener seed. Its prober scales down
kube-controller-manager, machine-controller-manager and cluster-autoscaler of a shoot whose kubelets
have lost their API server, and scales them back up when node leases recover. Its weeder restarts pods
stuck in CrashLoopBackOff as soon as the service they depend on is ready again.

Replicas of a group share the shoot namespaces through Lease objects and a consistent-hash ring, so
each shoot is watched by exactly one replica. dwd reads the original dependency-watchdog's config files
and accepts its command lines (dwd prober, dwd weeder).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetUsageTemplate(usageTemplate)
	root.AddCommand(newRunCommand(), newRoleCommand(replica.RoleProber), newRoleCommand(replica.RoleWeeder),
		newConfigCommand(), newShardsCommand(), newExplainCommand(), newVersionCommand())
	return root
}

// execute runs the command with args and returns the process exit code: 0 on success, 1 on failure.
func execute(ctx context.Context, cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if !errors.Is(err, errInvalid) {
		fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
	}
	return 1
}
