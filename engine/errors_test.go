package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// TestErrorsAreValues checks that each engine and keyspace error is found by errors.Is through a wrap,
// is told apart from the others, and carries no Redis reply code: the command layer
// writes the wire text.
func TestErrorsAreValues(t *testing.T) {
	all := []error{
		engine.ErrFull, keyspace.ErrNotInteger, keyspace.ErrOverflow,
		keyspace.ErrValueTooLarge, keyspace.ErrKeyTooLarge, keyspace.ErrFull, keyspace.ErrWrongType,
		keyspace.ErrTooManyElements, keyspace.ErrObjectTooLarge, keyspace.ErrNoSuchKey, keyspace.ErrIndexRange,
		keyspace.ErrHashNotInteger, keyspace.ErrHashNotFloat, keyspace.ErrNotFloat, keyspace.ErrNaNOrInf,
		keyspace.ErrScoreNaN, engine.ErrZeroRate,
		engine.ErrThrottleRange, engine.ErrThrottleExpire, engine.ErrTATEmpty,
		engine.ErrTATDigit, engine.ErrTATTooLarge,
	}
	for i, e := range all {
		wrapped := fmt.Errorf("context: %w", e)
		for j, o := range all {
			if got := errors.Is(wrapped, o); got != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", wrapped, o, got)
			}
		}
		for _, code := range []string{"ERR ", "OOM ", "Cell error"} {
			if strings.HasPrefix(e.Error(), code) {
				t.Errorf("%q carries the reply code %q", e, code)
			}
		}
	}
}
