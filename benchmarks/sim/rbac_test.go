package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/deploy"
)

func TestOverlayGrants(t *testing.T) {
	g, err := OverlayGrants("overlays/sharded")
	require.NoError(t, err)
	assert.Equal(t, "deploy/overlays/sharded", g.Source)
	all, err := deploy.Build("overlays/sharded")
	require.NoError(t, err)
	assert.Less(t, len(g.Objects), len(all), "only the RBAC of the overlay")
	for _, o := range g.Objects {
		assert.Contains(t, rbacKinds, o.GetKind())
	}
	ns, user, err := ServiceAccountUser(g.Objects)
	require.NoError(t, err)
	assert.Equal(t, "dwd-system", ns)
	assert.Equal(t, "system:serviceaccount:dwd-system:dwd", user)
	assert.Positive(t, CountRules(g.Objects))
}
