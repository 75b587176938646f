// Command load sends rate-limit requests to one RESP address from a fixed number of
// connections, each with one request in flight (as redis-benchmark -c N -P 1), either as
// fast as the replies come or paced to a target rate, and prints one line: requests/s and
// the exact p50, p99 and p99.9 of the measured requests (every latency is kept and
// sorted), the share of requests slower than -cross (those that crossed a network hop), and,
// when asked, the servers' CPU per request and an edge's origin calls per request.
//
// Keys are -prefix:N with N drawn at random from [0, -keys), or, with -keys 0, a new N for
// every request (every key first seen). With -warm, every key of [0, -keys) is sent once,
// in order and unmeasured, before the measured requests.
//
//	go run ./bench/load -addr 127.0.0.1:6380 -keys 1000 -warm -n 20000
//	go run ./bench/load -addr 127.0.0.1:6380 -keys 20000 -warm -rate 3000 -workers 200 -n 60000
//	go run ./bench/load -addr 127.0.0.1:16379 -cmd evalsha -sha SHA -keys 0 -n 5000
//	go run ./bench/load -addr 127.0.0.1:16379 -ping 20      # round trip of PING
//
// bench/distance.sh runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds on what one run may hold in memory.
const (
	maxRequests = 10_000_000
	maxWorkers  = 10_000
)

type config struct {
	addr    string
	workers int
	rate    float64       // requests/s; 0: as fast as the replies come
	n       int           // measured requests
	dur     time.Duration // measured requests stop after it; 0: never
	keys    int           // key space; 0: a new key per request
	warm    bool
	prefix  string
	cmd     string // "limit" (RL.LIMIT) or "evalsha"
	sha     string
	limit   uint64
	window  uint64
	cross   time.Duration
	pids    string // server pids whose CPU is reported per request
	proxy   string // pids reported apart (the latency proxy)
	clkTck  int
	metrics string // an edge's /metrics URL: its origin calls per request
	ping    int
	seed    uint64
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:6380", "RESP address")
	flag.IntVar(&c.workers, "workers", 50, "connections, one request in flight on each")
	flag.Float64Var(&c.rate, "rate", 0, "requests/s over all connections; 0: as fast as the replies come")
	flag.IntVar(&c.n, "n", 20000, "measured requests")
	flag.DurationVar(&c.dur, "duration", 0, "stop the measured requests after this long, even short of -n; 0: never")
	flag.IntVar(&c.keys, "keys", 1000, "random keys in [0, keys); 0: every request a new key")
	flag.BoolVar(&c.warm, "warm", false, "send every key once, in order and unmeasured, first")
	flag.StringVar(&c.prefix, "prefix", "key", "key prefix")
	flag.StringVar(&c.cmd, "cmd", "limit", "limit (RL.LIMIT key limit window) or evalsha (EVALSHA sha 1 key limit window 1)")
	flag.StringVar(&c.sha, "sha", "", "the script of -cmd evalsha")
	flag.Uint64Var(&c.limit, "limit", 1_000_000_000_000, "the limit")
	flag.Uint64Var(&c.window, "window", 60000, "the window in ms")
	flag.DurationVar(&c.cross, "cross", 10*time.Millisecond, "a request at least this slow counts as crossing the hop")
	flag.StringVar(&c.pids, "pids", "", "comma-separated server pids: their CPU (user+sys) per measured request")
	flag.StringVar(&c.proxy, "proxy-pids", "", "comma-separated pids reported apart, as proxy CPU per request")
	flag.IntVar(&c.clkTck, "clk-tck", 100, "clock ticks per second of /proc/PID/stat (getconf CLK_TCK)")
	flag.StringVar(&c.metrics, "metrics", "", "an edge's /metrics URL: its origin reads, hand-offs and failed calls per request")
	flag.IntVar(&c.ping, "ping", 0, "only send this many PINGs one after the other and print their round trip")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the random keys")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	switch {
	case c.n < 1 || c.n > maxRequests:
		return fmt.Errorf("-n %d: want 1 to %d", c.n, maxRequests)
	case c.workers < 1 || c.workers > maxWorkers:
		return fmt.Errorf("-workers %d: want 1 to %d", c.workers, maxWorkers)
	case c.keys < 0 || c.keys > maxRequests:
		return fmt.Errorf("-keys %d: want 0 to %d", c.keys, maxRequests)
	case c.rate < 0:
		return fmt.Errorf("-rate %g: want 0 or more", c.rate)
	case c.cmd != "limit" && c.cmd != "evalsha":
		return fmt.Errorf("-cmd %q: want limit or evalsha", c.cmd)
	case c.cmd == "evalsha" && c.sha == "":
		return errors.New("-cmd evalsha needs -sha")
	}
	rdb := redis.NewClient(&redis.Options{
		Addr: c.addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		PoolSize: c.workers, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	})
	defer func() { _ = rdb.Close() }()
	if c.ping > 0 {
		return ping(rdb, c.ping)
	}
	conns, err := dial(rdb, c.workers)
	if err != nil {
		return err
	}
	defer func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	}()
	if c.warm && c.keys > 0 {
		if _, err := phase(c, conns, c.keys, 0, func(_ *rand.Rand, i int) int { return i }, false); err != nil {
			return fmt.Errorf("warm: %w", err)
		}
	}
	key := func(r *rand.Rand, _ int) int { return r.IntN(max(c.keys, 1)) }
	if c.keys == 0 {
		key = func(_ *rand.Rand, i int) int { return i }
	}
	before, err := probe(c)
	if err != nil {
		return err
	}
	res, err := phase(c, conns, c.n, c.dur, key, true)
	if err != nil {
		return err
	}
	after, err := probe(c)
	if err != nil {
		return err
	}
	fmt.Println(res.line(c, before, after))
	return nil
}

// dial opens one connection per worker, each checked with a PING.
func dial(rdb *redis.Client, workers int) ([]*redis.Conn, error) {
	conns := make([]*redis.Conn, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range conns {
		conns[w] = rdb.Conn()
		wg.Go(func() { errs[w] = conns[w].Ping(context.Background()).Err() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conns, nil
}

// ping prints the min, median and max round trip of count PINGs sent one after the other.
func ping(rdb *redis.Client, count int) error {
	lat := make([]time.Duration, 0, count)
	for range count {
		start := time.Now()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	fmt.Printf("rtt_min=%.3f rtt_p50=%.3f rtt_max=%.3f\n", ms(lat[0]), ms(quantile(lat, 0.5)), ms(lat[len(lat)-1]))
	return nil
}

// result is what one measured phase saw.
type result struct {
	lat            []time.Duration // sorted
	elapsed        time.Duration
	errors, denied int64
}

// phase sends count requests (request i at i/rate after the start when paced) over conns,
// none after dur if it is not 0, the key of request i being keyOf(rng, i), and keeps every
// latency when record is set.
func phase(c config, conns []*redis.Conn, count int, dur time.Duration, keyOf func(*rand.Rand, int) int, record bool) (result, error) {
	var next, sent, errs, denied atomic.Int64
	var firstErr atomic.Pointer[error]
	lats := make([][]time.Duration, len(conns))
	var wg sync.WaitGroup
	start := time.Now()
	for w, cn := range conns {
		rng := rand.New(rand.NewPCG(c.seed, uint64(w)))
		if record {
			lats[w] = make([]time.Duration, 0, count/len(conns)+1)
		}
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= count || dur > 0 && time.Since(start) >= dur {
					return
				}
				if c.rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / c.rate * float64(time.Second)))))
				}
				t := time.Now()
				allowed, err := send(c, cn, keyOf(rng, i))
				d := time.Since(t)
				sent.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				case !allowed:
					denied.Add(1)
				}
				if record {
					lats[w] = append(lats[w], d)
				}
			}
		})
	}
	wg.Wait()
	res := result{elapsed: time.Since(start), errors: errs.Load(), denied: denied.Load()}
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "load: %d errors, the first: %v\n", res.errors, *e)
	}
	res.lat = slices.Concat(lats...)
	slices.Sort(res.lat)
	if res.errors*100 > sent.Load() {
		return res, fmt.Errorf("%d of %d requests failed", res.errors, sent.Load())
	}
	if record && len(res.lat) == 0 {
		return res, errors.New("no request was measured")
	}
	return res, nil
}

// send makes one request and reports whether it was allowed.
func send(c config, cn *redis.Conn, n int) (bool, error) {
	key := c.prefix + ":" + strconv.Itoa(n)
	var cmd *redis.Cmd
	if c.cmd == "evalsha" {
		cmd = cn.Do(context.Background(), "EVALSHA", c.sha, 1, key, c.limit, c.window, 1)
	} else {
		cmd = cn.Do(context.Background(), "RL.LIMIT", key, c.limit, c.window)
	}
	reply, err := cmd.Slice()
	if err != nil {
		return false, err
	}
	if len(reply) == 0 {
		return false, errors.New("empty reply")
	}
	allowed, ok := reply[0].(int64)
	if !ok {
		return false, fmt.Errorf("reply %v: the first element is not an integer", reply)
	}
	return allowed == 1, nil
}

// reading is what probe takes before and after the measured requests.
type reading struct {
	ticks, proxyTicks int64
	calls             originCalls
}

// originCalls are an edge's calls to its origin, from its /metrics: those a request
// waits on, reads (a cold, stale or strict tuple) and decides (hand-offs), whatever
// their outcome, and the failed calls of any kind (past --origin-timeout, most often;
// while the origin is in backoff the edge decides alone, with --degraded-share).
type originCalls struct{ reads, handoffs, failed float64 }

func probe(c config) (reading, error) {
	var r reading
	var err error
	if r.ticks, err = ticks(c.pids); err != nil {
		return r, err
	}
	if r.proxyTicks, err = ticks(c.proxy); err != nil {
		return r, err
	}
	if c.metrics != "" {
		r.calls, err = scrape(c.metrics)
	}
	return r, err
}

// ticks sums user+sys clock ticks of the comma-separated pids (fields 14 and 15 of
// /proc/PID/stat).
func ticks(pids string) (int64, error) {
	var sum int64
	for p := range strings.SplitSeq(pids, ",") {
		if p == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			return 0, fmt.Errorf("cpu of %s: %w", p, err)
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3
		if len(f) < 13 {
			return 0, fmt.Errorf("cpu of %s: %d fields in /proc/%s/stat", p, len(f)+2, p)
		}
		for _, v := range f[11:13] {
			t, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu of %s: %w", p, err)
			}
			sum += t
		}
	}
	return sum, nil
}

// scrape reads an edge's origin calls from its /metrics.
func scrape(url string) (originCalls, error) {
	var oc originCalls
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return oc, fmt.Errorf("metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return oc, fmt.Errorf("metrics: %w", err)
	}
	for line := range strings.Lines(string(body)) {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != "ratchet_origin_op_duration_seconds_count" {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return oc, fmt.Errorf("metrics: %q: %w", line, err)
		}
		switch {
		case strings.Contains(labels, `kind="read"`):
			oc.reads += v
		case strings.Contains(labels, `kind="decide"`):
			oc.handoffs += v
		}
		if strings.Contains(labels, `outcome="error"`) {
			oc.failed += v
		}
	}
	return oc, nil
}

// line formats the result as key=value fields; a field that was not measured is "-".
func (r result) line(c config, before, after reading) string {
	n := float64(len(r.lat))
	crossed, _ := slices.BinarySearch(r.lat, c.cross)
	// perReq formats v per request with prec decimals (0: v itself, not per request).
	perReq := func(ok bool, v float64, prec int) string {
		if !ok {
			return "-"
		}
		if prec > 0 {
			v /= n
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	us := 1e6 / float64(c.clkTck)
	return fmt.Sprintf("requests=%d errors=%d denied=%d seconds=%.2f rps=%.0f p50=%.3f p99=%.3f p999=%.3f max=%.3f crossed=%.4f server_us=%s proxy_us=%s reads=%s handoffs=%s origin_errors=%s",
		len(r.lat), r.errors, r.denied, r.elapsed.Seconds(), n/r.elapsed.Seconds(),
		ms(quantile(r.lat, 0.5)), ms(quantile(r.lat, 0.99)), ms(quantile(r.lat, 0.999)), ms(r.lat[len(r.lat)-1]),
		1-float64(crossed)/n,
		perReq(c.pids != "", float64(after.ticks-before.ticks)*us, 2), perReq(c.proxy != "", float64(after.proxyTicks-before.proxyTicks)*us, 2),
		perReq(c.metrics != "", after.calls.reads-before.calls.reads, 4), perReq(c.metrics != "", after.calls.handoffs-before.calls.handoffs, 4),
		perReq(c.metrics != "", after.calls.failed-before.calls.failed, 0))
}

// quantile returns the nearest-rank q-quantile of sorted (not empty).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(float64(len(sorted))*q)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
