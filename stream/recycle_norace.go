//go:build !race

package stream

// poisonReleasedEntries: see recycle_race.go.
const poisonReleasedEntries = false
