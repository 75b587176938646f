package engine_test

import (
	"math"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

func TestColdAllowance(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		ppm   int64
		want  uint64
	}{
		{1000, 1000, 1},
		{999, 1000, 0},
		{100, 10_000, 1},
		{10, 10_000, 0},
		{1_000_000, 1, 1},
		{2_500_000, 1000, 2500},
		{math.MaxUint64, 1_000_000, math.MaxUint64},
		{math.MaxUint64, 500_000, math.MaxUint64 / 2},
		{1000, 0, 0},
		{1000, -5, 0},
	} {
		if got := engine.ColdAllowance(c.limit, c.ppm); got != c.want {
			t.Errorf("ColdAllowance(%d, %d) = %d, want %d", c.limit, c.ppm, got, c.want)
		}
	}
}

// admitted hands requests of cost 1 over for run until one is refused, and returns how
// many were admitted.
func admitted(t *testing.T, o *engine.Engine, run string, key []byte, limit uint64) int {
	t.Helper()
	n := 0
	for range limit + 1 {
		d, _, _, err := o.ServeDecide(run, engine.DecideRequest{Key: key, Limit: limit, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
		n++
	}
	return n
}

// The origin counts twice every live run's cold allowance as used on every tuple, and stops
// once a run's allowance has ended and the run has fallen silent.
func TestColdReserve(t *testing.T) {
	const w = 3_600_000
	clock := engine.NewManualClock(10 * w)
	o := engine.New(clock, engine.Config{ColdShare: 0.01, LeaseTTL: 10 * time.Second})
	if _, meta := o.ServeRead("a/1", nil); meta.ColdPPM != 10_000 {
		t.Fatalf("ColdPPM = %d, want 10000", meta.ColdPPM)
	}
	// Two runs: each may admit 1 of a limit of 100 cold, so 4 are held back.
	if got := admitted(t, o, "b/1", engine.AppendKey(nil, tup("k1", w)), 100); got != 96 {
		t.Fatalf("admitted %d of 100 with two runs' allowances, want 96", got)
	}
	// A limit whose allowance is 0 holds nothing back.
	if got := admitted(t, o, "b/1", engine.AppendKey(nil, tup("k2", w)), 99); got != 99 {
		t.Fatalf("admitted %d of 99, want 99", got)
	}
	// Run a falls silent: past its allowance's end (TTL and the grace), it holds nothing.
	clock.Advance(12_000)
	if got := admitted(t, o, "b/1", engine.AppendKey(nil, tup("k3", w)), 100); got != 98 {
		t.Fatalf("admitted %d of 100 once run a fell silent, want 98", got)
	}
	// A later run of node b supersedes b/1, whose allowance holds for a second more (what it
	// admitted before it ended may arrive late).
	if got := admitted(t, o, "b/2", engine.AppendKey(nil, tup("k4", w)), 100); got != 96 {
		t.Fatalf("admitted %d of 100 as b restarted, want 96", got)
	}
	clock.Advance(1000)
	if got := admitted(t, o, "b/2", engine.AppendKey(nil, tup("k5", w)), 100); got != 98 {
		t.Fatalf("admitted %d of 100 a second after b restarted, want 98", got)
	}
	// Without a cold share nothing is held back and replies grant nothing.
	plain := engine.New(clock, engine.Config{})
	if _, meta := plain.ServeRead("a/1", nil); meta.ColdPPM != 0 {
		t.Fatalf("ColdPPM = %d without a cold share", meta.ColdPPM)
	}
	if got := admitted(t, plain, "b/1", engine.AppendKey(nil, tup("k1", w)), 100); got != 100 {
		t.Fatalf("admitted %d of 100 without a cold share, want 100", got)
	}
}

// A grant's room counts the cold allowances too.
func TestColdReserveInGrants(t *testing.T) {
	const w = 3_600_000
	clock := engine.NewManualClock(10 * w)
	o := engine.New(clock, engine.Config{ColdShare: 0.01})
	key := engine.AppendKey(nil, tup("g", w))
	// One run: its allowance on a limit of 1000 is 10, 20 held back; the room is 980, and a
	// lone edge is granted at most half of it.
	counts, _ := o.ServeRead("a/1", []engine.ReadItem{{Key: key, Seq: clock.NowMs() / w, Limit: 1000, Want: 1000}})
	if got := counts[0].LeaseLeft; got != 490 {
		t.Fatalf("lease %d, want 490 (half of 1000 - 2 x 10)", got)
	}
}
