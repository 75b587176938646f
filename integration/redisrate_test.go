package integration

// go-redis/redis_rate bursts against redis-server: script time in microseconds, as
// Redis's TIME (README "Limiter libraries tested").

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// pipeRediser gives redis_rate a transaction to send its scripts into: each EVALSHA is
// queued in the pipeline (kept in cmds, read after Exec), and redis_rate is handed a
// placeholder reply it can parse meanwhile.
type pipeRediser struct {
	redis.Pipeliner
	cmds []*redis.Cmd
}

func (p *pipeRediser) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	p.cmds = append(p.cmds, p.Pipeliner.EvalSha(ctx, sha1, keys, args...))
	placeholder := redis.NewCmd(ctx)
	placeholder.SetVal([]any{int64(0), int64(0), "-1", "-1"})
	return placeholder
}

// redisRateBurst sends burst calls of the real redis_rate Allow(key, limit) in one
// MULTI/EXEC to c and returns each call's allowed and remaining.
func redisRateBurst(ctx context.Context, c *redis.Client, key string, limit redis_rate.Limit) ([][2]int64, error) {
	pipe := &pipeRediser{Pipeliner: c.TxPipeline()}
	l := redis_rate.NewLimiter(pipe)
	for range limit.Burst {
		if _, err := l.Allow(ctx, key, limit); err != nil {
			return nil, err
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("EXEC: %w", err)
	}
	out := make([][2]int64, len(pipe.cmds))
	for i, cmd := range pipe.cmds {
		v, err := cmd.Slice()
		if err != nil || len(v) != 4 {
			return nil, fmt.Errorf("call %d: %v %v", i, v, err)
		}
		out[i] = [2]int64{v[0].(int64), v[1].(int64)}
	}
	return out, nil
}

// TestRedisRateBurstsMatchRedisServer: a burst of exactly Burst calls in one transaction,
// for PerSecond and PerMinute of 1 to 100, is all allowed with the same remainings on
// ratchet as on redis-server. With TIME in whole milliseconds, all the calls saw one
// instant, and the float rounding of the script refused the last call of many bursts.
//
// The remainings follow the microseconds that pass between the calls, on redis-server as
// on ratchet: on a loaded machine a pause within the transaction moves one across an
// integer (redis-server [1 1] [1 1] at the end of a burst where ratchet answers [1 1]
// [1 0]). A burst that differs is therefore sent again to both, on new keys, up to
// burstTries times in all, and counts as differing only when none of them matched.
func TestRedisRateBurstsMatchRedisServer(t *testing.T) {
	t.Parallel()
	const burstTries = 5
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	servers := map[string]*redis.Client{"redis-server": redis.NewClient(&redis.Options{Addr: redisAddr}), "ratchet": p.client(t, nil)}
	for _, c := range servers {
		// Runs the script once outside a transaction: EVALSHA then works on redis-server.
		if _, err := redis_rate.NewLimiter(c).Allow(ctx, "load", redis_rate.PerSecond(1)); err != nil {
			t.Fatal(err)
		}
	}
	differ, retried := 0, 0
	for _, per := range []struct {
		name  string
		limit func(int) redis_rate.Limit
	}{{"Second", redis_rate.PerSecond}, {"Minute", redis_rate.PerMinute}} {
		for rate := 1; rate <= 100; rate++ {
			var want, have string
			for try := range burstTries {
				key := fmt.Sprintf("burst-%s-%d-%d", per.name, rate, try)
				got := map[string][][2]int64{}
				for name, c := range servers {
					r, err := redisRateBurst(ctx, c, key, per.limit(rate))
					if err != nil {
						t.Fatalf("%s Per%s(%d): %v", name, per.name, rate, err)
					}
					got[name] = r
				}
				if want, have = fmt.Sprint(got["redis-server"]), fmt.Sprint(got["ratchet"]); want == have {
					break
				}
				retried++
			}
			if want != have {
				differ++
				if differ <= 5 {
					t.Errorf("Per%s(%d), %d calls in one MULTI, %d times, [allowed remaining] the last time:\n redis-server %s\n ratchet      %s",
						per.name, rate, rate, burstTries, want, have)
				}
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of 200 bursts differ from redis-server's each of %d times (%d sends differed in all)", differ, burstTries, retried)
	} else if retried > 0 {
		t.Logf("%d sends of a burst differed; each burst matched when sent again", retried)
	}
}
