package commands_test

import "testing"

// TestRateLimitRedis6: rate-limit-redis v6's increment (windowMs is ARGV[1]; no
// resetExpiryOnChange): a counter from the first hit with a PX TTL, as on Redis.
func TestRateLimitRedis6(t *testing.T) {
	const sha = "895b92e1712734e1b464999be23953485475357b"
	r := newRig("")
	steps := []struct {
		advanceMs int64
		args      []string
		want      string
	}{
		{0, []string{"EVALSHA", sha, "1", "rl:k", "60000"}, "*2\r\n:1\r\n:60000\r\n"},
		{1500, []string{"EVALSHA", sha, "1", "rl:k", "60000"}, "*2\r\n:2\r\n:58500\r\n"},
		{0, []string{"PTTL", "rl:k"}, ":58500\r\n"},
		{58500, []string{"EVALSHA", sha, "1", "rl:k", "60000"}, "*2\r\n:1\r\n:60000\r\n"}, // expired: a new window
		// A new key without windowMs: SET's error, as redis-server 7.0.15 words it.
		{0, []string{"EVALSHA", sha, "1", "rl:new"}, "-ERR Lua redis lib command arguments must be strings or integers script: " + sha + ", on @user_script:4.\r\n"},
	}
	for i, s := range steps {
		r.clock.Advance(s.advanceMs)
		if got := r.doArgs(s.args...); got != s.want {
			t.Fatalf("step %d %q: got %q, want %q", i, s.args, got, s.want)
		}
	}
}
