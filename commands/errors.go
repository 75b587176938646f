package commands

import (
	"errors"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// engineReplies maps each engine and keyspace error to the reply text clients see: Redis's, or
// redis-cell's for CL.THROTTLE. The engine's errors are plain values; their wire text is
// written here alone.
var engineReplies = []struct {
	err   error
	reply string
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
}

// errReply returns the error reply's text for err: the client's text for an engine error
// (wrapped or not), else err's own text, which the command layer and the origin's replies
// (upstream.ServerError) already write as a reply.
func errReply(err error) string {
	for _, r := range engineReplies {
		if errors.Is(err, r.err) {
			return r.reply
		}
	}
	return err.Error()
}
