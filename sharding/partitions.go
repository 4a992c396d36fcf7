package sharding

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// The partition functions (config.PartitionFunctions).
const (
	PartitionFNVRange        = config.PartitionFNVRange
	PartitionXXHashMod       = config.PartitionXXHashMod
	DefaultPartitionFunction = config.DefaultPartitionFunction
)

// Partitions maps shoot namespaces to partitions: a partition function over a partition count. The
// zero Function is DefaultPartitionFunction. Members of a group must agree on both (Settings).
type Partitions struct {
	// Function is one of config.PartitionFunctions; "" is DefaultPartitionFunction.
	Function string
	// Count is the number of partitions (>= 1).
	Count int
}

// function is Function with the default filled in.
func (p Partitions) function() string {
	if p.Function == "" {
		return DefaultPartitionFunction
	}
	return p.Function
}

// Of returns the partition of a namespace, or -1 when Count < 1 or the function is unknown (config
// validation rejects both).
//
//   - fnv1a64-range-v1: with h the 64-bit FNV-1a hash of the namespace, the partition is ⌊h·P/2⁶⁴⌋,
//     so that partition p is the contiguous hash range [⌈p·2⁶⁴/P⌉, ⌈(p+1)·2⁶⁴/P⌉) (Range).
//   - xxhash64-mod-v1: xxhash(namespace) mod P, as consistent's FindPartitionID.
func (p Partitions) Of(namespace string) int {
	if p.Count < 1 {
		return -1
	}
	switch p.function() {
	case PartitionFNVRange:
		hi, _ := bits.Mul64(FNV(namespace), uint64(p.Count))
		return int(hi)
	case PartitionXXHashMod:
		return int(xxhash.Sum64String(namespace) % uint64(p.Count))
	}
	return -1
}

// FNV is the 64-bit FNV-1a hash of s, the hash the API server's shard selectors range over.
func FNV(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// Selectable reports whether a share of these partitions can be written as ranges of the FNV-1a
// hash of the namespace, the only hash an API server selects by.
func (p Partitions) Selectable() bool {
	return p.function() == PartitionFNVRange && p.Count >= 1
}

// HashRange is a half-open range [Start, End) of 64-bit hashes.
type HashRange struct {
	Start uint64
	// End is exclusive; ToEnd says the range runs to 2⁶⁴ (End is then 0).
	End   uint64
	ToEnd bool
}

// start is ⌈p·2⁶⁴/P⌉ for 0 <= p < P: the first hash of partition p.
func (p Partitions) start(part int) uint64 {
	if part == 0 {
		return 0
	}
	// p·2⁶⁴ = (hi=p, lo=0); ⌈x/P⌉ = ⌊(x + P − 1)/P⌋ and p < P, so the quotient fits in 64 bits.
	q, _ := bits.Div64(uint64(part), uint64(p.Count-1), uint64(p.Count))
	return q
}

// Ranges returns the hash ranges of the partitions marked in held (indexed by partition), adjacent
// partitions merged, in order; nil for a function that is not Selectable or an empty share.
func (p Partitions) Ranges(held []bool) []HashRange {
	if !p.Selectable() || len(held) != p.Count {
		return nil
	}
	var out []HashRange
	for part := 0; part < p.Count; part++ {
		if !held[part] {
			continue
		}
		first := part
		for part+1 < p.Count && held[part+1] {
			part++
		}
		r := HashRange{Start: p.start(first)}
		if part+1 == p.Count {
			r.ToEnd = true
		} else {
			r.End = p.start(part + 1)
		}
		out = append(out, r)
	}
	return out
}

// ShardSelectorField is the object field a shoot share is selected by: the namespace.
const ShardSelectorField = "object.metadata.namespace"

// ShardSelector writes ranges as the API server's shard selector over the namespace
// (ListOptions.ShardSelector): shardRange(object.metadata.namespace, '0x…', '0x…') terms joined by
// "||", with bounds of 16 lowercase hex digits and 2⁶⁴ as 0x10000000000000000. "" for no range.
func ShardSelector(ranges []HashRange) string {
	var b strings.Builder
	for i, r := range ranges {
		if i > 0 {
			b.WriteString(" || ")
		}
		end := fmt.Sprintf("0x%016x", r.End)
		if r.ToEnd {
			end = "0x10000000000000000"
		}
		fmt.Fprintf(&b, "shardRange(%s, '0x%016x', '%s')", ShardSelectorField, r.Start, end)
	}
	return b.String()
}
