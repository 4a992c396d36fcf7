package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sharded-dwd/dependency-watchdog/audit/auditcheck"
)

// newAuditCommand builds `dwd-sim audit FILES...`, which checks the ownership audit files of the
// replicas of one run (dwd --audit-log) together.
func newAuditCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "audit FILES...",
		Short: "Check the ownership audit files of a run's replicas (dwd --audit-log)",
		Long: `Check the ownership audit files that the replicas of one run wrote with dwd --audit-log, all together:
no two processes held a partition at once, every scale write and pod delete was sent by a valid holder of
its namespace's partition, and how long a partition was without a holder at most. Prints the report, and
fails when it finds an overlap or a write by a non-holder.`,
		Example: "  dwd-sim audit /var/log/dwd/dwd-0.audit /var/log/dwd/dwd-1.audit /var/log/dwd/dwd-2.audit",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			report, err := auditcheck.CheckFiles(files...)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), report)
			if err := report.OK(); err != nil {
				return fmt.Errorf("the audit failed: %w", err)
			}
			return nil
		},
	}
}
