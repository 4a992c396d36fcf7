package sharding

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// Defaults of the ring, chosen by measurement (docs/ring.md); the flags of package config default
// to them.
const (
	// DefaultPartitionCount is the number of partitions (and partition leases) of a group.
	DefaultPartitionCount = config.DefaultPartitionCount
	// DefaultReplicationFactor is the number of points each member has on the ring.
	DefaultReplicationFactor = config.DefaultReplicationFactor
	// DefaultLoadBound caps a member at ceil(DefaultLoadBound × partitions / members) partitions.
	DefaultLoadBound = config.DefaultRingLoadBound
)

// RingConfig shapes the ring; all replicas of a group must use the same values.
type RingConfig struct {
	// PartitionCount is the number of partitions namespaces are hashed into (>= 1).
	PartitionCount int
	// ReplicationFactor is the number of points each member has on the ring (>= 1).
	ReplicationFactor int
	// LoadBound is the bounded-load factor (finite, >= 1): no member holds more than
	// ceil(LoadBound × PartitionCount / members) partitions.
	LoadBound float64
	// PartitionFunction maps namespaces to partitions (Partitions); "" is DefaultPartitionFunction.
	PartitionFunction string
}

// RingConfigOf is the ring of a member's sharding settings.
func RingConfigOf(s config.Sharding) RingConfig {
	return RingConfig{PartitionCount: s.PartitionCount, ReplicationFactor: s.ReplicationFactor, LoadBound: s.RingLoadBound,
		PartitionFunction: s.PartitionFunction}
}

// Partitions is how the ring maps namespaces to partitions.
func (c RingConfig) Partitions() Partitions {
	return Partitions{Function: c.PartitionFunction, Count: c.PartitionCount}
}

// DefaultRingConfig returns the ring configuration with the default values.
func DefaultRingConfig() RingConfig {
	return RingConfig{
		PartitionCount:    DefaultPartitionCount,
		ReplicationFactor: DefaultReplicationFactor,
		LoadBound:         DefaultLoadBound,
		PartitionFunction: DefaultPartitionFunction,
	}
}

// validate rejects what consistent would silently replace by its own defaults (zero values) or could
// not serve: with LoadBound >= 1 the members' capacity, members × ceil(LoadBound × P / members), is at
// least P, so the library always finds room for every partition.
func (c RingConfig) validate() error {
	var errs []error
	if c.PartitionCount < 1 {
		errs = append(errs, fmt.Errorf("partition count must be at least 1, got %d", c.PartitionCount))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("replication factor must be at least 1, got %d", c.ReplicationFactor))
	}
	if math.IsNaN(c.LoadBound) || math.IsInf(c.LoadBound, 0) || c.LoadBound < 1 {
		errs = append(errs, fmt.Errorf("load bound must be a finite number of at least 1, got %v", c.LoadBound))
	}
	if f := c.PartitionFunction; f != "" && !slices.Contains(config.PartitionFunctions, f) {
		errs = append(errs, fmt.Errorf("partition function must be one of %v, got %q", config.PartitionFunctions, f))
	}
	return errors.Join(errs...)
}

// Ring maps shoot namespaces to partitions and partitions to members. Immutable once built; safe for
// concurrent use.
type Ring struct {
	partitions Partitions
	members    []string // sorted, unique
	owners     []string // owner per partition; "" when there are no members
}

// NewRing builds the ring over the given live member names (order and duplicates do not matter).
// It returns an error, never panics, for an invalid config or an empty member name, and turns a panic
// of the library into an error naming it.
func NewRing(members []string, cfg RingConfig) (*Ring, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid ring config: %w", err)
	}
	names := slices.Compact(slices.Sorted(slices.Values(members)))
	if len(names) > 0 && names[0] == "" {
		return nil, errors.New("invalid ring member: empty name")
	}
	owners, err := distribute(names, cfg)
	if err != nil {
		return nil, err
	}
	return &Ring{partitions: cfg.Partitions(), members: names, owners: owners}, nil
}

// distribute asks consistent for the owner of every partition. The names are sorted so that every
// replica feeds the library the same sequence, even in the unlikely case of colliding ring points.
func distribute(names []string, cfg RingConfig) (owners []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			owners = nil
			err = fmt.Errorf("github.com/buraksezer/consistent panicked building a ring of %d members with %+v: %v",
				len(names), cfg, p)
		}
	}()
	owners = make([]string, cfg.PartitionCount)
	if len(names) == 0 {
		return owners, nil
	}
	c := consistent.New(ringMembers(names), consistent.Config{
		Hasher:            xxhasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.LoadBound,
	})
	for p := range owners {
		m := c.GetPartitionOwner(p)
		if m == nil {
			return nil, fmt.Errorf("github.com/buraksezer/consistent left partition %d without an owner", p)
		}
		owners[p] = m.String()
	}
	return owners, nil
}

func ringMembers(names []string) []consistent.Member {
	ms := make([]consistent.Member, len(names))
	for i, n := range names {
		ms[i] = ringMember(n)
	}
	return ms
}

// ringMember is a ring member named by its replica name.
type ringMember string

func (m ringMember) String() string { return string(m) }

// xxhasher is the ring's hasher of members over partition ids: xxhash, whatever the partition
// function of namespaces.
type xxhasher struct{}

func (xxhasher) Sum64(data []byte) uint64 { return xxhash.Sum64(data) }

// Partition returns the partition of a namespace; it does not depend on the members.
func (r *Ring) Partition(namespace string) int {
	return r.partitions.Of(namespace)
}

// Owner returns the member that owns a partition, or "" when there are no members or the partition is
// out of range.
func (r *Ring) Owner(partition int) string {
	if partition < 0 || partition >= len(r.owners) {
		return ""
	}
	return r.owners[partition]
}

// Members returns the members of the ring, sorted.
func (r *Ring) Members() []string {
	return slices.Clone(r.members)
}

// PartitionsOf returns the partitions a member owns, sorted; none for a name that is not a member.
func (r *Ring) PartitionsOf(member string) []int {
	var parts []int
	for p, owner := range r.owners {
		if owner == member && member != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// Assignment returns the owner of every partition (index = partition), "" when there are no members;
// comparing two assignments gives the partitions whose owner changes.
func (r *Ring) Assignment() []string {
	return slices.Clone(r.owners)
}

// PartitionCount returns the number of partitions of the ring.
func (r *Ring) PartitionCount() int {
	return r.partitions.Count
}
