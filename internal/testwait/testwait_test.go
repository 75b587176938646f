package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	t.Run("returns once the condition holds", func(t *testing.T) {
		r := &recorder{TB: t}
		calls := 0
		Until(r, time.Minute, "third call", func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("call %d", calls)
		})
		if r.failed != "" || calls != 3 {
			t.Fatalf("failed %q after %d calls, want no failure after 3", r.failed, calls)
		}
	})
	t.Run("fails after the deadline with the last reason", func(t *testing.T) {
		r := &recorder{TB: t}
		start := time.Now()
		calls := 0
		Until(r, 50*time.Millisecond, "never", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("call %d", calls)
		})
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("gave up after %v, before the 50ms deadline", waited)
		}
		want := fmt.Sprintf("never: not within 50ms (last: call %d)", calls)
		if r.failed != want {
			t.Errorf("failure %q, want %q", r.failed, want)
		}
	})
	t.Run("UntilTrue fails naming what", func(t *testing.T) {
		r := &recorder{TB: t}
		UntilTrue(r, time.Millisecond, "the flag", func() bool { return false })
		if !strings.HasPrefix(r.failed, "the flag: not within 1ms") || strings.Contains(r.failed, "last") {
			t.Errorf("failure %q, want %q", r.failed, "the flag: not within 1ms")
		}
	})
}
