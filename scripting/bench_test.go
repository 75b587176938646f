package scripting_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// slidingLog is the sorted-set sliding log users write by hand: drop the entries older
// than the window, count, admit and record when under the limit.
const slidingLog = `local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - 1}
end
return {0, 0}
`

// countCaller answers every command with an integer at once: the benchmark measures the
// interpreter, not a keyspace.
type countCaller struct{ n int64 }

func (c *countCaller) Call(args [][]byte, _ int) (scripting.Reply, bool) {
	c.n++
	return scripting.IntReply(c.n % 7), false
}

// BenchmarkRun is one EVALSHA of the sliding log: the interpreter's cost per call.
func BenchmarkRun(b *testing.B) {
	e := scripting.New(scripting.Config{})
	sha, msg := e.Load([]byte(slidingLog))
	if msg != "" {
		b.Fatal(msg)
	}
	keys := [][]byte{[]byte("rl:user:42")}
	c := &countCaller{}
	ctx := context.Background()
	b.ReportAllocs()
	var buf []byte
	for i := 0; b.Loop(); i++ {
		now := strconv.Itoa(1_700_000_000_000 + i)
		r := e.Run(ctx, scripting.Request{SHA: sha, Keys: keys,
			Args: [][]byte{[]byte(now), []byte("60000"), []byte("10"), []byte(now)}}, c)
		buf = r.Append(buf[:0], 2)
		if r.Kind != scripting.Array {
			b.Fatalf("reply %q", buf)
		}
	}
}

// BenchmarkRunEval is one EVAL of the NestJS throttler storages' script
// (bench/nestjs-throttler.lua: @nest-lab/throttler-storage-redis 1.2.0,
// nestjs-throttler-storage-redis 0.5.1), as they send it: the text hashed and looked up on
// every call.
func BenchmarkRunEval(b *testing.B) {
	e := scripting.New(scripting.Config{})
	body, err := os.ReadFile("../bench/nestjs-throttler.lua")
	if err != nil {
		b.Fatal(err)
	}
	body = bytes.TrimRight(body, "\n") // sent without a final newline
	if scripting.SHA1(body) != "f1e0da9c495676ab6904eb80db1f2811d5347f58" {
		b.Fatalf("the script's SHA1 is %s", scripting.SHA1(body))
	}
	keys := [][]byte{[]byte("{10.0.0.1:default}:hits"), []byte("{10.0.0.1:default}:blocked")}
	args := [][]byte{[]byte("default"), []byte("60000"), []byte("1000000000"), []byte("60000")}
	c := &countCaller{}
	ctx := context.Background()
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		r := e.Run(ctx, scripting.Request{Body: body, Keys: keys, Args: args}, c)
		buf = r.Append(buf[:0], 2)
		if r.Kind != scripting.Array {
			b.Fatalf("reply %q", buf)
		}
	}
}
