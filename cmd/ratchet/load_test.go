package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// TestLoadAheadStopsOnSignal: a SIGTERM while the origin loads before it listens ends that
// load (once the shards taken are loaded) and is handed back, so that the origin stops
// there; without one, the time given ends it and no signal is reported.
func TestLoadAheadStopsOnSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal bool
	}{{"signal", true}, {"time", false}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := engine.New(engine.NewManualClock(1_704_067_200_000), engine.Config{Standalone: true})
			gate := make(chan struct{})
			var once bool
			eng.LoadLazily(func(from, _ int, _ func(string) bool, _ uint64) {
				if from == 0 && !once { // the first part's load waits for the gate
					once = true
					<-gate
				}
			})
			sig := make(chan os.Signal, 1)
			type result struct {
				whole bool
				s     os.Signal
			}
			res := make(chan result, 1)
			d := time.Hour
			if !tc.signal {
				d = 20 * time.Millisecond
			}
			go func() {
				whole, s := loadAhead(eng, d, sig)
				res <- result{whole, s}
			}()
			if tc.signal {
				sig <- syscall.SIGTERM
				// The gate opens once loadAhead took the signal: before that, the load
				// could end first and leave it unseen (no fixed sleep: a loaded machine
				// may take longer than any).
				for deadline := time.Now().Add(time.Minute); len(sig) > 0; {
					if time.Now().After(deadline) {
						t.Fatal("loadAhead never took the signal")
					}
					time.Sleep(time.Millisecond)
				}
			}
			close(gate)
			select {
			case r := <-res:
				if tc.signal && r.s != syscall.SIGTERM {
					t.Fatalf("signal reported %v, want SIGTERM", r.s)
				}
				if !tc.signal && r.s != nil {
					t.Fatalf("signal reported %v, want none", r.s)
				}
			case <-time.After(time.Minute):
				t.Fatal("loadAhead did not return")
			}
			if tc.signal && len(sig) != 0 {
				t.Fatal("the signal was left for the serving origin")
			}
		})
	}
}

// TestSnapshotSourceServed: the periodic snapshots' source hands the compaction the count
// of commands served that it gives way to (persist's pacer), and the final save's none.
func TestSnapshotSourceServed(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_704_067_200_000), engine.Config{Standalone: true, Snapshots: true})
	if src := snapshotSource(eng, func() uint64 { return 42 }); src.Served == nil || src.Served() != 42 {
		t.Fatal("the count of commands served is not the source's")
	}
	if snapshotSource(eng, nil).Served != nil {
		t.Fatal("a source without a count has one")
	}
}
