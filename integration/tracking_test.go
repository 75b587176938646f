package integration

// CLIENT TRACKING: Ratchet sends no invalidations, so it refuses tracking and a client-side
// cache fails loudly instead of reading stale values (README "Transactions and drop-in
// commands").

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// TestTrackingRefused: rueidis with its defaults (client-side cache on: HELLO 3 and CLIENT
// TRACKING ON OPTIN at connect) gets ErrNoCache carrying Ratchet's reason, on an origin
// and on an edge; with DisableCache, DoCache reads another client's write at once (with
// tracking accepted and never invalidated, it read the first value forever).
func TestTrackingRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	targets := multiTargets(t)
	waitForwarding(t, targets["edge"].Addr)
	for name, p := range targets {
		opt := rueidis.ClientOption{InitAddress: []string{p.Addr}, DisableRetry: true,
			Dialer: net.Dialer{Timeout: 5 * time.Second}}
		c, err := rueidis.NewClient(opt)
		if err == nil {
			c.Close()
			t.Fatalf("%s: rueidis with its client-side cache connected; want CLIENT TRACKING refused", name)
		}
		if !errors.Is(err, rueidis.ErrNoCache) || !strings.Contains(err.Error(), "Ratchet does not track keys") {
			t.Fatalf("%s: rueidis with its client-side cache: %v, want ErrNoCache with Ratchet's reason", name, err)
		}

		opt.DisableCache = true
		c, err = rueidis.NewClient(opt)
		if err != nil {
			t.Fatalf("%s: rueidis with DisableCache: %v", name, err)
		}
		other := p.client(t, &redis.Options{Protocol: 3})
		key := "cached-" + name
		for want := int64(1); want <= 3; want++ {
			if err := other.Incr(ctx, key).Err(); err != nil {
				t.Fatalf("%s: INCR: %v", name, err)
			}
			got, err := c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute).AsInt64()
			if err != nil || got != want {
				t.Fatalf("%s: DoCache GET after another client's INCR = %d, %v; want %d", name, got, err, want)
			}
		}
		c.Close()

		// go-redis, RESP3 as node-redis's clientSideCache connects: the same refusal.
		err = other.Do(ctx, "CLIENT", "TRACKING", "ON").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR Ratchet does not track keys") {
			t.Fatalf("%s: CLIENT TRACKING ON = %v", name, err)
		}
	}
}
