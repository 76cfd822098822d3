//go:build race

package pulsar

const raceEnabled = true
