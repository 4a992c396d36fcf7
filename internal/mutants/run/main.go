// Command run checks the lists of mutants (package mutants): those given as arguments, or every
// <package>/testdata/mutants.yaml of the module in the working directory. It prints one line per
// mutant and fails unless every mutant was killed. make mutants runs it; -only NAME,... checks only
// the mutants named, -which unit or control-plane only the mutants whose tests run without or with
// the real control plane (make test checks the first beside the tests, the second once they passed,
// with -passed naming the packages whose tests passed: their lists' tests are not run again on the
// code as it is).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"

	"github.com/sharded-dwd/dependency-watchdog/internal/mutants"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	only := flag.String("only", "", "check only the mutants of these names (comma-separated)")
	which := flag.String("which", "all", "check all mutants, only those whose tests run without the control plane (unit), or only those whose tests need it (control-plane)")
	passed := flag.String("passed", "", "package folders (./sharding ./prober ...) whose tests passed on this code right before, with the flags the mutants' runs use: their lists skip the run without mutation (make test, after its tests)")
	slots := flag.Int("slots", runtime.GOMAXPROCS(0), "how many builds and test runs of mutants at once, over all lists")
	flag.Parse()
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	keep, ok := kinds[*which]
	if !ok {
		fmt.Fprintf(os.Stderr, "-which must be all, unit or control-plane, not %q\n", *which)
		os.Exit(2)
	}
	if err := run(ctx, flag.Args(), names, keep, strings.Fields(*passed), max(*slots, 1)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// kinds are the values of -which: whether a mutant is kept, by whether its tests need the control plane.
var kinds = map[string]func(mutants.Mutant) bool{
	"all":           func(mutants.Mutant) bool { return true },
	"unit":          func(m mutants.Mutant) bool { return !m.ControlPlane },
	"control-plane": func(m mutants.Mutant) bool { return m.ControlPlane },
}

func run(ctx context.Context, paths, only []string, keep func(mutants.Mutant) bool, passed []string, slotCount int) error {
	lists, err := load(paths, only, keep)
	if err != nil {
		return err
	}
	if len(lists) == 0 && only != nil {
		return fmt.Errorf("no mutant named %s", strings.Join(only, ", "))
	}
	// Every list is checked at once, its baseline and its mutants holding slots of one pool: a list
	// never waits for the one before it to finish. Each prints in the order of the lists.
	slots := make(chan struct{}, slotCount)
	type outcome struct {
		out     bytes.Buffer
		results []mutants.Result
		err     error
	}
	outcomes := make([]*outcome, len(lists))
	done := make([]chan struct{}, len(lists))
	for i, list := range lists {
		outcomes[i], done[i] = &outcome{}, make(chan struct{})
		go func() {
			defer close(done[i])
			o := outcomes[i]
			o.results, o.err = mutants.Checker{Out: &o.out, Slots: slots, Workers: slotCount, Passed: list.In(passed)}.Check(ctx, list)
		}()
	}
	counts := map[mutants.Outcome]int{}
	total := 0
	var errs []error
	for i, list := range lists {
		<-done[i]
		o := outcomes[i]
		fmt.Printf("%s: %d mutants\n", list.Path, len(list.Mutants))
		_, _ = io.Copy(os.Stdout, &o.out)
		errs = append(errs, o.err)
		for _, r := range o.results {
			counts[r.Outcome]++
			total++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("%d mutants: %d killed, %d survived, %d stale, %d broken\n", total,
		counts[mutants.Killed], counts[mutants.Survived], counts[mutants.Stale], counts[mutants.Broken])
	if counts[mutants.Killed] != total {
		return errors.New("make mutants: every listed mutant must be killed by its tests (see above)")
	}
	return nil
}

// load loads the lists at paths, or every list under the working directory when none is given,
// keeping only the mutants named in only when it is set, and those keep keeps; lists left empty are
// dropped.
func load(paths, only []string, keep func(mutants.Mutant) bool) ([]*mutants.List, error) {
	if len(paths) == 0 {
		found, err := mutants.Find(".")
		if err != nil {
			return nil, fmt.Errorf("finding the mutant lists: %w", err)
		}
		if len(found) == 0 {
			return nil, errors.New("no mutant list (<package>/testdata/mutants.yaml) under the working directory")
		}
		paths = found
	}
	var lists []*mutants.List
	for _, path := range paths {
		list, err := mutants.Load(path)
		if err != nil {
			return nil, err
		}
		list.Mutants = slices.DeleteFunc(list.Mutants, func(m mutants.Mutant) bool {
			return (only != nil && !slices.Contains(only, m.Name)) || !keep(m)
		})
		if len(list.Mutants) > 0 {
			lists = append(lists, list)
		}
	}
	return lists, nil
}
