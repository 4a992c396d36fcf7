package logtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLinesKeepsWhatTheLoggerWritesUpToItsVerbosity(t *testing.T) {
	var l Lines
	log := l.Logger(1)
	log.Info("Started", "namespace", "a")
	log.V(1).Info("Detail", "namespace", "a")
	log.V(2).Info("Noise")
	assert.Len(t, l.With(`"msg"="Started"`, `"level"=0`, `"namespace"="a"`), 1)
	assert.Len(t, l.With(`"msg"="Detail"`, `"level"=1`), 1)
	assert.Empty(t, l.With(`"msg"="Noise"`))
}
