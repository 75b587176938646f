//go:build race

package edge

// raceOn is true when the race detector is on; the internal tests then do less work, since
// it slows them about eightfold.
const raceOn = true
