package commands

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// TestErrReply pins the reply text of every engine error, bare and wrapped with context,
// and that any other error keeps its own text.
func TestErrReply(t *testing.T) {
	other := errors.New("ERR syntax error")
	cases := []struct {
		err  error
		want string
	}{
		{engine.ErrFull, "OOM cell store is full (--max-memory)"},
		{engine.ErrTooManyResets, "ERR too many resets within their tuples' last two windows (at most 1048576); try again later"},
		{edge.ErrReplayFull, "OOM replay buffer is full (origin unreachable?)"},
		{keyspace.ErrFull, "OOM cell store is full (--max-memory)"},
		{keyspace.ErrNotInteger, "ERR value is not an integer or out of range"},
		{keyspace.ErrOverflow, "ERR increment or decrement would overflow"},
		{keyspace.ErrValueTooLarge, "ERR string exceeds maximum allowed size (64 KiB in Ratchet's counter keyspace)"},
		{keyspace.ErrKeyTooLarge, "ERR key must be at most 1024 bytes"},
		{keyspace.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{keyspace.ErrTooManyElements, "ERR Ratchet holds at most 1000000 elements in one key"},
		{keyspace.ErrObjectTooLarge, "ERR Ratchet holds at most 64 MiB in one key"},
		{keyspace.ErrNoSuchKey, "ERR no such key"},
		{keyspace.ErrIndexRange, "ERR index out of range"},
		{keyspace.ErrHashNotInteger, "ERR hash value is not an integer"},
		{keyspace.ErrHashNotFloat, "ERR hash value is not a float"},
		{keyspace.ErrNotFloat, "ERR value is not a valid float"},
		{keyspace.ErrNaNOrInf, "ERR increment would produce NaN or Infinity"},
		{keyspace.ErrScoreNaN, "ERR resulting score is not a number (NaN)"},
		{engine.ErrZeroRate, "Cell error: Zero rates are not supported"},
		{engine.ErrThrottleRange, "ERR CL.THROTTLE times out of range: period*(max_burst+1) and the theoretical arrival time must stay within year 2262"},
		{engine.ErrThrottleExpire, "Cell error: Error while setting key expire"},
		{engine.ErrTATEmpty, "Cell error: cannot parse integer from empty string"},
		{engine.ErrTATDigit, "Cell error: invalid digit found in string"},
		{engine.ErrTATTooLarge, "Cell error: number too large to fit in target type"},
		{other, "ERR syntax error"},
	}
	for _, c := range cases {
		if got := errReply(c.err); got != c.want {
			t.Errorf("errReply(%q) = %q, want %q", c.err, got, c.want)
		}
		wrapped := fmt.Errorf("tuple k: %w", c.err)
		want := c.want
		if c.err == other {
			want = wrapped.Error()
		}
		if got := errReply(wrapped); got != want {
			t.Errorf("errReply(%q) = %q, want %q", wrapped, got, want)
		}
	}
	if len(cases)-1 != len(engineReplies) {
		t.Errorf("%d engine errors mapped, %d pinned here", len(engineReplies), len(cases)-1)
	}
}
