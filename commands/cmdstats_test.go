package commands_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
)

// TestCommandStats: each request counts under its command as Redis's INFO commandstats
// does (calls that ran, rejected before running, failed with an error reply), unknown
// names under "unknown" only, and the total stays total_commands_processed.
func TestCommandStats(t *testing.T) {
	r := newRig("pw")
	for _, c := range []string{
		"PING",              // NOAUTH: rejected
		"AUTH pw",           // a call
		"RL.LIMIT k 2 1s",   // calls
		"RL.LIMIT k 2 1s",   //
		"rl.limit k 2 1s",   //
		"RL.LIMIT k",        // arity: rejected
		"RL.LIMIT k 0 1s",   // ran, answered an error: failed
		"NOSUCH a b",        // unknown
		"nosuch",            //
		"MULTI",             // a call
		"RL.LIMIT k 2 1s",   // queued: counts as it is queued
		"EXEC",              // a call
		"GET",               // arity inside MULTI... but MULTI ended: rejected
		"INFO commandstats", // counts after its reply is written: not in it
	} {
		r.do(c)
	}
	byName := map[string]commands.CommandStat{}
	var total uint64
	for _, st := range r.d.CommandStats() {
		byName[st.Name] = st
		total += st.Calls + st.Rejected
	}
	tests := []struct {
		name                    string
		calls, rejected, failed uint64
	}{
		{"ping", 0, 1, 0},
		{"auth", 1, 0, 0},
		{"rl.limit", 5, 1, 1},
		{"unknown", 0, 2, 0},
		{"multi", 1, 0, 0},
		{"exec", 1, 0, 0},
		{"get", 0, 1, 0},
		{"info", 1, 0, 0},
	}
	for _, tt := range tests {
		st := byName[tt.name]
		if st.Calls != tt.calls || st.Rejected != tt.rejected || st.Failed != tt.failed {
			t.Errorf("%s: calls %d rejected %d failed %d, want %d %d %d", tt.name, st.Calls, st.Rejected, st.Failed,
				tt.calls, tt.rejected, tt.failed)
		}
		delete(byName, tt.name)
	}
	for name := range byName {
		t.Errorf("%s counted, nothing requested it", name)
	}
	if p := r.d.Processed(); p != total || p != 14 {
		t.Errorf("Processed %d, per-command total %d, want 14", p, total)
	}

	info := r.do("INFO commandstats")
	if !strings.HasPrefix(info, "$") || !strings.Contains(info, "# Commandstats\r\n") {
		t.Fatalf("INFO commandstats: %q", info)
	}
	line := regexp.MustCompile(`cmdstat_rl\.limit:calls=5,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=1,failed_calls=1\r\n`)
	if !line.MatchString(info) {
		t.Errorf("no Redis 7 line for rl.limit in %q", info)
	}
	if strings.Contains(info, "unknown") || strings.Contains(info, "nosuch") {
		t.Errorf("unknown command names listed: %q", info)
	}
	if strings.Contains(r.do("INFO"), "Commandstats") || !strings.Contains(r.do("INFO all"), "cmdstat_info:calls=") {
		t.Error("commandstats: want it in INFO all and not in the default INFO, as Redis")
	}
}

// TestCommandStatsSample: durations are sampled, one request of 16 per session (the
// first included), into buckets that hold every timed call.
func TestCommandStatsSample(t *testing.T) {
	r := newRig("")
	for range 64 {
		r.do("PING")
	}
	var ping commands.CommandStat
	for _, st := range r.d.CommandStats() {
		if st.Name == "ping" {
			ping = st
		}
	}
	if ping.Calls != 64 || ping.Timed != 4 {
		t.Fatalf("calls %d timed %d, want 64 and 4", ping.Calls, ping.Timed)
	}
	if n := len(ping.Buckets); n != len(commands.DurationBounds) || ping.Buckets[n-1] > ping.Timed || ping.TimedSeconds <= 0 {
		t.Fatalf("buckets %v of %d timed, %v s", ping.Buckets, ping.Timed, ping.TimedSeconds)
	}
}
