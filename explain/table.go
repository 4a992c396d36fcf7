package explain

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the report for a person, on one screen: the verdict first, then the parts it
// rests on.
func (e *Explanation) WriteTable(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Shoot\t%s\n", e.Shoot)
	fmt.Fprintf(w, "Probed\t%s\n", probed(e))
	fmt.Fprintf(w, "Cluster\t%s\n", part(e.Cluster, "present", "missing"))
	fmt.Fprintf(w, "Kubeconfig\tSecret %s: %s\n", e.KubeconfigSecret.Name, part(e.KubeconfigSecret, "present", "missing"))
	for _, o := range e.Owners {
		fmt.Fprintf(w, "Owner\t%s\n", owner(o))
	}
	fmt.Fprintf(w, "Scaled down\t%s\n", yesNo(e.ScaledDown, "yes: a dependent carries the meltdown marker", "no"))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DEPENDENT\tREPLICAS\tREADY\tANNOTATIONS")
	for _, d := range e.Dependents {
		fmt.Fprintf(w, "%s/%s\t%s\t%d\t%s\n", d.Kind, d.Name, replicas(d), d.ReadyReplicas, annotations(d))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return e.writeEvents(out)
}

// writeEvents writes the last Events, or why there are none to show.
func (e *Explanation) writeEvents(out io.Writer) error {
	switch {
	case e.EventsError != "":
		_, err := fmt.Fprintf(out, "Events: %s\n", e.EventsError)
		return err
	case len(e.Events) == 0:
		_, err := fmt.Fprintln(out, "Events: none of dwd's in the namespace")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "AGE\tTYPE\tREASON\tOBJECT\tNOTE")
	for _, ev := range e.Events {
		note := ev.Note
		if ev.Count > 1 {
			note = fmt.Sprintf("%s (%d times)", note, ev.Count)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", age(e.Time.Sub(ev.Time)), ev.Type, ev.Reason, ev.Regarding, note)
	}
	return w.Flush()
}

// probed words whether the shoot is probed: yes, no with why, or unknown with what could not be read.
func probed(e *Explanation) string {
	switch {
	case e.Probed:
		return "yes"
	case e.Unknown:
		return e.NotProbed
	}
	return "no: " + e.NotProbed
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func part(p Part, present, missing string) string {
	switch {
	case p.Error != "":
		return "unknown: " + p.Error
	case p.Exists && p.Detail != "":
		return present + "; " + p.Detail
	case p.Exists:
		return present
	}
	return missing
}

// owner words who acts on the shoot in one group.
func owner(o Owner) string {
	if o.Error != "" {
		return fmt.Sprintf("%s: unknown: %s", o.Group, o.Error)
	}
	holder := "nobody"
	if o.Holder != "" {
		holder = o.Holder + " (" + o.HolderState + ")"
	}
	if o.Leader != "" {
		return fmt.Sprintf("%s: the original's mode, leader lease %s held by %s", o.Group, o.Leader, holder)
	}
	s := fmt.Sprintf("%s: partition %d (%s) held by %s", o.Group, o.Partition, o.PartitionFunction, holder)
	if o.ReservedFor != "" {
		s += ", reserved for " + o.ReservedFor + " (restarting)"
	}
	return s + yesNo(o.Owned, "", "; not owned")
}

func replicas(d Dependent) string {
	switch {
	case d.Error != "":
		return "unknown: " + d.Error
	case !d.Exists && d.Optional:
		return "missing (optional)"
	case !d.Exists:
		return "missing"
	case d.Replicas == nil:
		return "unset"
	}
	return fmt.Sprint(*d.Replicas)
}

func annotations(d Dependent) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(d.Annotations)) {
		out = append(out, strings.TrimPrefix(k, annotationPrefix)+"="+d.Annotations[k])
	}
	return cmp.Or(strings.Join(out, ", "), "-")
}

// age words a duration as kubectl does, roughly: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
