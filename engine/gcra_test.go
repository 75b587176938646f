package engine_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

const sec = int64(1e9)

// TestThrottleRedisCellCases replays redis-cell's it_rate_limits table (src/cell/mod.rs):
// a limit of 5 (max_burst 4) at 1 per second, requests at the given offsets. Its store
// never expires keys; ours does, which changes nothing here.
func TestThrottleRedisCellCases(t *testing.T) {
	const start = 1_700_000_000_000
	clock := engine.NewManualClock(start)
	kv := engine.New(clock, engine.Config{}).KV()
	cases := []struct {
		atMs, quantity, remaining int64
		reset, retry              int64 // ns
		limited                   bool
	}{
		{0, 6, 5, 0, -sec, true}, // never more than the maximum
		{0, 1, 4, 1 * sec, -sec, false},
		{0, 1, 3, 2 * sec, -sec, false},
		{0, 1, 2, 3 * sec, -sec, false},
		{0, 1, 1, 4 * sec, -sec, false},
		{0, 1, 0, 5 * sec, -sec, false},
		{0, 1, 0, 5 * sec, 1 * sec, true},
		{3000, 1, 2, 3000e6, -sec, false},
		{3100, 1, 1, 3900e6, -sec, false},
		{4000, 1, 1, 4000e6, -sec, false},
		{8000, 1, 4, 1000e6, -sec, false},
		{9500, 1, 4, 1000e6, -sec, false},
		{9500, 0, 4, 1 * sec, -sec, false}, // a peek
		{9500, 2, 2, 3 * sec, -sec, false},
		{9500, 5, 2, 3 * sec, 3 * sec, true},
	}
	for i, c := range cases {
		clock.Set(start + c.atMs)
		r, err := engine.Throttle(kv, "default", []byte("foo"), engine.ThrottleParams{MaxBurst: 4, Count: 1, Period: 1, Quantity: c.quantity})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		want := engine.ThrottleResult{Limited: c.limited, Limit: 5, Remaining: c.remaining, RetryAfterNs: c.retry, ResetAfterNs: c.reset}
		if r != want {
			t.Errorf("case %d: got %+v, want %+v", i, r, want)
		}
	}
}

// TestThrottleE2E replays redis-cell's tests/e2e.rs: max_burst 0, 1 per 2 s.
func TestThrottleE2E(t *testing.T) {
	clock := engine.NewManualClock(1_700_000_000_000)
	kv := engine.New(clock, engine.Config{}).KV()
	p := engine.ThrottleParams{MaxBurst: 0, Count: 1, Period: 2, Quantity: 1}
	type reply [5]int64
	do := func() reply {
		r, err := engine.Throttle(kv, "default", []byte("user123"), p)
		if err != nil {
			t.Fatal(err)
		}
		retry, reset := r.Seconds()
		l := int64(0)
		if r.Limited {
			l = 1
		}
		return reply{l, r.Limit, r.Remaining, retry, reset}
	}
	if got := do(); got != (reply{0, 1, 0, -1, 2}) {
		t.Fatalf("first: %v", got)
	}
	if got := do(); got != (reply{1, 1, 0, 2, 2}) {
		t.Fatalf("second: %v", got)
	}
	clock.Advance(2000)
	if got := do(); got != (reply{0, 1, 0, -1, 2}) {
		t.Fatalf("after retry_after: %v", got)
	}
}

func TestThrottleSecondsRounding(t *testing.T) {
	for _, c := range []struct{ ns, want int64 }{
		{-sec, -1}, {0, 0}, {500_000, 0}, {999_999, 0}, {1_000_000, 1}, {sec, 1}, {sec + 999_999, 1},
		{sec + 1_000_000, 2}, {2*sec - 1, 2}, {-1_500_000_000, -1},
	} {
		if got := (engine.ThrottleResult{RetryAfterNs: c.ns}); func() int64 { r, _ := got.Seconds(); return r }() != c.want {
			r, _ := got.Seconds()
			t.Errorf("%d ns: %d s, want %d", c.ns, r, c.want)
		}
	}
}

func TestThrottleStateAndErrors(t *testing.T) {
	clock := engine.NewManualClock(1_700_000_000_000)
	kv := engine.New(clock, engine.Config{}).KV()
	p := engine.ThrottleParams{MaxBurst: 1, Count: 3, Period: 1, Quantity: 1}
	if _, err := engine.Throttle(kv, "default", []byte("k"), p); err != nil {
		t.Fatal(err)
	}
	var val []byte
	var pttl int64
	_ = kv.Do("default", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error {
		v, _ := tx.Get(0)
		val, pttl = append([]byte(nil), v...), tx.PTTL(0)
		return nil
	})
	// 1/3 s emission interval: TAT = now + 333333333 ns, TTL truncated to 333 ms.
	if want := strconv.FormatInt(1_700_000_000_000*1e6+333_333_333, 10); string(val) != want || pttl != 333 {
		t.Fatalf("state %q pttl %d, want %q 333", val, pttl, want)
	}
	// A peek changes nothing.
	clock.Advance(100)
	if r, err := engine.Throttle(kv, "default", []byte("k"), engine.ThrottleParams{MaxBurst: 1, Count: 3, Period: 1}); err != nil || r.Remaining != 1 {
		t.Fatalf("peek: %+v %v", r, err)
	}
	// After the TTL the key is gone and a fresh burst is allowed.
	clock.Advance(300)
	if r, _ := engine.Throttle(kv, "default", []byte("k"), engine.ThrottleParams{MaxBurst: 1, Count: 3, Period: 1, Quantity: 2}); r.Limited || r.Remaining != 0 {
		t.Fatalf("after expiry: %+v", r)
	}
	// Another workspace has its own state.
	if r, _ := engine.Throttle(kv, "tenant", []byte("k"), engine.ThrottleParams{MaxBurst: 1, Count: 3, Period: 1, Quantity: 2}); r.Limited {
		t.Fatalf("other workspace: %+v", r)
	}

	errCases := []struct {
		p    engine.ThrottleParams
		want error
	}{
		{engine.ThrottleParams{MaxBurst: 1, Count: 0, Period: 1, Quantity: 1}, engine.ErrZeroRate},
		{engine.ThrottleParams{MaxBurst: 1, Count: 1, Period: 0, Quantity: 1}, engine.ErrZeroRate},
		{engine.ThrottleParams{MaxBurst: 1, Count: 2_000_000_000, Period: 1, Quantity: 1}, engine.ErrZeroRate}, // under 1 ns
		{engine.ThrottleParams{MaxBurst: 1, Count: 1, Period: math.MaxInt64, Quantity: 1}, engine.ErrThrottleRange},
		{engine.ThrottleParams{MaxBurst: 1, Count: 1, Period: 1, Quantity: -1}, engine.ErrThrottleExpire},
	}
	for _, c := range errCases {
		if _, err := engine.Throttle(kv, "default", []byte("e"), c.p); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.p, err, c.want)
		}
	}
	// A value that is not a TAT.
	_ = kv.Do("default", [][]byte{[]byte("s")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("abc"), 0) })
	if _, err := engine.Throttle(kv, "default", []byte("s"), p); !errors.Is(err, engine.ErrTATDigit) {
		t.Fatalf("non-integer state: %v", err)
	}
	// A key of another type is refused and kept.
	_ = kv.Do("default", [][]byte{[]byte("h")}, func(tx *keyspace.Tx) error {
		_, err := tx.HSet(0, [][]byte{[]byte("f"), []byte("v")})
		return err
	})
	if _, err := engine.Throttle(kv, "default", []byte("h"), p); !errors.Is(err, keyspace.ErrWrongType) {
		t.Fatalf("a hash's key: %v", err)
	}
}

// TestThrottleExactUnderConcurrency: 4 goroutines throttle one key at a fixed instant; the
// allowed requests are exactly the burst.
func TestThrottleExactUnderConcurrency(t *testing.T) {
	clock := engine.NewManualClock(1_700_000_000_000)
	kv := engine.New(clock, engine.Config{}).KV()
	p := engine.ThrottleParams{MaxBurst: 99, Count: 1, Period: 60, Quantity: 1}
	allowed := make(chan int, 4)
	for range 4 {
		go func() {
			n := 0
			for range 100 {
				if r, err := engine.Throttle(kv, "default", []byte("hot"), p); err == nil && !r.Limited {
					n++
				}
			}
			allowed <- n
		}()
	}
	total := 0
	for range 4 {
		total += <-allowed
	}
	if total != 100 {
		t.Fatalf("allowed %d, want 100", total)
	}
}
