package commands_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// TestWarmPathsDoNotAllocate keeps the hot commands at zero allocations once their key
// exists and the reply buffer has grown.
func TestWarmPathsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
	s := commands.NewSession(1, "a", "b", 0)
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", Region: "local", Version: "t"})
	for _, cmd := range []string{
		"PING",
		"RL.LIMIT key:1 1000000000 60000",
		"rl.limit key:1 1000000000 60s COST 2 NS api",
		"RL.LIMIT key:1 1000000000 60000 NS default",
		"RL.STATUS key:1 60000 NS api LIMIT 1000000000",
	} {
		for _, proto := range []int{2, 3} {
			var w resp.Writer
			w.SetProto(proto)
			args := split(cmd)
			d.Serve(s, &w, args)
			if allocs := testing.AllocsPerRun(100, func() {
				w.Reset()
				d.Serve(s, &w, args)
			}); allocs != 0 {
				t.Errorf("RESP%d %s: %v allocs per request", proto, cmd, allocs)
			}
		}
	}
}

// TestNamespacesStayApart rotates through more namespaces than a session remembers: each
// keeps its own count.
func TestNamespacesStayApart(t *testing.T) {
	r := newRig("")
	for round := 1; round <= 3; round++ {
		for i := range 7 {
			want := fmt.Sprintf("*5\r\n:1\r\n:10\r\n:%d\r\n:0\r\n", 10-round)
			if got := r.do(fmt.Sprintf("RL.LIMIT k 10 1s NS ns%d", i)); !strings.HasPrefix(got, want) {
				t.Fatalf("round %d ns%d: %q, want prefix %q", round, i, got, want)
			}
		}
	}
	if got := r.do("RL.LIMIT k 10 1s"); !strings.HasPrefix(got, "*5\r\n:1\r\n:10\r\n:9\r\n") {
		t.Fatalf("default namespace: %q", got)
	}
	if got := r.do("RL.LIMIT k 10 1s NS default"); !strings.HasPrefix(got, "*5\r\n:1\r\n:10\r\n:8\r\n") {
		t.Fatalf("NS default is the default namespace: %q", got)
	}
}

// TestProcessedIsExact counts every request, from many sessions at once, errors and
// unknown commands included; INFO counts itself.
func TestProcessedIsExact(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", Region: "local", Version: "t"})
	const sessions, each = 50, 200
	var wg sync.WaitGroup
	for id := range sessions {
		wg.Go(func() {
			s := commands.NewSession(int64(id+1), "a", "b", 0)
			var w resp.Writer
			for i := range each {
				w.Reset()
				switch i % 4 {
				case 0:
					d.Serve(s, &w, split("PING"))
				case 1:
					d.Serve(s, &w, split("RL.LIMIT k 1000000 1s NS x"))
				case 2:
					d.Serve(s, &w, split("RL.LIMIT k"))
				default:
					d.Serve(s, &w, split("NOPE"))
				}
			}
		})
	}
	wg.Wait()
	if got := d.Processed(); got != sessions*each {
		t.Fatalf("Processed = %d, want %d", got, sessions*each)
	}
	var w resp.Writer
	d.Serve(commands.NewSession(999, "a", "b", 0), &w, split("INFO stats"))
	// As in Redis, a command is counted once it has run: INFO does not count itself.
	if want := fmt.Sprintf("total_commands_processed:%d\r\n", sessions*each); !strings.Contains(string(w.Bytes()), want) {
		t.Fatalf("INFO stats = %q, want %q", w.Bytes(), want)
	}
}
