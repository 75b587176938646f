package engine

import (
	"errors"
	"math"
	"math/big"
	"strconv"

	"github.com/ratchet/ratchet/keyspace"
)

// CL.THROTTLE: the generic cell rate algorithm (GCRA) as redis-cell computes it, so that
// its replies are the same integers.
//
// A key's state is its theoretical arrival time (TAT), stored in the counter keyspace as
// redis-cell stores it: the decimal nanoseconds since the Unix epoch, with a TTL of the
// time until the TAT (so GET shows it and DEL resets it). Times are nanoseconds in int64
// (the clock's milliseconds times 10^6); the products redis-cell computes in wrapping
// 64-bit integers (period*(max_burst+1), period*quantity) wrap here too, and the sums of
// times that would leave int64 (about year 2262) are refused with ErrThrottleRange where
// redis-cell would compute with wider times or abort.

// ThrottleParams are CL.THROTTLE's arguments after the key.
type ThrottleParams struct {
	MaxBurst int64
	Count    int64 // count per period
	Period   int64 // seconds
	Quantity int64 // 0 peeks
}

// ThrottleResult is a CL.THROTTLE decision. RetryAfterNs and ResetAfterNs are exact; the
// reply's seconds come from Seconds.
type ThrottleResult struct {
	Limited      bool
	Limit        int64 // max_burst + 1
	Remaining    int64
	RetryAfterNs int64 // -1 s when allowed, or when the quantity can never be allowed
	ResetAfterNs int64
}

// Seconds returns the reply's retry_after and reset_after: whole seconds, plus one when
// the nanoseconds have a positive millisecond part (redis-cell's rounding: 1.0004 s is 1,
// 1.001 s is 2, -1 s is -1).
func (r ThrottleResult) Seconds() (retryAfter, resetAfter int64) {
	return cellSeconds(r.RetryAfterNs), cellSeconds(r.ResetAfterNs)
}

func cellSeconds(ns int64) int64 {
	secs, nanos := ns/1e9, ns%1e9
	s := satInt64(float64(secs) + float64(nanos)/1e9)
	if nanos/1e6 > 0 {
		s++
	}
	return s
}

// Errors of CL.THROTTLE. The command layer writes redis-cell's reply for each.
var (
	// ErrZeroRate: a count or period of 0.
	ErrZeroRate = errors.New("zero rates are not supported")
	// ErrThrottleRange: period*(max_burst+1) or the theoretical arrival time would leave
	// int64 nanoseconds (about year 2262).
	ErrThrottleRange = errors.New("throttle times out of range")
	// ErrThrottleExpire: redis-cell's answer when the new TTL is negative (a negative
	// quantity, count or period): the TAT is written without a TTL, then this error.
	ErrThrottleExpire = errors.New("negative key expiry")
	// ErrTATEmpty, ErrTATDigit and ErrTATTooLarge: the key holds a value that is not a
	// stored TAT (empty, a non-digit, or more than 64 bits), as Rust's u64 parse sees it.
	ErrTATEmpty    = errors.New("stored TAT is empty")
	ErrTATDigit    = errors.New("stored TAT has a non-digit")
	ErrTATTooLarge = errors.New("stored TAT exceeds 64 bits")
)

// emissionNs is the nanoseconds between two requests at count per period seconds, as
// redis-cell's Rate::per_period computes it: 0 when count or period is 0, else the
// quotient of the exact nanoseconds and count as float64, truncated (saturating).
func emissionNs(count, period int64) int64 {
	if count == 0 || period == 0 {
		return 0
	}
	var ns float64
	if period <= math.MaxInt64/1_000_000_000 && period >= math.MinInt64/1_000_000_000 {
		ns = float64(period * 1e9)
	} else {
		exact := new(big.Int).Mul(big.NewInt(period), big.NewInt(1e9))
		ns, _ = new(big.Float).SetInt(exact).Float64()
	}
	return satInt64(ns / float64(count))
}

// satInt64 converts f as Rust's `f as i64` does: truncated, saturating, NaN is 0.
func satInt64(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64: // 2^63 and above
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	default:
		return int64(f)
	}
}

func addOK(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func subOK(a, b int64) (int64, bool) {
	d := a - b
	return d, (d < a) == (b > 0)
}

// Throttle decides CL.THROTTLE on key of workspace ws of kv at its clock's reading: see
// ThrottleTx.
func Throttle(kv *keyspace.KV, ws string, key []byte, p ThrottleParams) (ThrottleResult, error) {
	var res ThrottleResult
	k := [1][]byte{key}
	err := kv.Do(ws, k[:], func(tx *keyspace.Tx) error {
		var err error
		res, err = ThrottleTx(tx, 0, p)
		return err
	})
	return res, err
}

// ThrottleTx decides CL.THROTTLE on key i of tx at its Now, with redis-cell's results: a request of
// Quantity is limited when its TAT, advanced by Quantity emission intervals, would pass
// Now by more than the burst tolerance; when allowed the new TAT is stored with a TTL
// until it. Quantity 0 changes nothing. The errors are ErrZeroRate, ErrThrottleRange,
// ErrThrottleExpire, ErrFull (a new key beyond --max-memory), a redis-cell parse error
// when the key holds a string other than a TAT, and keyspace.ErrWrongType when it holds
// another type.
func ThrottleTx(tx *keyspace.Tx, i int, p ThrottleParams) (ThrottleResult, error) {
	emission := emissionNs(p.Count, p.Period)
	limit := p.MaxBurst + 1 // wraps, as redis-cell's release build
	res := ThrottleResult{Limit: limit, RetryAfterNs: -1e9, ResetAfterNs: -1e9}
	if emission == 0 {
		return res, ErrZeroRate
	}
	dvt := emission * limit // the delay variation tolerance; wraps as redis-cell's
	inc := emission * p.Quantity
	if tx.Now() > math.MaxInt64/1_000_000 || tx.Now() < math.MinInt64/1_000_000 {
		return res, ErrThrottleRange
	}
	now := tx.Now() * 1e6
	tat := now
	if v, ok := tx.Get(i); ok {
		t, err := parseTAT(v)
		if err != nil {
			return res, err
		}
		tat = t
	} else if tx.Kind(i) != keyspace.KindNone {
		return res, keyspace.ErrWrongType // a hash, list, set or sorted set is no TAT
	}
	newTat, ok1 := addOK(max(now, tat), inc)
	allowAt, ok2 := subOK(newTat, dvt)
	diff, ok3 := subOK(now, allowAt)
	if !ok1 || !ok2 || !ok3 {
		return res, ErrThrottleRange
	}
	var ttl int64
	var ok bool
	if diff < 0 {
		if inc <= dvt {
			res.RetryAfterNs = -diff
		}
		res.Limited = true
		if ttl, ok = subOK(tat, now); !ok {
			return res, ErrThrottleRange
		}
	} else {
		if ttl, ok = subOK(newTat, now); !ok {
			return res, ErrThrottleRange
		}
		if p.Quantity != 0 {
			if err := storeTAT(tx, i, newTat, ttl); err != nil {
				return res, err
			}
		}
	}
	next, ok := subOK(dvt, ttl)
	if !ok {
		return res, ErrThrottleRange
	}
	if emission != math.MinInt64 && next > -emission {
		res.Remaining = satInt64(float64(next/1000) / float64(emission/1000))
	}
	res.ResetAfterNs = ttl
	return res, nil
}

// storeTAT writes tat (as redis-cell: the nanoseconds as an unsigned decimal) with a TTL of
// ttl truncated to milliseconds. A negative TTL leaves the key without one and answers
// ErrThrottleExpire, as redis-cell's module does.
func storeTAT(tx *keyspace.Tx, i int, tat, ttl int64) error {
	var buf [20]byte
	v := strconv.AppendUint(buf[:0], uint64(tat), 10)
	ms := ttl / 1e6
	if ms < 0 {
		if err := tx.Set(i, v, 0); err != nil {
			return err
		}
		return ErrThrottleExpire
	}
	return tx.Set(i, v, tx.Now()+ms)
}

// parseTAT reads a stored TAT with the errors of Rust's u64 parse, which redis-cell
// answers; one past int64 is out of range here.
func parseTAT(v []byte) (int64, error) {
	if len(v) == 0 {
		return 0, ErrTATEmpty
	}
	digits := v
	if digits[0] == '+' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, ErrTATDigit
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, ErrTATDigit
		}
		if n > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, ErrTATTooLarge
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxInt64 {
		return 0, ErrThrottleRange
	}
	return int64(n), nil
}
