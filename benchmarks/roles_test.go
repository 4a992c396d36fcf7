package benchmarks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestARoleAloneGetsOnlyItsConfig(t *testing.T) {
	args := []string{"--prober-config=p.yaml", "--weeder-config=w.yaml", "--kubeconfig=k"}
	assert.Equal(t, []string{"--prober-config=p.yaml", "--kubeconfig=k"}, argsOfRole(args, "prober"))
	assert.Equal(t, []string{"--weeder-config=w.yaml", "--kubeconfig=k"}, argsOfRole(args, "weeder"))
	assert.Len(t, args, 3, "the set's args are left alone")
}

func TestTheRolesSectionListsEachRole(t *testing.T) {
	r := &Result{Roles: []RoleRun{{Role: "prober", Shoots: 5000, RSSBytes: 400 << 20, HeapBytes: 200 << 20, CPUCores: 0.25, ReadySeconds: 9.5},
		{Role: "weeder", Shoots: 5000, RSSBytes: 150 << 20, HeapBytes: 60 << 20, CPUCores: 0.02, ReadySeconds: 4}}}
	var b strings.Builder
	r.writeRoles(&b)
	assert.Contains(t, b.String(), "| prober | 5000 | 9.5 | 400 | 200 | 0.250 |")
	assert.Contains(t, b.String(), "| weeder | 5000 | 4.0 | 150 | 60 | 0.020 |")
	b.Reset()
	(&Result{}).writeRoles(&b)
	assert.Empty(t, b.String())
}
