package commands_test

import (
	"os"
	"path/filepath"
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
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{sessions: []*commands.Session{s}},
		Role: "origin", Region: "local", Version: "bench"})
	var w resp.Writer
	w.SetProto(proto)
	benchLoop(b, d, s, &w, args)
}

// benchLoop measures d serving args on s, after one warm-up call.
func benchLoop(b *testing.B, d *commands.Dispatcher, s *commands.Session, w *resp.Writer, args []string) {
	in := make([][]byte, len(args))
	for i, a := range args {
		in[i] = []byte(a)
	}
	d.Serve(s, w, in) // warm: the key's cell exists
	if len(w.Bytes()) == 0 || w.Bytes()[0] == '-' {
		b.Fatalf("reply %q", w.Bytes())
	}
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		d.Serve(s, w, in)
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
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", Region: "local", Version: "bench"})
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

// BenchmarkServeRLLimitACL measures RL.LIMIT's whole path with an ACL file: the default
// user with every permission (one atomic load and a bool more than without a file), and
// a tenant confined to ~acme:* in NS acme (its key pattern matched on every request).
func BenchmarkServeRLLimitACL(b *testing.B) {
	path := filepath.Join(b.TempDir(), "users.acl")
	users := "user default on >adminpw ~* &* +@all\nuser acme on >acmepw ~acme:* +@ratelimit\n"
	if err := os.WriteFile(path, []byte(users), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		auth []string
		cmd  []string
	}{
		{"default", []string{"AUTH", "adminpw"}, []string{"RL.LIMIT", "user:1", "1000000000", "1h"}},
		{"tenant", []string{"AUTH", "acme", "acmepw"}, []string{"RL.LIMIT", "u1", "1000000000", "1h", "NS", "acme"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			eng := engine.New(engine.SystemClock{}, engine.Config{})
			d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", ACLFile: path})
			if err := d.LoadACL(); err != nil {
				b.Fatal(err)
			}
			s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
			var w resp.Writer
			auth := make([][]byte, len(tc.auth))
			for i, a := range tc.auth {
				auth[i] = []byte(a)
			}
			if d.Serve(s, &w, auth); string(w.Bytes()) != "+OK\r\n" {
				b.Fatalf("AUTH: %q", w.Bytes())
			}
			w.Reset()
			benchLoop(b, d, s, &w, tc.cmd)
		})
	}
}
