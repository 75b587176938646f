//go:build !race

package commands_test

// raceEnabled is true when the race detector is on (race_on_test.go).
const raceEnabled = false
