// Command accuracy measures how exactly Ratchet keeps a limit.
//
// Edge mode (-regions 0 or 1, the default): it starts one origin and N edges on loopback
// and, for every limit of -limits, runs -rounds rounds on the same processes. A round
// floods a fresh key with -load x the limit from all edges inside one window cell, then
// sends 0.9x the limit on another fresh key. It prints one line per round and, at the end,
// a markdown table of the worst admitted/limit under the flood and the worst share
// admitted at 0.9x (see edges.go).
//
//	go run ./bench/accuracy                      # limits 20,100,300,1000, 3 edges, 5 rounds
//	go run ./bench/accuracy -limit 1000 -rounds 10
//
// Region mode (-regions R, R >= 2): it starts R origins r0..rR-1 on loopback, each peered
// with all the others, and for every window of -windows sends -load x the limit, paced
// evenly over the first -span of a fresh cell, spread evenly over the regions and, at the
// same time on another key, skewed (-skew of it to r0); it prints admitted/limit for both.
// Then it measures the convergence lag: how long after r0 counts a cell past the publish
// threshold the other regions show it in current_imported (see regions.go).
//
//	go run ./bench/accuracy -regions 3 -limit 1000 -windows 10s,60s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	var ef edgeFlags
	flag.IntVar(&ef.edges, "edges", 3, "edge processes")
	limit := flag.Int("limit", 1000, "the limit of the flooded key (edge mode: a shortcut for -limits N)")
	limits := flag.String("limits", "20,100,300,1000", "edge mode: limits to measure, comma separated")
	flag.IntVar(&ef.rounds, "rounds", 5, "edge mode: rounds per limit (the table shows the worst)")
	flag.DurationVar(&ef.window, "window", 10*time.Second, "the window")
	load := flag.Float64("load", 3, "flood size as a multiple of the limit")
	clients := flag.Int("clients", 16, "concurrent clients per edge (region mode: per region)")
	flag.StringVar(&ef.replay, "replay-interval", "5ms", "edges' --replay-interval")
	flag.StringVar(&ef.freshness, "freshness", "1s", "edges' --freshness")
	bin := flag.String("bin", "", "ratchet binary (default: go build ./cmd/ratchet)")
	var rf regionFlags
	flag.IntVar(&rf.regions, "regions", 0, "region mode: origins r0..rN-1 peered with each other (0 or 1: edge mode)")
	flag.StringVar(&rf.windows, "windows", "10s,60s", "region mode: windows to measure, comma separated")
	flag.DurationVar(&rf.publishInterval, "publish-interval", time.Second, "region mode: origins' --publish-interval")
	flag.Float64Var(&rf.publishThreshold, "publish-threshold", 0.2, "region mode: origins' --publish-threshold")
	flag.Float64Var(&rf.span, "span", 0.8, "region mode: share of the window over which the load is paced")
	flag.Float64Var(&rf.skew, "skew", 0.7, "region mode: share of the load sent to r0 in the skewed run")
	flag.IntVar(&rf.lagTrials, "lag-trials", 5, "region mode: convergence-lag trials")
	flag.Parse()
	if rf.regions >= 2 {
		rf.limit, rf.load, rf.clients, rf.bin = *limit, *load, *clients, *bin
		if err := runRegions(rf); err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		return
	}
	ef.load, ef.clients, ef.bin = *load, *clients, *bin
	var err error
	if ef.limits, err = parseLimits(*limits); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(2)
	}
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "limit" {
			ef.limits = []int{*limit}
		}
	})
	if err := runEdges(ef); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
}

// fire sends total requests for key, round-robin over the edges, with clients concurrent
// senders per edge, and returns how many were admitted and how many failed.
func fire(edges []*redis.Client, clients int, key string, limit int, window string, total int) (admitted, failed int64, took time.Duration) {
	var next, ok, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range len(edges) * clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(total) {
					return
				}
				res, err := edges[n%int64(len(edges))].Do(context.Background(), "RL.LIMIT", key, limit, window).Int64Slice()
				switch {
				case err != nil || len(res) != 5:
					errs.Add(1)
				case res[0] == 1:
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return ok.Load(), errs.Load(), time.Since(start)
}

// waitFreshCell sleeps until just after the start of the next cell of window, so that a
// short burst stays inside one cell with an empty previous cell for this key.
func waitFreshCell(window time.Duration) {
	ms := window.Milliseconds()
	now := time.Now().UnixMilli()
	time.Sleep(time.Duration(ms-now%ms+5) * time.Millisecond)
}

// buildBinary returns bin when it is set, else builds ./cmd/ratchet into a temporary
// directory; cleanup removes that directory.
func buildBinary(bin string) (path string, cleanup func(), err error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "ratchet-accuracy-")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "ratchet")
	if out, err := exec.Command("go", "build", "-o", path, "./cmd/ratchet").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

func start(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append(args, "--log-level", "warn")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy: start:", err)
		os.Exit(1)
	}
	return cmd
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitInfo polls INFO ratchet of every client of cs, every pause, until ok holds for all of
// them or bound has passed; it returns how many were ready at the last poll and whether
// all were.
func waitInfo(cs []*redis.Client, bound, pause time.Duration, ok func(info string) bool) (ready int, all bool) {
	deadline := time.Now().Add(bound)
	for {
		ready = 0
		for _, c := range cs {
			if info, err := c.Info(context.Background(), "ratchet").Result(); err == nil && ok(info) {
				ready++
			}
		}
		if ready == len(cs) {
			return ready, true
		}
		if time.Now().After(deadline) {
			return ready, false
		}
		time.Sleep(pause)
	}
}

func waitPing(c *redis.Client) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("server did not answer PING within 10s")
}
