package sharding

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Settings returns what every member of a group must agree on, as advertised in its member lease: the
// partition count, the ring's replication factor and load bound, the partition function and the roles
// the member runs. Members that disagree would give one namespace to two members, or to none.
func Settings(ring RingConfig, roles []string) string {
	roles = slices.Sorted(slices.Values(roles))
	return fmt.Sprintf("partitions=%d,replication-factor=%d,load-bound=%s,partition-function=%s,roles=%s",
		ring.PartitionCount, ring.ReplicationFactor, strconv.FormatFloat(ring.LoadBound, 'g', -1, 64),
		ring.Partitions().function(), strings.Join(roles, "+"))
}

// DryRunSetting is the field of the settings of a member in dry run (shadow mode, --dry-run), which
// writes nothing to a shoot's control plane: it defers to no other group or leader, and no other
// group defers to it (see incumbents). Settings without it run as ever.
const DryRunSetting = "dry-run=true"

// DryRunRolePrefix starts each role a member in dry run advertises (memberSettings).
const DryRunRolePrefix = "dry-run."

// WithDryRun returns settings as a member in dry run advertises them.
func WithDryRun(settings string) string { return settings + "," + DryRunSetting }

// dryRun tells whether settings are those of a member in dry run.
func dryRun(settings string) bool { return settingsFields(settings)["dry-run"] == "true" }

// settingsFields splits settings as Settings writes them into its fields; a field it lacks is absent.
func settingsFields(settings string) map[string]string {
	fields := map[string]string{}
	for _, kv := range strings.Split(settings, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			fields[k] = v
		}
	}
	return fields
}
