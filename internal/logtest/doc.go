// Package logtest collects the lines of a logr logger in tests, so that a test can assert what a
// component logs and at which verbosity.
package logtest
