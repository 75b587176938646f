package integration

// MULTI/EXEC with the real binary, on an origin and on an edge: go-redis TxPipeline and raw
// RESP (README "Transactions").

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// multiTargets starts an origin and an edge of it; each subtest runs against both.
func multiTargets(t *testing.T) map[string]*proc {
	t.Helper()
	origin := startOrigin(t, "--data-dir", "")
	return map[string]*proc{"origin": origin, "edge": startEdge(t, []*proc{origin}, countsNotTimeouts...)}
}

// TestMultiTxPipeline: go-redis TxPipeline of 10 RL.LIMIT with limit 5 gets exactly 5
// allowed and 5 denied, in RESP2 and RESP3, and RL.STATUS shows 5 counted.
func TestMultiTxPipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, p := range multiTargets(t) {
		for _, proto := range []int{2, 3} {
			c := p.client(t, &redis.Options{Protocol: proto})
			key := fmt.Sprintf("tx-%s-%d", name, proto)
			pipe := c.TxPipeline()
			cmds := make([]*redis.Cmd, 10)
			for i := range cmds {
				cmds[i] = pipe.Do(ctx, "RL.LIMIT", key, 5, "1h")
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("%s RESP%d: TxPipeline: %v", name, proto, err)
			}
			allowed := 0
			for i, cmd := range cmds {
				r := fiveInts(t, cmd.Val())
				if r[0] == 1 {
					allowed++
					if want := int64(4 - i); r[2] != want {
						t.Errorf("%s RESP%d: reply %d remaining %d, want %d", name, proto, i, r[2], want)
					}
				}
			}
			if allowed != 5 {
				t.Errorf("%s RESP%d: %d of 10 allowed, want 5", name, proto, allowed)
			}
			if u := used(t, c, key, "1h"); u != 5 {
				t.Errorf("%s RESP%d: RL.STATUS used %d, want 5", name, proto, u)
			}
		}
	}
}

// TestMultiRaw: the transaction replies over raw RESP, and that aborted, discarded and
// quit transactions count nothing. Each transaction is also sent in one write, which an
// edge's event loop hands to a goroutine at EXEC: it must still count once.
func TestMultiRaw(t *testing.T) {
	t.Parallel()
	for name, p := range multiTargets(t) {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, p.Addr)
			key := "raw-" + name
			var watch any = "OK"
			if name == "edge" {
				watch = respError(errWatchOnEdge)
			}
			steps := []struct {
				args []string
				want any // a string: the simple string or the error text
			}{
				{[]string{"EXEC"}, respError("ERR EXEC without MULTI")},
				{[]string{"DISCARD"}, respError("ERR DISCARD without MULTI")},
				{[]string{"WATCH", key}, watch},
				{[]string{"MULTI"}, "OK"},
				{[]string{"WATCH", key}, respError("ERR WATCH inside MULTI is not allowed")},
				{[]string{"MULTI"}, respError("ERR MULTI calls can not be nested")},
				{[]string{"RL.LIMIT", key, "5", "1h"}, "QUEUED"},
				{[]string{"RL.LIMIT", key, "5", "1h", "COST", "x"}, respError("ERR cost must be an integer from 0 to 1125899906842624")},
				{[]string{"RL.LIMIT", key, "5", "1h"}, "QUEUED"},
				{[]string{"EXEC"}, respError("EXECABORT Transaction discarded because of previous errors.")},
				{[]string{"MULTI"}, "OK"},
				{[]string{"RL.LIMIT", key, "5", "1h"}, "QUEUED"},
				{[]string{"NOPE"}, respError("ERR unknown command 'NOPE', with args beginning with: ")},
				{[]string{"EXEC"}, respError("EXECABORT Transaction discarded because of previous errors.")},
				{[]string{"MULTI"}, "OK"},
				{[]string{"RL.LIMIT", key, "5", "1h"}, "QUEUED"},
				{[]string{"DISCARD"}, "OK"},
			}
			for _, s := range steps {
				if got := c.do(s.args...); fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Fatalf("%q = %#v, want %#v", s.args, got, s.want)
				}
			}
			if u := ints(t, c.do("RL.LIMIT", key, "5", "1h", "COST", "0")); u[2] != 5 {
				t.Fatalf("aborted and discarded transactions counted: remaining %d, want 5", u[2])
			}

			// One write: MULTI, three RL.LIMIT, PING, RL.STATUS, EXEC.
			var batch []byte
			for _, args := range [][]string{{"MULTI"}, {"RL.LIMIT", key, "5", "1h"}, {"RL.LIMIT", key, "5", "1h", "COST", "2"},
				{"PING"}, {"RL.STATUS", key, "1h"}, {"RL.LIMIT", key, "5", "1h", "COST", "3"}, {"EXEC"}} {
				batch = append(batch, encode(args...)...)
			}
			c.write(batch)
			for i := range 6 {
				if v := c.read(); v != "OK" && v != "QUEUED" {
					t.Fatalf("reply %d of the batch = %#v", i, v)
				}
			}
			arr, ok := c.read().([]any)
			if !ok || len(arr) != 5 {
				t.Fatalf("EXEC = %#v", arr)
			}
			if r := ints(t, arr[0]); r[0] != 1 || r[2] != 4 {
				t.Errorf("first RL.LIMIT = %v", r)
			}
			if r := ints(t, arr[1]); r[0] != 1 || r[2] != 2 {
				t.Errorf("second RL.LIMIT = %v", r)
			}
			if arr[2] != "PONG" {
				t.Errorf("PING in EXEC = %#v", arr[2])
			}
			if st, ok := arr[3].([]any); !ok || len(st) < 14 || st[12] != "used" || st[13] != int64(3) {
				t.Errorf("RL.STATUS in EXEC = %#v", arr[3])
			}
			if r := ints(t, arr[4]); r[0] != 0 {
				t.Errorf("third RL.LIMIT (cost 3 of 2 left) = %v, want denied", r)
			}

			// QUIT inside MULTI closes the connection and runs nothing.
			c.do("MULTI")
			c.do("RL.LIMIT", key, "5", "1h")
			if v := c.do("QUIT"); v != "OK" {
				t.Fatalf("QUIT in MULTI = %#v", v)
			}
			c.expectEOF()
			c2 := dialRaw(t, p.Addr)
			if r := ints(t, c2.do("RL.LIMIT", key, "5", "1h", "COST", "0")); r[2] != 2 {
				t.Fatalf("after QUIT in MULTI: remaining %d, want 2", r[2])
			}
			// A connection closed inside MULTI runs nothing either.
			c3 := dialRaw(t, p.Addr)
			c3.do("MULTI")
			c3.do("RL.LIMIT", key, "5", "1h")
			_ = c3.Close()
			if r := ints(t, c2.do("RL.LIMIT", key, "5", "1h", "COST", "0")); r[2] != 2 {
				t.Fatalf("after a close in MULTI: remaining %d, want 2", r[2])
			}
		})
	}
}

// TestMultiConcurrentNeverInterleave: on an origin, concurrent transactions of two RL.LIMIT
// on one key each see consecutive remainings: no other request falls between them.
func TestMultiConcurrentNeverInterleave(t *testing.T) {
	t.Parallel()
	p := startOrigin(t, "--data-dir", "")
	ctx := context.Background()
	const clients, rounds = 4, 100
	var wg sync.WaitGroup
	errs := make(chan string, clients+1)
	for range clients {
		c := p.client(t, &redis.Options{PoolSize: 1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				pipe := c.TxPipeline()
				a := pipe.Do(ctx, "RL.LIMIT", "hot", 1_000_000, "1h")
				b := pipe.Do(ctx, "RL.LIMIT", "hot", 1_000_000, "1h")
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err.Error()
					return
				}
				ra, rb := a.Val().([]any), b.Val().([]any)
				if len(ra) != 5 || len(rb) != 5 || ra[2].(int64) != rb[2].(int64)+1 {
					errs <- fmt.Sprintf("remainings %v then %v", ra, rb)
					return
				}
			}
		}()
	}
	// Plain requests on the same key at the same time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := p.client(t, nil)
		for range rounds * 2 {
			if err := c.Do(ctx, "RL.LIMIT", "hot", 1_000_000, "1h").Err(); err != nil {
				errs <- err.Error()
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if u := used(t, p.client(t, nil), "hot", "1h"); u != clients*rounds*2+rounds*2 {
		t.Fatalf("used %d, want %d", u, clients*rounds*2+rounds*2)
	}
}

// TestMultiInfo: CLIENT LIST shows a connection inside MULTI with flags=x and its queue.
func TestMultiInfo(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "")
	c := dialRaw(t, p.Addr)
	c.do("MULTI")
	c.do("PING")
	c.do("PING")
	other := dialRaw(t, p.Addr)
	list, _ := other.do("CLIENT", "LIST").(string)
	if !strings.Contains(list, " flags=x ") || !strings.Contains(list, " multi=2 ") {
		t.Fatalf("CLIENT LIST = %q", list)
	}
}
