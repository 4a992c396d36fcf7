// Package sample is a package for the mutants tests to mutate.
package sample

// Max returns the larger of a and b.
func Max(a, b int) int {
	if a > b {
		return a
	}
	return b
}
