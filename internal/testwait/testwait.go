// Package testwait waits in tests for a condition that another goroutine or process
// brings about: it polls, with a short backoff, until the condition holds or a deadline
// passes, then fails the test with what was awaited and the last reason the condition
// gave. Deadlines are generous on purpose: a test waits for a condition and never fails
// because a loaded machine was slow; a correct run returns as soon as the condition holds.
package testwait

import (
	"testing"
	"time"
)

// Backoff between polls: the first comes soon, later ones no more often than every
// maxPause, so that a long wait costs the machine little.
const (
	firstPause = time.Millisecond
	maxPause   = 20 * time.Millisecond
)

// Until calls cond until it reports true, or fails t once timeout has passed, naming what
// and the last reason cond gave (the state seen, to tell why it did not hold).
func Until(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, reason string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := firstPause
	for {
		ok, reason := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if reason == "" {
				t.Fatalf("%s: not within %v", what, timeout)
			} else {
				t.Fatalf("%s: not within %v (last: %s)", what, timeout, reason)
			}
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// UntilTrue is Until for a condition that gives no reason.
func UntilTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, timeout, what, func() (bool, string) { return cond(), "" })
}
