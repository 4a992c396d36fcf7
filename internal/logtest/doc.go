// Package logtest collects the lines of a logr logger in tests, so that a test can assert what a
// component logs and at which verbosity (Lines), and what a process writes while the test reads it
// (Buffer).
package logtest
