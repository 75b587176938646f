package main

// Region mode: R origins r0..rR-1 on loopback, each with --peer for all the others, share
// usage through G-Counter components (SPEC section 6). For every window of -windows:
//
//   - even overload: -load x the limit, spread evenly over the regions, paced at a steady
//     rate over the first -span (80%) of one fresh cell, so that the regions have time to
//     exchange their counts while the load arrives;
//   - skewed overload, at the same time on another key: -skew (70%) of the same load to r0,
//     the rest shared by the other regions.
//
// Both print admitted/limit: how much the regions admitted in total for one cell whose
// limit they all enforce. The excess over 1 is what passed in one region before it had
// imported the others' counts (publication is batched every --publish-interval).
//
// Then the convergence lag: r0 counts a fresh cell past the publish threshold in one
// RL.LIMIT with COST, and every other region is polled every 10 ms with RL.STATUS until
// its current_imported shows that cost. The lag runs from just before the RL.LIMIT to the
// first poll that shows it (so it includes up to 10 ms of polling granularity); it is
// printed per trial and as min/median/max, with its ratio to the publish interval.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

type regionFlags struct {
	regions          int
	windows          string
	publishInterval  time.Duration
	publishThreshold float64
	span             float64
	skew             float64
	lagTrials        int

	limit   int
	load    float64
	clients int
	bin     string
}

func runRegions(f regionFlags) error {
	windows, err := parseWindows(f.windows)
	switch {
	case err != nil:
		return err
	case f.limit < 1:
		return fmt.Errorf("-limit must be at least 1")
	case f.load <= 0:
		return fmt.Errorf("-load must be positive")
	case f.clients < 1:
		return fmt.Errorf("-clients must be at least 1")
	case f.span <= 0 || f.span > 1:
		return fmt.Errorf("-span must be in (0, 1]")
	case f.skew < 0 || f.skew > 1:
		return fmt.Errorf("-skew must be from 0 to 1")
	case f.publishInterval <= 0:
		return fmt.Errorf("-publish-interval must be positive")
	case f.publishThreshold < 0 || f.publishThreshold > 1:
		return fmt.Errorf("-publish-threshold must be from 0 to 1")
	}

	bin, cleanup, err := buildBinary(f.bin)
	if err != nil {
		return err
	}
	defer cleanup()

	names := make([]string, f.regions)
	addrs := make([]string, f.regions)
	for i := range names {
		names[i], addrs[i] = fmt.Sprintf("r%d", i), freeAddr()
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	var cs []*redis.Client
	for i := range names {
		var peers []string
		for j := range names {
			if j != i {
				peers = append(peers, names[j]+"="+addrs[j])
			}
		}
		procs = append(procs, start(bin, "--region", names[i], "--listen", addrs[i],
			"--peer", strings.Join(peers, ","), "--cluster-secret", "bench",
			"--data-dir", "", "--metrics-listen", "",
			"--publish-interval", f.publishInterval.String(),
			"--publish-threshold", strconv.FormatFloat(f.publishThreshold, 'g', -1, 64)))
		// Two runs (even and skewed) share each region's pool.
		c := redis.NewClient(&redis.Options{Addr: addrs[i], PoolSize: 2 * f.clients, Protocol: 2})
		defer c.Close()
		cs = append(cs, c)
	}
	for _, c := range cs {
		if err := waitPing(c); err != nil {
			return err
		}
	}
	if err := waitPeers(cs, 10*time.Second); err != nil {
		fmt.Println("warning:", err)
	}

	fmt.Printf("regions %d (%s), limit %d, load %.1fx, windows %s, publish-interval %s, publish-threshold %g,\n"+
		"  %d clients per region per run, load paced over the first %.0f%% of a fresh cell, skewed run: %.0f%% to r0, lag trials %d\n",
		f.regions, strings.Join(names, ", "), f.limit, f.load, joinDurations(windows), f.publishInterval,
		f.publishThreshold, f.clients, 100*f.span, 100*f.skew, f.lagTrials)

	for _, w := range windows {
		overload(cs, f, w)
	}
	return convergenceLag(cs, f)
}

// overload runs the even and the skewed overload at once, on two keys, inside one fresh
// cell of window w.
func overload(cs []*redis.Client, f regionFlags, w time.Duration) {
	n := len(cs)
	total := int(math.Round(f.load * float64(f.limit)))
	even := split(total, n)
	skewed := make([]int, n)
	skewed[0] = int(math.Round(f.skew * float64(total)))
	copy(skewed[1:], split(total-skewed[0], n-1))

	waitFreshCell(w)
	t0 := time.Now()
	ms := w.Milliseconds()
	cellEnd := time.UnixMilli((t0.UnixMilli()/ms + 1) * ms)
	span := time.Duration(f.span * float64(w))
	win := fmt.Sprintf("%dms", ms)
	stamp := t0.UnixNano()
	evenKey, skewKey := fmt.Sprintf("even:%d", stamp), fmt.Sprintf("skew:%d", stamp)
	fmt.Printf("window %s: cell starting %s, %d requests per run paced over %s\n",
		fmtWindow(w), cellEnd.Add(-w).Format("15:04:05.000"), total, span)

	var er, sr pacedResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); er = paced(cs, f.clients, evenKey, f.limit, win, even, t0, span) }()
	go func() { defer wg.Done(); sr = paced(cs, f.clients, skewKey, f.limit, win, skewed, t0, span) }()
	wg.Wait()
	er.print("even", f)
	sr.print("skewed", f)
	if time.Now().After(cellEnd) {
		fmt.Println("  warning: sending outlasted the cell; the figures mix two cells")
		return
	}

	// How far the regions' views have converged shortly after the load stopped.
	wait := min(2*f.publishInterval, time.Until(cellEnd)-200*time.Millisecond)
	if wait <= 0 {
		return
	}
	time.Sleep(wait)
	fmt.Printf("  used as seen by each region %s after sending (sum admitted: even %d, skewed %d):\n",
		wait.Round(time.Millisecond), er.total(), sr.total())
	for _, k := range []struct{ name, key string }{{"even", evenKey}, {"skewed", skewKey}} {
		var views []string
		for i, c := range cs {
			st, err := status(c, k.key, win)
			if err != nil {
				views = append(views, fmt.Sprintf("r%d error %v", i, err))
				continue
			}
			views = append(views, fmt.Sprintf("r%d %d (own %d + imported %d)", i, st["used"],
				st["current_regional"], st["current_imported"]))
		}
		fmt.Printf("    %-6s %s\n", k.name, strings.Join(views, ", "))
	}
}

type pacedResult struct {
	sent, admitted []int64
	errors         int64
	late           time.Duration // the most a request was sent after its slot
	took           time.Duration
	limit          int
}

func (r pacedResult) total() (n int64) {
	for _, a := range r.admitted {
		n += a
	}
	return n
}

func (r pacedResult) print(name string, f regionFlags) {
	var sent int64
	for _, s := range r.sent {
		sent += s
	}
	fmt.Printf("  %-6s %.1fx: sent %d (%s), admitted %d (%s), admitted/limit = %.4f  [sending %s, max lateness %s",
		name, f.load, sent, joinInts(r.sent), r.total(), joinInts(r.admitted),
		float64(r.total())/float64(r.limit), r.took.Round(time.Millisecond), r.late.Round(time.Millisecond))
	if r.errors > 0 {
		fmt.Printf(", %d errors", r.errors)
	}
	fmt.Println("]")
}

// paced sends shares[i] requests for key to region i, request k of region i at
// t0 + span*k/shares[i], with clients concurrent senders per region.
func paced(cs []*redis.Client, clients int, key string, limit int, win string, shares []int, t0 time.Time, span time.Duration) pacedResult {
	r := pacedResult{sent: make([]int64, len(cs)), admitted: make([]int64, len(cs)), limit: limit}
	var errs, late atomic.Int64
	sent, admitted := make([]atomic.Int64, len(cs)), make([]atomic.Int64, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		n := int64(shares[i])
		var next atomic.Int64
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := next.Add(1) - 1
					if k >= n {
						return
					}
					at := t0.Add(time.Duration(int64(span) / n * k))
					if d := time.Until(at); d > 0 {
						time.Sleep(d)
					} else if l := int64(-d); l > late.Load() {
						for old := late.Load(); l > old && !late.CompareAndSwap(old, l); old = late.Load() {
						}
					}
					res, err := c.Do(context.Background(), "RL.LIMIT", key, limit, win).Int64Slice()
					sent[i].Add(1)
					switch {
					case err != nil || len(res) != 5:
						errs.Add(1)
					case res[0] == 1:
						admitted[i].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	for i := range cs {
		r.sent[i], r.admitted[i] = sent[i].Load(), admitted[i].Load()
	}
	r.took = time.Since(t0)
	r.errors = errs.Load()
	r.late = time.Duration(late.Load())
	return r
}

// convergenceLag measures, lagTrials times, how long after r0 counts a fresh cell past the
// publish threshold every other region shows it in its imported count.
func convergenceLag(cs []*redis.Client, f regionFlags) error {
	threshold := f.publishThreshold
	if threshold <= 0 {
		threshold = 0.2 // what the origins use for 0
	}
	cost := min(int64(math.Floor(threshold*float64(f.limit)))+1, int64(f.limit))
	const win = "60000ms"
	bound := 5*f.publishInterval + 2*time.Second
	fmt.Printf("convergence lag: r0 counts COST %d of limit %d (threshold %g) on a fresh key, polled every 10ms at %d other regions (bound %s)\n",
		cost, f.limit, threshold, len(cs)-1, bound)

	var lags []time.Duration
	missed := 0
	for t := range f.lagTrials {
		// A random pause, so that the trials sample the phase of the publish ticker.
		time.Sleep(time.Duration(rand.Int64N(int64(f.publishInterval))))
		key := fmt.Sprintf("lag:%d:%d", time.Now().UnixNano(), t)
		t0 := time.Now()
		res, err := cs[0].Do(context.Background(), "RL.LIMIT", key, f.limit, win, "COST", cost).Int64Slice()
		if err != nil || len(res) != 5 || res[0] != 1 {
			return fmt.Errorf("lag trial %d: RL.LIMIT at r0: %v %v", t+1, res, err)
		}
		st, err := status(cs[0], key, win)
		if err != nil {
			return fmt.Errorf("lag trial %d: RL.STATUS at r0: %v", t+1, err)
		}
		seq := st["sequence"]
		got := make([]time.Duration, len(cs))
		var wg sync.WaitGroup
		for i := 1; i < len(cs); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = -1
				for time.Since(t0) < bound {
					if st, err := status(cs[i], key, win); err == nil &&
						(st["sequence"] == seq && st["current_imported"] >= cost ||
							st["sequence"] == seq+1 && st["previous_imported"] >= cost) {
						got[i] = time.Since(t0)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		var parts []string
		for i := 1; i < len(cs); i++ {
			if got[i] < 0 {
				missed++
				parts = append(parts, fmt.Sprintf("r%d not within %s", i, bound))
				continue
			}
			lags = append(lags, got[i])
			parts = append(parts, fmt.Sprintf("r%d %dms (%.2fx)", i, got[i].Milliseconds(), ratio(got[i], f.publishInterval)))
		}
		fmt.Printf("  trial %d: %s\n", t+1, strings.Join(parts, ", "))
	}
	if len(lags) == 0 {
		fmt.Println("  no region saw r0's count")
		return nil
	}
	slices.Sort(lags)
	lo, med, hi := lags[0], median(lags), lags[len(lags)-1]
	fmt.Printf("  lag over %d samples: min %dms, median %dms, max %dms; / publish-interval %s: min %.2fx, median %.2fx, max %.2fx (goal < 2x)\n",
		len(lags), lo.Milliseconds(), med.Milliseconds(), hi.Milliseconds(), f.publishInterval,
		ratio(lo, f.publishInterval), ratio(med, f.publishInterval), ratio(hi, f.publishInterval))
	if missed > 0 {
		fmt.Printf("  %d samples not seen within %s\n", missed, bound)
	}
	return nil
}

// status reads RL.STATUS (RESP2: names and values) into a map of its integer fields.
func status(c *redis.Client, key, win string) (map[string]int64, error) {
	v, err := c.Do(context.Background(), "RL.STATUS", key, win).Slice()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		name, _ := v[i].(string)
		if n, ok := v[i+1].(int64); ok {
			out[name] = n
		}
	}
	return out, nil
}

// waitPeers waits until every origin reports all its peers up in INFO ratchet, so that
// the first measurements do not include connection backoff.
func waitPeers(cs []*redis.Client, bound time.Duration) error {
	ready, ok := waitInfo(cs, bound, 50*time.Millisecond, func(info string) bool { return strings.Count(info, ",up=1,") == len(cs)-1 })
	if !ok {
		return fmt.Errorf("only %d of %d origins report all peers up after %s", ready, len(cs), bound)
	}
	return nil
}

func parseWindows(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := time.ParseDuration(p)
		if err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
			return nil, fmt.Errorf("-windows: %q is not a whole number of milliseconds", p)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-windows: no window given")
	}
	return out, nil
}

// split divides total into n shares that differ by at most one.
func split(total, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = total / n
		if i < total%n {
			out[i]++
		}
	}
	return out
}

func median(sorted []time.Duration) time.Duration {
	m := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[m]
	}
	return (sorted[m-1] + sorted[m]) / 2
}

func ratio(d, interval time.Duration) float64 { return float64(d) / float64(interval) }

func joinInts(v []int64) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, "/")
}

func joinDurations(v []time.Duration) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = fmtWindow(d)
	}
	return strings.Join(parts, ",")
}

// fmtWindow prints 60s rather than 1m0s.
func fmtWindow(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
