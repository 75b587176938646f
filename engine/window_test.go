package engine_test

import (
	"testing"

	"github.com/ratchet/ratchet/engine"
)

const (
	p50   = engine.MaxLimit    // 2^50
	month = engine.MaxWindowMs // 31 days = 2678400000 ms
)

// TestDecideTable checks engine.Decide against values worked out by hand from SPEC
// section 2. Each case is also run through the reference model, so a wrong hand value
// fails loudly rather than silently agreeing with the code.
func TestDecideTable(t *testing.T) {
	if month != 2_678_400_000 {
		t.Fatalf("MaxWindowMs = %d, want 31 days = 2678400000", month)
	}
	type want struct {
		allowed   bool
		remaining uint64
		retry     int64
		reset     int64
	}
	cases := []struct {
		name        string
		cur, prev   uint64
		limit, cost uint64
		w, e        int64
		want        want
	}{
		// Empty tuple.
		{"empty/elapsed 0", 0, 0, 10, 1, 1000, 0, want{true, 9, 0, 2000}},
		{"empty/elapsed W-1", 0, 0, 10, 1, 1000, 999, want{true, 9, 0, 1001}},
		{"empty/peek", 0, 0, 10, 0, 1000, 400, want{true, 10, 0, 0}},
		{"empty/cost = L", 0, 0, 10, 10, 1000, 0, want{true, 0, 0, 2000}},
		{"empty/cost > L", 0, 0, 10, 11, 1000, 0, want{false, 10, -1, 0}},
		{"empty/cost = L+1 at W-1", 0, 0, 10, 11, 1000, 999, want{false, 10, -1, 0}},

		// Peek (cost 0): allowed while used <= L, changes nothing.
		{"peek/used = L", 10, 0, 10, 0, 1000, 0, want{true, 0, 0, 2000}},
		{"peek/used = L from both cells", 5, 10, 10, 0, 1000, 500, want{true, 0, 0, 1500}},
		// used = 11 > 10; next cell needs 11*(1000-e2) <= 10*1000: e2 >= 91.
		{"peek/used = L+1", 11, 0, 10, 0, 1000, 0, want{false, 0, 1091, 2000}},
		// used = 10 + 10*999/1000 > 10: denied until the previous cell has decayed out.
		{"peek/used just over L", 10, 10, 10, 0, 1000, 1, want{false, 0, 999, 1999}},
		{"peek/previous only", 0, 10, 10, 0, 1000, 500, want{true, 5, 0, 500}},

		// cost = L: passes only when nothing is used.
		{"cost = L/current 1", 1, 0, 10, 10, 1000, 0, want{false, 9, 2000, 2000}},
		{"cost = L/current 1 at W-1", 1, 0, 10, 10, 1000, 999, want{false, 9, 1001, 1001}},
		// needs 10*(1000-e-t) <= 0: t = 1000-e.
		{"cost = L/previous 10", 0, 10, 10, 10, 1000, 250, want{false, 2, 750, 750}},

		// cost > L: never, nothing counted, whatever the counts.
		{"cost > L/with counts", 3, 4, 10, 11, 1000, 500, want{false, 5, -1, 1500}},
		{"cost > L/previous only", 0, 4, 10, 11, 1000, 500, want{false, 8, -1, 500}},
		{"cost > L/over limit", 20, 20, 10, 11, 1000, 0, want{false, 0, -1, 2000}},

		// Previous cell only: it decays linearly through the current window.
		// used = 10 at e=0; needs 10*(1000-t) <= 9*1000: t >= 100.
		{"previous only/elapsed 0 full", 0, 10, 10, 1, 1000, 0, want{false, 0, 100, 1000}},
		{"previous only/half decayed", 0, 10, 10, 1, 1000, 500, want{true, 4, 0, 1500}},
		// used = 0.01; 10 - 0.01 - 1 = 8.99.
		{"previous only/elapsed W-1", 0, 10, 10, 1, 1000, 999, want{true, 8, 0, 1001}},
		// used = 10*1/1000 at e = W-1; cost = L denied until the previous cell is gone.
		{"previous only/W-1 cost = L", 0, 10, 10, 10, 1000, 999, want{false, 9, 1, 1}},

		// Current cell only: it counts in full until the next cell, then decays.
		// needs 10*(1000-e2) <= 9*1000 in the next cell: e2 >= 100, t = 750 + 100.
		{"current only/full", 10, 0, 10, 1, 1000, 250, want{false, 0, 850, 1750}},
		{"current only/room", 7, 0, 10, 3, 1000, 250, want{true, 0, 0, 1750}},
		// next cell needs 7*(1000-e2) <= 6*1000: e2 >= 143, t = 750 + 143.
		{"current only/one short", 7, 0, 10, 4, 1000, 250, want{false, 3, 893, 1750}},
		{"current only/elapsed W-1", 9, 0, 10, 1, 1000, 999, want{true, 0, 0, 1001}},

		// Both cells. used = 3 + 8*5/10 = 7.
		{"both/exact fit", 3, 8, 10, 3, 10, 5, want{true, 0, 0, 15}},
		// needs 3 + 8*(5-t)/10 <= 6: t >= 2 (1.25 rounded up).
		{"both/one over", 3, 8, 10, 4, 10, 5, want{false, 3, 2, 15}},
		// used = 3 + 8*10/10 = 11 at e=0: over the limit, floor(10-11) < 0.
		{"both/elapsed 0 over", 3, 8, 10, 1, 10, 0, want{false, 0, 3, 20}},
		// used = 3 + 8*1/10 = 3.8 at e = W-1.
		{"both/elapsed W-1", 3, 8, 10, 6, 10, 9, want{true, 0, 0, 11}},
		{"both/elapsed W-1 denied", 3, 8, 10, 7, 10, 9, want{false, 6, 1, 11}},

		// W = 1: elapsed is always 0, the previous cell counts in full for its 1 ms.
		{"W=1/empty", 0, 0, 5, 1, 1, 0, want{true, 4, 0, 2}},
		{"W=1/previous full", 0, 5, 5, 1, 1, 0, want{false, 0, 1, 1}},
		{"W=1/current full", 5, 0, 5, 1, 1, 0, want{false, 0, 2, 2}},
		{"W=1/peek previous", 0, 5, 5, 0, 1, 0, want{true, 0, 0, 1}},
		{"W=1/cost > L", 0, 0, 5, 6, 1, 0, want{false, 5, -1, 0}},

		// Contract bounds: limit and cost 2^50, window 31 days.
		{"max/cost = L empty", 0, 0, p50, p50, month, 0, want{true, 0, 0, 2 * month}},
		{"max/cost = L empty W-1", 0, 0, p50, p50, month, month - 1, want{true, 0, 0, month + 1}},
		{"max/cost = L current 1", 1, 0, p50, p50, month, 0, want{false, p50 - 1, 2 * month, 2 * month}},
		{"max/cost = L previous 1", 0, 1, p50, p50, month, 0, want{false, p50 - 1, month, month}},
		{"max/peek at L", p50, 0, p50, 0, month, 0, want{true, 0, 0, 2 * month}},
		{"max/cost > L", 0, 0, p50, p50 + 1, month, 0, want{false, p50, -1, 0}},
		{"max/cost > L at limit", p50, p50, p50, p50 + 1, month, 7, want{false, 0, -1, 2*month - 7}},
		// used = 2^50 exactly at e=0; needs 2^50*(W-t) <= (2^50-1)*W: t >= W/2^50, so 1.
		{"max/previous at limit", 0, p50, p50, 1, month, 0, want{false, 0, 1, month}},
		// used = 2^49 at e = W/2.
		{"max/previous half decayed", 0, p50, p50, 1, month, month / 2, want{true, p50/2 - 1, 0, 2*month - month/2}},
		// used = (2^50-1) + 2^50*1/W (about 2^50 + 420361.2): over. 1 ms later the cell
		// rolls over, the previous cell is 2^50-1 at full weight, and cost 1 fits.
		{"max/fraction over", p50 - 1, p50, p50, 1, month, month - 1, want{false, 0, 1, month + 1}},
		// used = (2^50-1) + 1 at full previous weight: cost 1 is one over.
		{"max/previous 1 full weight", p50 - 1, 1, p50, 1, month, 0, want{false, 0, month, 2 * month}},
		// used = (2^50-1) + 1*1/W at e = W-1, cost 1: 2^50 + 1/W > L. A float64 sum
		// rounds 1/W (3.7e-10, below half an ulp of 2^50) away and would admit; the
		// exact rule denies, and the cell boundary 1 ms later admits.
		{"max/float would admit W-1", p50 - 1, 1, p50, 1, month, month - 1, want{false, 0, 1, month + 1}},
		// Counts 3*2^50 (several regions' imports): next cell needs 3*2^50*(W-e2) <=
		// (2^50-1)*W, i.e. e2 >= W - floor((2^50-1)*W/(3*2^50)) = W - 892799999.
		{"max/current 3x limit", 3 * p50, 0, p50, 1, month, 0, want{false, 0, month + (month - 892_799_999), 2 * month}},
		{"max/previous 3x limit", 0, 3 * p50, p50, 0, month, 0, want{false, 0, month - 892_800_000, month}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := engine.Decide(engine.Counts{Current: tc.cur, Previous: tc.prev}, tc.limit, tc.cost, tc.w, tc.e)
			w := tc.want
			if got.Allowed != w.allowed || got.Limit != tc.limit || got.Remaining != w.remaining ||
				got.RetryAfterMs != w.retry || got.ResetAfterMs != w.reset {
				t.Errorf("Decide(cur=%d prev=%d L=%d c=%d W=%d e=%d)\n got  allowed=%v limit=%d remaining=%d retry=%d reset=%d\n want allowed=%v limit=%d remaining=%d retry=%d reset=%d",
					tc.cur, tc.prev, tc.limit, tc.cost, tc.w, tc.e,
					got.Allowed, got.Limit, got.Remaining, got.RetryAfterMs, got.ResetAfterMs,
					w.allowed, tc.limit, w.remaining, w.retry, w.reset)
			}
			model := refDecide(newRefState(tc.cur, tc.prev, tc.w, tc.e), tc.limit, tc.cost, tc.w > 1000)
			if (model != refDecision{w.allowed, w.remaining, w.retry, w.reset}) {
				t.Errorf("hand-worked value disagrees with the model: %v", model)
			}
		})
	}
}

// TestDecidePure checks that Decide and Used are pure: the same input gives the same
// answer, and a peek's answer does not depend on anything but the counts.
func TestDecidePure(t *testing.T) {
	c := engine.Counts{Current: 4, Previous: 6}
	a := engine.Decide(c, 10, 2, 100, 30)
	b := engine.Decide(c, 10, 2, 100, 30)
	if a != b {
		t.Fatalf("Decide is not deterministic: %+v vs %+v", a, b)
	}
	// used = 4 + 6*70/100 = 8.2.
	if u := engine.Used(c, 100, 30); u != 8 {
		t.Fatalf("Used = %d, want 8", u)
	}
}

// TestStatusPeek checks Status.Peek against a cost-0 Decide.
func TestStatusPeek(t *testing.T) {
	st := engine.Status{Sequence: 5, ElapsedMs: 250, WindowMs: 1000, CurrentRegional: 2, CurrentImported: 1, PreviousRegional: 4, PreviousImported: 4}
	if c := st.Counts(); c.Current != 3 || c.Previous != 8 {
		t.Fatalf("Counts = %+v, want {3 8}", c)
	}
	// used = 3 + 8*750/1000 = 9.
	if u := st.Used(); u != 9 {
		t.Fatalf("Used = %d, want 9", u)
	}
	got := st.Peek(10)
	want := engine.Decision{Allowed: true, Limit: 10, Remaining: 1, ResetAfterMs: 1750}
	if got != want {
		t.Fatalf("Peek(10) = %+v, want %+v", got, want)
	}
	got = st.Peek(8)
	// used 9 > 8: in this cell needs 3 + 8*(750-t)/1000 <= 8: t >= 125.
	want = engine.Decision{Allowed: false, Limit: 8, Remaining: 0, RetryAfterMs: 125, ResetAfterMs: 1750}
	if got != want {
		t.Fatalf("Peek(8) = %+v, want %+v", got, want)
	}
}
