// Package clocktimertest holds a fake clock for tests of code that waits for a point in time: one
// that moves while the code makes its timer.
package clocktimertest
