// Package fuzzinput reads a fuzz target's byte string as a stream of small numbers, so that the
// fuzzer's mutations reach every field a structured target builds from it.
package fuzzinput
