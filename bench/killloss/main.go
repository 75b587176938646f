// Command killloss measures what kill -9 costs an origin: how much counted work a restart
// brings back short of what clients were told was counted, in milliseconds of that work.
//
// Each run starts the real binary on a fresh data directory, fills it with -cells live
// cells (pipelined RL.LIMIT over a long window), then counts on one tracked key at -rate
// requests per second, kills the process with SIGKILL at a random moment, restarts it on
// the same directory and reads the tracked key's count. The loss is the time from the
// kill back to the acknowledgement of the last request the restart still has.
//
//	go run ./bench/killloss -runs 5 -cells 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const trackedLimit = 1 << 40

func main() {
	bin := flag.String("bin", "", "ratchet binary (default: go build ./cmd/ratchet into a temporary directory)")
	runs := flag.Int("runs", 5, "kill -9 runs")
	cells := flag.Int("cells", 1_000_000, "live cells before counting starts")
	rate := flag.Int("rate", 1000, "tracked requests per second")
	interval := flag.Duration("snapshot-interval", time.Second, "--snapshot-interval of the origin")
	minWait := flag.Duration("min-wait", 3*time.Second, "shortest time counting before the kill")
	maxWait := flag.Duration("max-wait", 8*time.Second, "longest time counting before the kill")
	flag.Parse()
	if *runs < 1 || *cells < 0 || *rate < 1 || *minWait < 0 || *maxWait < *minWait {
		fail(fmt.Errorf("want -runs >= 1, -cells >= 0, -rate >= 1 and 0 <= -min-wait <= -max-wait"))
	}

	tmp, err := os.MkdirTemp("", "killloss-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "ratchet")
		out, err := exec.Command("go", "build", "-o", *bin, "./cmd/ratchet").CombinedOutput()
		if err != nil {
			fail(fmt.Errorf("go build ./cmd/ratchet: %v\n%s", err, out))
		}
	}
	var losses []float64
	for i := range *runs {
		r := run{bin: *bin, dir: filepath.Join(tmp, fmt.Sprint("data", i)), cells: *cells, rate: *rate, interval: *interval,
			wait: *minWait + time.Duration(rand.Int64N(int64(*maxWait-*minWait)+1))}
		lost, err := r.do()
		if err != nil {
			fail(fmt.Errorf("run %d: %w", i+1, err))
		}
		losses = append(losses, lost)
	}
	fmt.Printf("kill -9 loss at %d cells, --snapshot-interval %v, %d runs (ms): ", *cells, *interval, *runs)
	for i, l := range losses {
		if i > 0 {
			fmt.Print(", ")
		}
		fmt.Printf("%.0f", l)
	}
	fmt.Printf("; max %.0f\n", slices.Max(losses))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "killloss:", err)
	os.Exit(1)
}

type run struct {
	bin, dir       string
	cells, rate    int
	interval, wait time.Duration
	addr           string
}

// do is one run; it returns the loss in ms.
func (r *run) do() (float64, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	r.addr = fmt.Sprintf("127.0.0.1:%d", port)
	cmd, err := r.start()
	if err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1, PoolSize: 4, ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()

	fillStart := time.Now()
	for lo := 0; lo < r.cells; lo += 1000 {
		pipe := c.Pipeline()
		for i := lo; i < min(lo+1000, r.cells); i++ {
			pipe.Do(ctx, "RL.LIMIT", fmt.Sprintf("fill:%08d", i), 1000, "31d")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("fill: %w", err)
		}
	}
	fill := time.Since(fillStart)

	// Count on the tracked key at the rate, keeping the time of every acknowledgement.
	var (
		mu   sync.Mutex
		acks []time.Time
	)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(time.Second / time.Duration(r.rate))
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-t.C:
			}
			if err := c.Do(ctx, "RL.LIMIT", "tracked", trackedLimit, "31d").Err(); err != nil {
				done <- nil // the kill: the request in flight is not acknowledged
				return
			}
			now := time.Now()
			mu.Lock()
			acks = append(acks, now)
			mu.Unlock()
		}
	}()
	time.Sleep(r.wait)
	mu.Lock()
	killAt := time.Now()
	_ = cmd.Process.Kill()
	acked := len(acks)
	mu.Unlock()
	_ = cmd.Wait()
	close(stop)
	<-done
	_ = c.Close()

	restartAt := time.Now()
	cmd2, err := r.start()
	if err != nil {
		return 0, fmt.Errorf("restart: %w", err)
	}
	ready := time.Since(restartAt)
	defer func() { _ = cmd2.Process.Kill(); _ = cmd2.Wait() }()
	c2 := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c2.Close()
	v, err := c2.Do(ctx, "RL.LIMIT", "tracked", trackedLimit, "31d", "COST", 0).Int64Slice()
	if err != nil || len(v) < 3 {
		return 0, fmt.Errorf("read tracked: %v %v", v, err)
	}
	restored := int(trackedLimit - v[2])
	var lost time.Duration
	switch {
	case restored >= acked:
		lost = 0 // everything acknowledged came back (a request in flight may have too)
	case restored == 0:
		lost = killAt.Sub(acks[0]) // nothing came back: at least all the counting
	default:
		lost = killAt.Sub(acks[restored-1])
	}
	fmt.Printf("run: %d cells filled in %v; counted %v; acknowledged %d, restored %d; lost %d requests = %.0f ms; restart answered in %v\n",
		r.cells, fill.Round(time.Millisecond), r.wait.Round(time.Millisecond), acked, restored, max(acked-restored, 0),
		float64(lost)/float64(time.Millisecond), ready.Round(time.Millisecond))
	return float64(lost) / float64(time.Millisecond), nil
}

// start runs the binary on r.dir and waits until it answers PING (60 s at most).
func (r *run) start() (*exec.Cmd, error) {
	cmd := exec.Command(r.bin, "--listen", r.addr, "--metrics-listen", "", "--data-dir", r.dir,
		"--snapshot-interval", r.interval.String(), "--max-memory", "2GiB", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Ready once it answers PING through the client the counting uses.
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c.Ping(context.Background()).Err() == nil {
			return cmd, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, fmt.Errorf("%s did not answer PING in 60 s", r.bin)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
