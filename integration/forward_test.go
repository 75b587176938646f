package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// TestEdgeForwardsRegionalCommands: on an edge, the counter commands, CL.THROTTLE and the
// limiter scripts are run by the origin (RL.INTERNAL.FORWARD): two edges and the origin
// see one state; a transaction of them runs whole on the origin; one that mixes them with
// RL.LIMIT is refused; RESP2 and RESP3 replies are the client's own; with the origin
// down, the edge answers TRYAGAIN at once rather than deciding alone.
func TestEdgeForwardsRegionalCommands(t *testing.T) {
	ctx := context.Background()
	origin := startOrigin(t)
	edges := startEdges(t, 2, []*proc{origin})
	oc := origin.client(t, nil)
	e1 := edges[0].client(t, nil)                         // RESP3
	e2 := edges[1].client(t, &redis.Options{Protocol: 2}) // RESP2

	if err := e1.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET through an edge: %v", err)
	}
	if v, err := oc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the origin: %q %v", v, err)
	}
	if v, err := e2.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET through the other edge: %q %v", v, err)
	}
	if err := e2.Get(ctx, "missing").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key through an edge (RESP2 nil): %v", err)
	}
	if err := e1.Get(ctx, "missing").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key through an edge (RESP3 null): %v", err)
	}
	for i, c := range []*redis.Client{e1, e2, e1, oc} {
		if n, err := c.IncrBy(ctx, "hits", 2).Result(); err != nil || n != int64(2*(i+1)) {
			t.Fatalf("INCRBY %d: %d %v", i, n, err)
		}
	}
	if err := e1.Do(ctx, "INCRBY", "hits", "x").Err(); err == nil || err.Error() != "ERR value is not an integer or out of range" {
		t.Fatalf("an argument error is answered by the edge as by Redis: %v", err)
	}

	// CL.THROTTLE: one bucket, whichever edge asks.
	var got []string
	for _, c := range []*redis.Client{e1, e2, e1} {
		v, err := c.Do(ctx, "CL.THROTTLE", "cell", 1, 1, 60).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(v))
	}
	if want := "[[0 2 1 -1 60] [0 2 0 -1 120] [1 2 0 60 120]]"; fmt.Sprint(got) != want {
		t.Fatalf("CL.THROTTLE through two edges: %v, want %v", got, want)
	}

	// The real go-redis/redis_rate through both edges: one GCRA state, on the origin.
	l1, l2 := redis_rate.NewLimiter(e1), redis_rate.NewLimiter(e2)
	var allowed []int
	for _, l := range []*redis_rate.Limiter{l1, l2, l1, l2} {
		res, err := l.Allow(ctx, "api", redis_rate.PerMinute(3))
		if err != nil {
			t.Fatalf("redis_rate through an edge: %v", err)
		}
		allowed = append(allowed, res.Allowed)
	}
	if fmt.Sprint(allowed) != "[1 1 1 0]" {
		t.Fatalf("redis_rate through two edges allowed %v, want [1 1 1 0]", allowed)
	}

	// rate-limiter-flexible's get(): MULTI GET PTTL EXEC, run whole on the origin.
	pipe := e2.TxPipeline()
	g := pipe.Get(ctx, "hits")
	p := pipe.PTTL(ctx, "k")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("MULTI GET PTTL EXEC through an edge: %v", err)
	}
	if g.Val() != "8" || p.Val() <= 0 || p.Val() > time.Minute {
		t.Fatalf("MULTI GET PTTL EXEC: %q %v", g.Val(), p.Val())
	}
	pipe = e1.TxPipeline()
	pipe.Do(ctx, "RL.LIMIT", "mixed", 10, "1m")
	pipe.Get(ctx, "hits")
	if _, err := pipe.Exec(ctx); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("a transaction mixing RL.LIMIT and GET on an edge: %v", err)
	}
	if v, err := e1.Do(ctx, "RL.LIMIT", "mixed", 10, "1m").Int64Slice(); err != nil || v[2] != 9 {
		t.Fatalf("RL.LIMIT after the refused transaction (nothing of it counted): %v %v", v, err)
	}

	// The origin down: the edge says so at once, and decides nothing of it alone.
	origin.Kill()
	began := time.Now()
	err := e1.Get(ctx, "k").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
		t.Fatalf("GET through an edge whose origin is down: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("the edge took %v to answer", took)
	}
}
