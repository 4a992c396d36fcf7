package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

func TestModuleVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		info *debug.BuildInfo
		want string
	}{
		"no build info": {nil, "unknown"},
		"absent":        {&debug.BuildInfo{Deps: []*debug.Module{{Path: "example.com/other", Version: "v1.0.0"}}}, "unknown"},
		"present":       {&debug.BuildInfo{Deps: []*debug.Module{{Path: ringModule, Version: "v1.1.0"}}}, "v1.1.0"},
		"replaced": {&debug.BuildInfo{Deps: []*debug.Module{{Path: ringModule, Version: "v1.1.0",
			Replace: &debug.Module{Path: "example.com/fork", Version: "v1.1.1-fork"}}}}, "v1.1.1-fork"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, moduleVersion(tc.info, ringModule))
		})
	}
}

func TestSetBuildInfo(t *testing.T) {
	setBuildInfo()
	info, _ := debug.ReadBuildInfo()
	want := `# HELP dwd_build_info Always 1, labelled with the version of dwd, the commit it was built from, the Go version it was built with and the version of the consistent-hashing library (consistent_version).
# TYPE dwd_build_info gauge
dwd_build_info{commit="` + buildCommit(info) + `",consistent_version="` + moduleVersion(info, ringModule) + `",goversion="` + runtime.Version() + `",version="` + version + `"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(buildInfo, strings.NewReader(want)))
	assert.NotEqual(t, "unknown", moduleVersion(info, ringModule), "the test binary links the ring library")
}

// The commit is the one the build was given (-X main.commit), else the revision go build recorded from
// the checkout, marked dirty for a modified one.
func TestBuildCommit(t *testing.T) {
	vcs := func(revision, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}}
	}
	assert.Equal(t, "unknown", buildCommit(nil))
	assert.Equal(t, "unknown", buildCommit(&debug.BuildInfo{}))
	assert.Equal(t, "abc123", buildCommit(vcs("abc123", "false")))
	assert.Equal(t, "abc123-dirty", buildCommit(vcs("abc123", "true")))
	defer func(before string) { commit = before }(commit)
	commit = "def456"
	assert.Equal(t, "def456", buildCommit(vcs("abc123", "true")), "the build's own wins")
}
