// Command run checks the lists of mutants (package mutants): those given as arguments, or every
// <package>/testdata/mutants.yaml of the module in the working directory. It prints one line per
// mutant and fails unless every mutant was killed. make mutants runs it; -only NAME,... checks only
// the mutants named.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/sharded-dwd/dependency-watchdog/internal/mutants"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	only := flag.String("only", "", "check only the mutants of these names (comma-separated)")
	flag.Parse()
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	if err := run(ctx, flag.Args(), names); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, paths, only []string) error {
	if len(paths) == 0 {
		found, err := mutants.Find(".")
		if err != nil {
			return fmt.Errorf("finding the mutant lists: %w", err)
		}
		if len(found) == 0 {
			return errors.New("no mutant list (<package>/testdata/mutants.yaml) under the working directory")
		}
		paths = found
	}
	checker := mutants.Checker{Out: os.Stdout}
	counts := map[mutants.Outcome]int{}
	total := 0
	for _, path := range paths {
		list, err := mutants.Load(path)
		if err != nil {
			return err
		}
		if only != nil {
			list.Mutants = slices.DeleteFunc(list.Mutants, func(m mutants.Mutant) bool { return !slices.Contains(only, m.Name) })
			if len(list.Mutants) == 0 {
				continue
			}
		}
		fmt.Printf("%s: %d mutants\n", path, len(list.Mutants))
		results, err := checker.Check(ctx, list)
		if err != nil {
			return err
		}
		for _, r := range results {
			counts[r.Outcome]++
			total++
		}
	}
	if total == 0 {
		return fmt.Errorf("no mutant named %s", strings.Join(only, ", "))
	}
	fmt.Printf("%d mutants: %d killed, %d survived, %d stale, %d broken\n", total,
		counts[mutants.Killed], counts[mutants.Survived], counts[mutants.Stale], counts[mutants.Broken])
	if counts[mutants.Killed] != total {
		return errors.New("make mutants: every listed mutant must be killed by its tests (see above)")
	}
	return nil
}
