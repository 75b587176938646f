package integration

// RL.OVERRIDE with real processes: an override survives an origin's restart (its
// snapshot), reaches another region's origin with the publications, and reaches an
// origin's edges (README "Overrides").

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// limitField returns the limit field of RL.LIMIT key limit window's reply (a request of
// cost 0: a peek that counts nothing).
func limitField(t testing.TB, c *redis.Client, key string, limit int64, window string) (int64, error) {
	t.Helper()
	v, err := c.Do(context.Background(), "RL.LIMIT", key, limit, window, "COST", 0).Int64Slice()
	if err != nil {
		return 0, err
	}
	if len(v) != 5 {
		t.Fatalf("RL.LIMIT %s: %v", key, v)
	}
	return v[1], nil
}

// waitLimit waits until c's RL.LIMIT key 1000 window answers limit want.
func waitLimit(t testing.TB, c *redis.Client, what, key, window string, want int64) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, func() (bool, string) {
		got, err := limitField(t, c, key, 1000, window)
		return err == nil && got == want, fmt.Sprintf("limit %d, err %v", got, err)
	})
}

func mustDo(t testing.TB, c *redis.Client, want any, args ...any) {
	t.Helper()
	got, err := c.Do(context.Background(), args...).Result()
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%v = %v, %v; want %v", args, got, err, want)
	}
}

// TestOverrideSurvivesRestart: overrides (exact and prefix) and a deletion are in the
// origin's snapshot: after a restart they still apply, and the deleted one stays deleted.
func TestOverrideSurvivesRestart(t *testing.T) {
	t.Parallel()
	p := start(t, "--snapshot-interval", "1h") // only the final snapshot
	c := p.client(t, nil)
	mustDo(t, c, "OK", "RL.OVERRIDE", "SET", "user:42", "1m", 5)
	mustDo(t, c, "OK", "RL.OVERRIDE", "SET", "user:*", "1m", 50, "NS", "api")
	mustDo(t, c, "OK", "RL.OVERRIDE", "SET", "gone", "1m", 7)
	mustDo(t, c, 1, "RL.OVERRIDE", "DEL", "gone", "1m")
	_ = c.Close()
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	p.Restart()
	c = p.client(t, nil)
	cases := []struct {
		key  string
		args []any
		want int64
	}{
		{"user:42", nil, 5},
		{"user:7", []any{"NS", "api"}, 50},
		{"user:7", nil, 1000},
		{"gone", nil, 1000},
	}
	for _, tc := range cases {
		v, err := c.Do(context.Background(), append([]any{"RL.LIMIT", tc.key, 1000, "1m"}, tc.args...)...).Int64Slice()
		if err != nil || len(v) != 5 || v[1] != tc.want {
			t.Errorf("after restart, RL.LIMIT %s 1000 1m %v = %v, %v; want limit %d", tc.key, tc.args, v, err, tc.want)
		}
	}
	mustDo(t, c, "[[user:* 60000 50 api] [user:42 60000 5 default]]", "RL.OVERRIDE", "LIST")
}

// TestOverrideReachesRegion: an override set on region a's origin applies on region b's
// after a publication; so does its deletion; one set on b while a is down reaches a when
// it is back.
func TestOverrideReachesRegion(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})

	mustDo(t, a, "OK", "RL.OVERRIDE", "SET", "tenant:*", "1h", 3)
	waitLimit(t, b, "b to apply a's override", "tenant:9", "1h", 3)
	mustDo(t, b, 3, "RL.OVERRIDE", "GET", "tenant:*", "1h")

	mustDo(t, a, 1, "RL.OVERRIDE", "DEL", "tenant:*", "1h")
	waitLimit(t, b, "b to drop the deleted override", "tenant:9", "1h", 1000)

	// Set on b, later than a's deletion: it wins on both.
	mustDo(t, b, "OK", "RL.OVERRIDE", "SET", "tenant:*", "1h", 4)
	waitLimit(t, a, "a to apply b's override", "tenant:9", "1h", 4)
}

// TestOverrideAtEdge: an override set on the origin applies at its edge (RL.LIMIT's and
// RL.STATUS's limit) once the edge has it; one set through the edge is the origin's;
// after a clean restart of the origin the edge still applies it, and an edge started
// afterwards too; after a kill -9 that lost an override the snapshot did not hold, the
// edge re-reads the new run's overrides and drops it.
func TestOverrideAtEdge(t *testing.T) {
	t.Parallel()
	o := startOrigin(t, "--snapshot-interval", "1h") // only the final snapshot
	e := startEdge(t, []*proc{o})
	oc, ec := o.client(t, nil), e.client(t, nil)
	waitLimit(t, ec, "the edge to serve", "warm", "1m", 1000)

	mustDo(t, oc, "OK", "RL.OVERRIDE", "SET", "user:*", "1m", 9)
	waitLimit(t, ec, "the edge to apply the origin's override", "user:1", "1m", 9)
	st, err := ec.Do(context.Background(), "RL.STATUS", "user:1", "1m").Result()
	if err != nil || !contains([]byte(fmt.Sprint(st)), "limit:9") {
		t.Errorf("RL.STATUS at the edge = %v, %v; want limit 9", st, err)
	}

	mustDo(t, ec, "OK", "RL.OVERRIDE", "SET", "vip", "1m", 500) // forwarded
	mustDo(t, oc, 500, "RL.OVERRIDE", "GET", "vip", "1m")
	mustDo(t, ec, 500, "RL.OVERRIDE", "GET", "vip", "1m")
	waitLimit(t, ec, "the edge to apply the override set through it", "vip", "1m", 500)
	mustDo(t, ec, "[[user:* 60000 9 default] [vip 60000 500 default]]", "RL.OVERRIDE", "LIST")
	// Refused in a transaction through the edge, which answers at once and stays usable.
	cmds, err := ec.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Do(context.Background(), "RL.OVERRIDE", "SET", "tx", "1m", 6)
		return nil
	})
	if err == nil || len(cmds) != 1 || cmds[0].Err() == nil || !contains([]byte(cmds[0].Err().Error()), "not allowed inside MULTI") {
		t.Errorf("MULTI RL.OVERRIDE SET through the edge: %v, %v; want the refusal", cmds, err)
	}
	mustDo(t, ec, "PONG", "PING")

	_ = oc.Close()
	if code := o.Stop(); code != 0 {
		t.Fatalf("origin exit code after SIGTERM = %d, want 0", code)
	}
	o.Restart()
	oc = o.client(t, nil)
	e2 := startEdge(t, []*proc{o})
	e2c := e2.client(t, nil)
	waitLimit(t, e2c, "an edge started after the restart to apply the override", "user:2", "1m", 9)
	waitLimit(t, ec, "the edge to apply the override after the restart", "user:3", "1m", 9)

	// An override the snapshot does not hold is lost by a kill -9: the new run has none,
	// and the edge, seeing the new run, reads its overrides again.
	mustDo(t, oc, "OK", "RL.OVERRIDE", "SET", "lost", "1m", 4)
	waitLimit(t, ec, "the edge to apply the override before the kill", "lost", "1m", 4)
	_ = oc.Close()
	o.Kill()
	o.Restart()
	waitLimit(t, ec, "the edge to drop the override the new run lacks", "lost", "1m", 1000)
	waitLimit(t, ec, "the edge to keep the saved ones", "user:4", "1m", 9)
}

// TestOverrideTwoOrigins: through an edge of two origins, an exact key's override goes to
// its tuple's origin only, a prefix's to both; the edge applies both kinds.
func TestOverrideTwoOrigins(t *testing.T) {
	t.Parallel()
	o1, o2 := startOrigin(t, "--data-dir", ""), startOrigin(t, "--data-dir", "")
	e := startEdge(t, []*proc{o1, o2})
	c1, c2, ec := o1.client(t, nil), o2.client(t, nil), e.client(t, nil)
	waitLimit(t, ec, "the edge to serve", "warm", "1m", 1000)

	mustDo(t, ec, "OK", "RL.OVERRIDE", "SET", "api:*", "1h", 30)
	mustDo(t, c1, 30, "RL.OVERRIDE", "GET", "api:*", "1h")
	mustDo(t, c2, 30, "RL.OVERRIDE", "GET", "api:*", "1h")
	for i := range 8 {
		key := fmt.Sprint("api:", i)
		waitLimit(t, ec, "the edge to apply the prefix on both origins' tuples", key, "1h", 30)
	}
	mustDo(t, ec, "OK", "RL.OVERRIDE", "SET", "api:7", "1h", 3)
	n := 0
	for _, c := range []*redis.Client{c1, c2} {
		if v, err := c.Do(context.Background(), "RL.OVERRIDE", "GET", "api:7", "1h").Int64(); err == nil && v == 3 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the exact override is on %d origins, want 1 (its tuple's)", n)
	}
	waitLimit(t, ec, "the edge to apply the exact override", "api:7", "1h", 3)
	mustDo(t, ec, 1, "RL.OVERRIDE", "DEL", "api:*", "1h")
	for _, c := range []*redis.Client{c1, c2} {
		if v, err := c.Do(context.Background(), "RL.OVERRIDE", "GET", "api:*", "1h").Result(); err != redis.Nil {
			t.Errorf("GET of the deleted prefix on an origin = %v, %v; want nil", v, err)
		}
	}
	waitLimit(t, ec, "the edge to drop the prefix", "api:1", "1h", 1000)
}
