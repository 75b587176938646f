// Command accuracy measures how exactly Ratchet keeps a limit.
//
// Edge mode (-regions 0 or 1, the default): it starts one origin and N edges on loopback,
// floods one key from all edges inside one fresh window cell and prints admitted/limit;
// then sends 0.9x the limit and prints the share admitted (which should be all of it).
//
//	go run ./bench/accuracy -edges 3 -limit 1000
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
	edges := flag.Int("edges", 3, "edge processes")
	limit := flag.Int("limit", 1000, "the limit of the flooded key")
	window := flag.Duration("window", 10*time.Second, "the window")
	load := flag.Float64("load", 3, "flood size as a multiple of the limit")
	clients := flag.Int("clients", 16, "concurrent clients per edge (region mode: per region)")
	replay := flag.String("replay-interval", "5ms", "edges' --replay-interval")
	freshness := flag.String("freshness", "1s", "edges' --freshness")
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
	if err := run(*edges, *limit, *window, *load, *clients, *replay, *freshness, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
}

func run(nEdges, limit int, window time.Duration, load float64, clients int, replay, freshness, bin string) error {
	dir, err := os.MkdirTemp("", "ratchet-accuracy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "ratchet")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/ratchet").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	originAddr := freeAddr()
	procs := []*exec.Cmd{start(bin, "--listen", originAddr, "--data-dir", "", "--metrics-listen", "", "--cluster-secret", "bench")}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	var edgeClients []*redis.Client
	for i := 0; i < nEdges; i++ {
		addr := freeAddr()
		procs = append(procs, start(bin, "--role", "edge", "--listen", addr, "--origin", originAddr, "--cluster-secret", "bench",
			"--metrics-listen", "", "--node-id", fmt.Sprintf("edge%d", i), "--replay-interval", replay, "--freshness", freshness))
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: clients, Protocol: 2})
		defer c.Close()
		edgeClients = append(edgeClients, c)
	}
	for _, c := range append(edgeClients, redis.NewClient(&redis.Options{Addr: originAddr})) {
		if err := waitPing(c); err != nil {
			return err
		}
	}
	w := fmt.Sprintf("%dms", window.Milliseconds())
	fmt.Printf("origin 1, edges %d, limit %d, window %s, replay-interval %s, freshness %s, %d clients per edge\n",
		nEdges, limit, window, replay, freshness, clients)

	// Flood: load x limit requests spread over the edges, inside one fresh cell.
	waitFreshCell(window)
	key := fmt.Sprintf("flood:%d", time.Now().UnixNano())
	sent := int(load * float64(limit))
	admitted, took := fire(edgeClients, clients, key, limit, w, sent)
	fmt.Printf("flood %.1fx: sent %d, admitted %d, admitted/limit = %.4f (%s)\n",
		load, sent, admitted, float64(admitted)/float64(limit), took.Round(time.Millisecond))
	if took > window {
		fmt.Println("warning: the flood outlasted the window; use a longer -window")
	}
	if os.Getenv("ACCURACY_DEBUG") != "" {
		for i, c := range edgeClients {
			info, _ := c.Info(context.Background(), "ratchet").Result()
			fmt.Printf("edge%d: %s\n", i, info)
		}
	}

	// Under the limit: 0.9 x limit, everything should pass.
	waitFreshCell(window)
	key = fmt.Sprintf("under:%d", time.Now().UnixNano())
	sent = int(0.9 * float64(limit))
	admitted, took = fire(edgeClients, clients, key, limit, w, sent)
	fmt.Printf("load 0.9x: sent %d, admitted %d, share admitted = %.2f%% (%s)\n",
		sent, admitted, 100*float64(admitted)/float64(sent), took.Round(time.Millisecond))
	return nil
}

// fire sends total requests for key, round-robin over the edges, with clients concurrent
// senders per edge, and returns how many were admitted.
func fire(edges []*redis.Client, clients int, key string, limit int, window string, total int) (int64, time.Duration) {
	var next, admitted atomic.Int64
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
				if err == nil && len(res) == 5 && res[0] == 1 {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return admitted.Load(), time.Since(start)
}

// waitFreshCell sleeps until just after the start of the next cell of window, so that a
// short burst stays inside one cell with an empty previous cell for this key.
func waitFreshCell(window time.Duration) {
	ms := window.Milliseconds()
	now := time.Now().UnixMilli()
	time.Sleep(time.Duration(ms-now%ms+5) * time.Millisecond)
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
