package commands_test

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
)

// stepClock moves 25 µs at each microsecond read: a hot key called 40,000 times a second.
type stepClock struct{ us atomic.Int64 }

func (c *stepClock) NowMs() int64 { return c.us.Load() / 1000 }
func (c *stepClock) NowUs() int64 { return c.us.Add(25) }

// benchScript serves one script's call on one hot key, as bench/dropin.sh sends it, on a
// keyspace whose clock moves 25 µs a call.
func benchScript(b *testing.B, call ...string) {
	clock := &stepClock{}
	clock.us.Store(1_700_000_000_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	s := commands.NewSession(7, "127.0.0.1:5000", "127.0.0.1:6380", clock.NowMs())
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{sessions: []*commands.Session{s}}, Role: "origin",
		Region: "local", Version: "test"})
	args := make([][]byte, len(call))
	for i, a := range call {
		args[i] = []byte(a)
	}
	r := &rig{d: d, s: s}
	b.ReportAllocs()
	for b.Loop() {
		r.w.Reset()
		r.d.Serve(r.s, &r.w, args)
		if r.w.Bytes()[0] != '*' {
			b.Fatalf("reply %q", r.w.Bytes())
		}
	}
}

// BenchmarkServeSlidingLog is bench/sliding-log.lua on one hot key (EVAL): a log of 40,000
// entries, one dropped and one added a call.
func BenchmarkServeSlidingLog(b *testing.B) {
	body, err := os.ReadFile("../bench/sliding-log.lua")
	if err != nil {
		b.Fatal(err)
	}
	benchScript(b, "EVAL", string(body), "1", "log:hot", "1000000000", "1000")
}

// BenchmarkServeNestJS is the NestJS throttler storages' script on one hot key (EVAL).
func BenchmarkServeNestJS(b *testing.B) {
	body, err := os.ReadFile("../bench/nestjs-throttler.lua")
	if err != nil {
		b.Fatal(err)
	}
	benchScript(b, "EVAL", strings.TrimRight(string(body), "\n"), "2", "{hot:default}:hits", "{hot:default}:blocked",
		"default", "60000", "1000000000", "60000")
}
