package main

// Edge mode: one origin and -edges edges on loopback serve every round (SPEC sections 4
// and 5). For each limit of -limits, each of -rounds rounds:
//
//   - flood: -load x the limit requests for a fresh key, from -clients concurrent clients
//     per edge, round-robin over the edges, starting 5 ms into a fresh window cell
//     (waitFreshCell); a flood that crosses a cell boundary is run again, at most twice;
//   - the edges deliver their replays (INFO replay_pending 0) and the origin's count of
//     the key is read, which should equal what was admitted;
//   - under: 0.9x the limit for another fresh key, in the same cell when it has enough
//     left (waitRoom), all of which should be admitted.
//
// Every flood waits for a cell boundary, so a run takes about limits x rounds x -window
// (3.5 minutes with the defaults); -window 2s makes it quicker.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

type edgeFlags struct {
	edges, rounds, clients int
	limits                 []int
	window                 time.Duration
	load                   float64
	replay, freshness, bin string
}

// limitResult holds the rounds of one limit.
type limitResult struct {
	limit      int
	sent       int     // flood requests per round
	admitted   []int64 // flood: admitted per round
	underSent  int     // 0.9x requests per round
	under      []int64 // 0.9x: admitted per round
	errors     int64   // failed requests over all rounds
	mismatched int     // rounds whose origin count differed from the admitted requests
}

func runEdges(f edgeFlags) error {
	switch {
	case f.edges < 1:
		return errors.New("-edges must be at least 1")
	case f.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case f.clients < 1:
		return errors.New("-clients must be at least 1")
	case f.load <= 0:
		return errors.New("-load must be positive")
	case f.window < 10*time.Millisecond || f.window%time.Millisecond != 0:
		return errors.New("-window must be a whole number of milliseconds, at least 10ms")
	}
	bin, cleanup, err := buildBinary(f.bin)
	if err != nil {
		return err
	}
	defer cleanup()

	originAddr := freeAddr()
	procs := []*exec.Cmd{start(bin, "--listen", originAddr, "--data-dir", "", "--metrics-listen", "", "--cluster-secret", "bench")}
	defer func() {
		// Edges first, then the origin: edges that lose their origin only log about it.
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].Process.Signal(syscall.SIGTERM)
			_ = procs[i].Wait()
		}
	}()
	origin := redis.NewClient(&redis.Options{Addr: originAddr, Protocol: 2})
	defer origin.Close()
	var edges []*redis.Client
	for i := 0; i < f.edges; i++ {
		addr := freeAddr()
		procs = append(procs, start(bin, "--role", "edge", "--listen", addr, "--origin", originAddr, "--cluster-secret", "bench",
			"--metrics-listen", "", "--node-id", fmt.Sprintf("edge%d", i), "--replay-interval", f.replay, "--freshness", f.freshness))
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: f.clients, Protocol: 2, MaxRetries: -1})
		defer c.Close()
		edges = append(edges, c)
	}
	for _, c := range append([]*redis.Client{origin}, edges...) {
		if err := waitPing(c); err != nil {
			return err
		}
	}
	if err := waitEdgesKnown(edges, 10*time.Second); err != nil {
		fmt.Println("warning:", err)
	}
	openPools(edges, f.clients)

	fmt.Printf("origin 1, edges %d, limits %s, %d rounds each, window %s, flood %.1fx, replay-interval %s, freshness %s, %d clients per edge\n",
		f.edges, joinLimits(f.limits), f.rounds, fmtWindow(f.window), f.load, f.replay, f.freshness, f.clients)
	var results []limitResult
	for _, limit := range f.limits {
		res := limitResult{limit: limit, sent: int(f.load * float64(limit)), underSent: int(0.9 * float64(limit))}
		for r := 1; r <= f.rounds; r++ {
			if err := res.round(edges, origin, f, r); err != nil {
				return err
			}
		}
		results = append(results, res)
	}
	printTable(results, f)
	return nil
}

// round runs round r of one limit and prints its line.
func (res *limitResult) round(edges []*redis.Client, origin *redis.Client, f edgeFlags, r int) error {
	ms := f.window.Milliseconds()
	w := fmt.Sprintf("%dms", ms)
	room := min(2*time.Second, f.window/2)
	var (
		key              string
		admitted, failed int64
		took             time.Duration
		elapsed, attempt int64
	)
	for attempt = 1; ; attempt++ {
		waitFreshCell(f.window)
		begin := time.Now().UnixMilli()
		elapsed = begin % ms
		key = fmt.Sprintf("flood:%d:%d:%d", res.limit, r, time.Now().UnixNano())
		admitted, failed, took = fire(edges, f.clients, key, res.limit, w, res.sent)
		if time.Now().UnixMilli()/ms == begin/ms {
			break
		}
		if attempt == 3 {
			return fmt.Errorf("limit %d round %d: the flood took %s and crossed a cell boundary 3 times; use a longer -window", res.limit, r, took)
		}
		fmt.Printf("limit %d round %d: the flood took %s and crossed a cell boundary; running it again\n", res.limit, r, took)
	}
	res.admitted = append(res.admitted, admitted)
	res.errors += failed

	counted := "origin count unknown"
	if err := waitDrained(edges, 5*time.Second); err != nil {
		counted = err.Error()
	} else if st, err := status(origin, key, w); err != nil {
		counted = "origin RL.STATUS: " + err.Error()
	} else {
		n := st["current_regional"] + st["previous_regional"]
		counted = fmt.Sprintf("origin counts %d", n)
		if n != admitted {
			res.mismatched++
			counted += " (differs)"
		}
	}

	waitRoom(f.window, room)
	underKey := fmt.Sprintf("under:%d:%d:%d", res.limit, r, time.Now().UnixNano())
	under, underFailed, underTook := fire(edges, f.clients, underKey, res.limit, w, res.underSent)
	res.under = append(res.under, under)
	res.errors += underFailed
	if err := waitDrained(edges, 5*time.Second); err != nil {
		fmt.Println("warning:", err)
	}

	fmt.Printf("limit %4d round %d: flood %.1fx at +%dms: sent %d, admitted %d = %.4fx limit, %s, %s%s | 0.9x: sent %d, admitted %d = %.2f%%, %s%s\n",
		res.limit, r, f.load, elapsed, res.sent, admitted, float64(admitted)/float64(res.limit), counted,
		took.Round(time.Millisecond), errorNote(failed), res.underSent, under, share(under, res.underSent),
		underTook.Round(time.Millisecond), errorNote(underFailed))
	return nil
}

// printTable prints the worst round of every limit as a markdown table.
func printTable(results []limitResult, f edgeFlags) {
	fmt.Printf("\nworst of %d rounds, %d edges x %d clients, window %s:\n\n", f.rounds, f.edges, f.clients, fmtWindow(f.window))
	fmt.Printf("| limit | flood %.1fx: worst admitted/limit | worst admitted | mean admitted/limit | 0.9x: worst share admitted | errors | rounds where origin count != admitted |\n", f.load)
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		worst, sum := r.admitted[0], int64(0)
		for _, a := range r.admitted {
			worst = max(worst, a)
			sum += a
		}
		worstUnder := r.under[0]
		for _, a := range r.under {
			worstUnder = min(worstUnder, a)
		}
		fmt.Printf("| %d | %.4f | %d | %.4f | %.2f%% | %d | %d |\n", r.limit, float64(worst)/float64(r.limit), worst,
			float64(sum)/float64(len(r.admitted))/float64(r.limit), share(worstUnder, r.underSent), r.errors, r.mismatched)
	}
}

// waitRoom returns once the current cell of window has at least room left: at once when
// it has, else just after the next cell boundary.
func waitRoom(window, room time.Duration) {
	ms := window.Milliseconds()
	now := time.Now().UnixMilli()
	if left := ms - now%ms; left < room.Milliseconds() {
		time.Sleep(time.Duration(left+5) * time.Millisecond)
	}
}

// waitEdgesKnown waits until every edge reports, in INFO ratchet's origin0 line, that the
// origin knows all the edges, so that the leases it grants are sized for the whole region.
func waitEdgesKnown(edges []*redis.Client, bound time.Duration) error {
	want := "edges=" + strconv.Itoa(len(edges))
	ready, ok := waitInfo(edges, bound, 20*time.Millisecond, func(info string) bool { return hasField(infoLine(info, "origin0"), want) })
	if !ok {
		return fmt.Errorf("only %d of %d edges see %s after %s", ready, len(edges), want, bound)
	}
	return nil
}

// waitDrained waits until no edge holds undelivered replays.
func waitDrained(edges []*redis.Client, bound time.Duration) error {
	ready, ok := waitInfo(edges, bound, 5*time.Millisecond, func(info string) bool { return infoLine(info, "replay_pending") == "0" })
	if !ok {
		return fmt.Errorf("%d edges still have replays pending after %s", len(edges)-ready, bound)
	}
	return nil
}

// openPools opens every client's connections before the first flood, so that the first
// round does not pay for dialing.
func openPools(edges []*redis.Client, clients int) {
	done := make(chan struct{}, len(edges)*clients)
	for _, c := range edges {
		for range clients {
			go func() { _ = c.Ping(context.Background()).Err(); done <- struct{}{} }()
		}
	}
	for range len(edges) * clients {
		<-done
	}
}

// infoLine returns the value of field in the text of INFO ("" when absent).
func infoLine(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

// hasField reports whether a comma-separated list of name=value holds kv.
func hasField(list, kv string) bool {
	for _, p := range strings.Split(list, ",") {
		if p == kv {
			return true
		}
	}
	return false
}

func parseLimits(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-limits: %q is not a positive integer", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-limits: no limit given")
	}
	return out, nil
}

func joinLimits(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func share(admitted int64, sent int) float64 {
	if sent == 0 {
		return 100
	}
	return 100 * float64(admitted) / float64(sent)
}

func errorNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d errors", n)
}
