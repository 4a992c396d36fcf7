package fuzzinput

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInputReadsTheBytesThenZeros(t *testing.T) {
	in := Input{7, 3, 0xff, 0xfe, 1}
	assert.Equal(t, 1, in.Pick(2))
	assert.True(t, in.Bit())
	assert.Equal(t, int64(-2), in.Int16())
	assert.Equal(t, byte(1), in.Byte())
	assert.Equal(t, byte(0), in.Byte(), "past the end")
	assert.Equal(t, 0, in.Pick(5))
}
