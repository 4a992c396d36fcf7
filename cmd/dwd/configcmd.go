package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with prober and weeder config files",
	}
	cmd.AddCommand(newConfigValidateCommand())
	return cmd
}

// newConfigValidateCommand builds `dwd config validate`, which checks config files without a cluster.
func newConfigValidateCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check prober and weeder config files",
		Long: `Check prober and weeder config files the way dwd loads them, with defaults applied and every
rule checked, but strictly: a key the config does not have is an error here, while dwd run, dwd prober
and dwd weeder only warn about it (as the original ignores it). Prints "valid" and exits 0, or prints
every problem, one per line with its file and field path, and exits 1.`,
		Example: `  dwd config validate --prober-config=prober.yaml --weeder-config=weeder.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.proberConfigPath == "" && o.weederConfigPath == "" {
				return fmt.Errorf("give --prober-config, --weeder-config or both")
			}
			errs := o.loadConfigs(true)
			if err := printErrors(cmd.OutOrStdout(), errs); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "valid")
			return nil
		},
	}
	cmd.Flags().StringVar(&o.proberConfigPath, "prober-config", "", "Path to a prober config file.")
	cmd.Flags().StringVar(&o.weederConfigPath, "weeder-config", "", "Path to a weeder config file.")
	return cmd
}
