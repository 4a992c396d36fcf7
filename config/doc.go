// Package config holds the configuration of the prober and the weeder: the
// types, how they are loaded from YAML, their defaults, and their validation.
//
// The types and their YAML keys are those of the original
// gardener/dependency-watchdog, so an existing configuration file loads
// unchanged. Unlike the original, loading is strict and complete:
//
//   - Decoding rejects unknown keys, keys repeated in one mapping, and a
//     second YAML document, instead of silently ignoring them.
//   - Optional values are pointers, so an unset value (which gets its default)
//     is told apart from an explicit bad one such as "0s" (which is an error).
//   - Problems are collected, not returned one at a time: the result is a
//     field.ErrorList naming every problem with its field path, for example
//     "dependentResourceInfos[1].scaleUp.timeout", so that one run of the
//     binary shows everything wrong with a file.
//
// The lenient decoders (DecodeProberConfigLenient, DecodeWeederConfigLenient)
// differ in one point: a key the config does not have is returned apart, for
// the caller to warn about, instead of being an error. The commands that run
// the watchdog load this way, as the original ignores such keys; `dwd config
// validate` loads strictly. Everything else is an error in both.
//
// Loading runs in a fixed order: decode strictly, default, validate. Decoding
// converts YAML to JSON (sigs.k8s.io/yaml) and decodes that with
// sigs.k8s.io/json in strict mode; a walk of the YAML nodes alongside the Go
// types finds what the conversion hides (repeated keys, a second document)
// and gives unknown keys and unparsable durations their exact field paths.
// A value of the wrong type (a word where a number goes) stops decoding: it
// is reported together with the key problems of the walk, and nothing more
// is checked. Key problems alone do not stop loading: defaulting and
// validation still run, and all problems are returned together.
//
// A configuration returned without errors has every defaulted pointer set, so
// its users need no nil checks for those fields.
package config
