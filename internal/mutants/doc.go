// Package mutants checks that the safety tests can fail. A list names mutants of the code, each a
// safety rule switched off (a check removed, an age measured at the wrong moment): a snippet of a
// file, the text that replaces it, and the tests that must fail once it does. Check builds the
// package's tests with each mutated file in place of the real one (go test -overlay: the tree is
// never written) and runs the named tests; a mutant is killed when one of them fails.
//
// The list follows the code: a snippet that is not in its file exactly once makes the mutant stale,
// and a mutant that does not compile is an error in the list; both fail the check, as a surviving
// mutant does. The named tests must pass on the code as it is, or nothing is checked.
//
// Lists live next to the tests that kill their mutants, as <package>/testdata/mutants.yaml; their
// format is described at the top of prober/testdata/mutants.yaml. make mutants checks every list
// (go run ./internal/mutants/run).
package mutants
