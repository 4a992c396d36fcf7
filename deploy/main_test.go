package deploy

import (
	"os"
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

var env *test.Environment

func TestMain(m *testing.M) { os.Exit(test.Main(m, &env)) }
