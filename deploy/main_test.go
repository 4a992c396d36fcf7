package deploy

import (
	"os"
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

var env *test.Environment

func TestMain(m *testing.M) {
	code := test.Main(m, &env)
	removeDwd()
	os.Exit(code)
}
