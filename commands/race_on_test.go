//go:build race

package commands_test

// raceEnabled is true when the race detector is on: sync.Pool then drops items at random,
// so allocation counts of pooled paths are not exact.
const raceEnabled = true
