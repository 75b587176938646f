//go:build race

package engine_test

// raceEnabled is true when the race detector is on; the model tests then sample fewer
// cases, since the detector slows them about eightfold.
const raceEnabled = true
