// Package configtest decodes the prober and weeder configs of tests: strictly, failing the test on a
// key the config does not have or on any other problem, so that a fixture cannot drift from the
// format unnoticed.
package configtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// Prober decodes data as a prober config, defaulted and validated; any problem fails t.
func Prober(t testing.TB, data string) *config.ProberConfig {
	t.Helper()
	return strict(t, "prober", data, config.DecodeProberConfigLenient)
}

// Weeder decodes data as a weeder config, defaulted and validated; any problem fails t.
func Weeder(t testing.TB, data string) *config.WeederConfig {
	t.Helper()
	return strict(t, "weeder", data, config.DecodeWeederConfigLenient)
}

// strict decodes data with decode and fails t on an unknown key or an error.
func strict[T any](t testing.TB, kind, data string, decode func([]byte) (*T, field.ErrorList, field.ErrorList)) *T {
	t.Helper()
	c, unknown, errs := decode([]byte(data))
	if problems := append(unknown, errs...); len(problems) > 0 {
		t.Fatalf("the %s config of the test does not decode strictly: %v", kind, problems.ToAggregate())
	}
	return c
}
