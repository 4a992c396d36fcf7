package scaler

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// Direction is the direction of a scale flow.
type Direction int

const (
	// Down scales the dependent resources to 0, recording their replicas.
	Down Direction = iota + 1
	// Up scales the dependent resources back to their recorded replicas.
	Up
)

// String returns "down" or "up"; it is the direction label of the metrics.
func (d Direction) String() string {
	switch d {
	case Down:
		return "down"
	case Up:
		return "up"
	default:
		return fmt.Sprintf("Direction(%d)", int(d))
	}
}

// Plan returns the resources of infos grouped by their level in direction dir, the levels in ascending
// order and the resources of a level in config order. Levels without resources do not appear.
func Plan(infos []config.DependentResourceInfo, dir Direction) [][]config.DependentResourceInfo {
	byLevel := make(map[int][]config.DependentResourceInfo)
	for _, info := range infos {
		level := scaleInfoOf(info, dir).Level
		byLevel[level] = append(byLevel[level], info)
	}
	plan := make([][]config.DependentResourceInfo, 0, len(byLevel))
	for _, level := range slices.Sorted(maps.Keys(byLevel)) {
		plan = append(plan, byLevel[level])
	}
	return plan
}

// scaleInfoOf returns the ScaleInfo of info for dir. A loaded config sets both; a nil one (a config that
// was not loaded through the config package) counts as level 0 with the default delay and timeout.
func scaleInfoOf(info config.DependentResourceInfo, dir Direction) config.ScaleInfo {
	si := info.ScaleUp
	if dir == Down {
		si = info.ScaleDown
	}
	if si == nil {
		return config.ScaleInfo{}
	}
	return *si
}
