package fuzzinput

// Input hands out the bytes of a fuzz input as small numbers; past the end it gives zeros.
type Input []byte

// Byte returns the next byte.
func (in *Input) Byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// Pick returns a number in [0, n).
func (in *Input) Pick(n int) int { return int(in.Byte()) % n }

// Bit returns a boolean.
func (in *Input) Bit() bool { return in.Byte()&1 == 1 }

// Int16 returns a signed 16-bit number from the next two bytes.
func (in *Input) Int16() int64 { return int64(int16(uint16(in.Byte())<<8 | uint16(in.Byte()))) }
