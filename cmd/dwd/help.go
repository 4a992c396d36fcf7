package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sectionAnnotation is the flag annotation that names the help section a flag is listed in.
const sectionAnnotation = "dwd.section"

// Help sections, in the order --help lists them.
const (
	sectionWatchdog       = "Watchdog"
	sectionSharding       = "Sharding"
	sectionClient         = "Seed API client"
	sectionServers        = "Server"
	sectionLeaderElection = "Leader election"
	sectionLogging        = "Logging"
)

var sectionOrder = []string{sectionWatchdog, sectionSharding, sectionClient, sectionServers, sectionLeaderElection, sectionLogging}

// addSection adds the flags that add defines to dst, listed in --help under the named section.
func addSection(dst *pflag.FlagSet, section string, add func(fs *pflag.FlagSet)) {
	fs := pflag.NewFlagSet(section, pflag.ContinueOnError)
	add(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		f.Annotations = map[string][]string{sectionAnnotation: {section}}
	})
	dst.AddFlagSet(fs)
}

// flagSections renders a command's own flags grouped by section; flags without a section come last, as General.
func flagSections(cmd *cobra.Command) string {
	groups := map[string]*pflag.FlagSet{}
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		section := "General"
		if s := f.Annotations[sectionAnnotation]; len(s) > 0 {
			section = s[0]
		}
		if groups[section] == nil {
			groups[section] = pflag.NewFlagSet(section, pflag.ContinueOnError)
		}
		groups[section].AddFlag(f)
	})
	var b strings.Builder
	for _, section := range append(sectionOrder, "General") {
		if fs := groups[section]; fs != nil {
			b.WriteString("\n" + section + " flags:\n" + fs.FlagUsagesWrapped(110))
		}
	}
	return b.String()
}

// usageTemplate is cobra's usage layout with the flags listed by section.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}
{{flagSections .}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() {
	cobra.AddTemplateFunc("flagSections", flagSections)
}
