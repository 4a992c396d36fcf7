package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// version and commit are set at build time with -ldflags "-X main.version=... -X main.commit=...".
// Without commit, the commit is the one go build recorded from the checkout (vcs.revision), if any.
var (
	version = "dev"
	commit  = ""
)

// buildCommit returns the commit the binary was built from: commit when set, else the VCS revision go
// build recorded (with "-dirty" for a modified checkout), else "unknown".
func buildCommit(info *debug.BuildInfo) string {
	if commit != "" {
		return commit
	}
	if info == nil {
		return "unknown"
	}
	var revision, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			revision = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if revision == "" {
		return "unknown"
	}
	return revision + dirty
}

// ringModule is the module of the consistent-hashing library: a change of its version may change which
// member a partition maps to, so replicas of one group must run the same.
const ringModule = "github.com/buraksezer/consistent"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of dwd",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			info, _ := debug.ReadBuildInfo()
			fmt.Fprintf(cmd.OutOrStdout(), "dwd %s (commit %s, %s, %s/%s)\n", version, buildCommit(info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

// buildInfo is 1 with the labels of the running binary, so that a dashboard shows version skew across
// replicas, the ring library's above all.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "dwd_build_info",
	Help: "Always 1, labelled with the version of dwd, the commit it was built from, the Go version it was built with and the version of the consistent-hashing library (consistent_version).",
}, []string{"version", "commit", "goversion", "consistent_version"})

var registerBuildInfo sync.Once

// setBuildInfo exports dwd_build_info for this binary.
func setBuildInfo() {
	registerBuildInfo.Do(func() { metrics.Registry.MustRegister(buildInfo) })
	info, _ := debug.ReadBuildInfo()
	buildInfo.WithLabelValues(version, buildCommit(info), runtime.Version(), moduleVersion(info, ringModule)).Set(1)
}

// moduleVersion returns the version of module path in info, "unknown" when info has none.
func moduleVersion(info *debug.BuildInfo, path string) string {
	if info == nil {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path != path {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if dep.Version != "" {
			return dep.Version
		}
	}
	return "unknown"
}
