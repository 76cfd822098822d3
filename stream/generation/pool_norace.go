//go:build !race

package generation

// poisonOnRelease: see pool_race.go.
const poisonOnRelease = false
