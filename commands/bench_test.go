package commands_test

import (
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// benchServe measures the whole command path for args (already parsed, as the server
// hands them over) against a real engine on the wall clock, after one warm-up call.
func benchServe(b *testing.B, proto int, args ...string) {
	eng := engine.New(engine.SystemClock{}, engine.Config{})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	d := commands.New(commands.Options{Limiter: eng, Origin: eng, Host: &fakeHost{sessions: []*commands.Session{s}},
		Role: "origin", Region: "local", Version: "bench"})
	in := make([][]byte, len(args))
	for i, a := range args {
		in[i] = []byte(a)
	}
	var w resp.Writer
	w.SetProto(proto)
	d.Serve(s, &w, in) // warm: the key's cell exists
	if len(w.Bytes()) == 0 || w.Bytes()[0] == '-' {
		b.Fatalf("reply %q", w.Bytes())
	}
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		d.Serve(s, &w, in)
	}
}

func BenchmarkServeRLLimit(b *testing.B) {
	benchServe(b, 2, "RL.LIMIT", "key:000000012345", "1000000000000", "60000")
}

func BenchmarkServeRLLimitResp3(b *testing.B) {
	benchServe(b, 3, "RL.LIMIT", "key:000000012345", "1000000000000", "60000")
}

func BenchmarkServeRLLimitNS(b *testing.B) {
	benchServe(b, 2, "RL.LIMIT", "key:000000012345", "1000000000000", "60000", "NS", "api")
}

func BenchmarkServeRLLimitCostNS(b *testing.B) {
	benchServe(b, 2, "rl.limit", "key:000000012345", "1000000000000", "60s", "COST", "3", "ns", "api")
}

func BenchmarkServeRLStatus(b *testing.B) {
	benchServe(b, 2, "RL.STATUS", "key:000000012345", "60000", "NS", "api", "LIMIT", "1000000000000")
}

func BenchmarkServePing(b *testing.B) {
	benchServe(b, 2, "PING")
}

// BenchmarkServeRLLimitParallel serves from every core at once, one session each, as
// concurrent connections do: shared counters in the path show up here.
func BenchmarkServeRLLimitParallel(b *testing.B) {
	eng := engine.New(engine.SystemClock{}, engine.Config{})
	d := commands.New(commands.Options{Limiter: eng, Origin: eng, Host: &fakeHost{}, Role: "origin", Region: "local", Version: "bench"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		in := [][]byte{[]byte("RL.LIMIT"), []byte("key:000000012345"), []byte("1000000000000"), []byte("60000")}
		var w resp.Writer
		for pb.Next() {
			w.Reset()
			d.Serve(s, &w, in)
		}
	})
}
