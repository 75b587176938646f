package commands_test

import (
	"strings"
	"testing"
)

// TestClientBounds: client names and CLIENT SETINFO values are at most 256 bytes.
func TestClientBounds(t *testing.T) {
	r := newRig("")
	n256, n257 := strings.Repeat("n", 256), strings.Repeat("n", 257)
	for _, tt := range []struct{ cmd, want string }{
		{"CLIENT SETNAME " + n256, "+OK\r\n"},
		{"CLIENT SETNAME " + n257, "-ERR Client names must be at most 256 bytes.\r\n"},
		{"CLIENT GETNAME", "$256\r\n" + n256 + "\r\n"},
		{"HELLO 2 SETNAME " + n257, "-ERR Client names must be at most 256 bytes.\r\n"},
		{"CLIENT SETINFO LIB-NAME " + n256, "+OK\r\n"},
		{"CLIENT SETINFO LIB-VER " + n257, "-ERR lib-ver must be at most 256 bytes, without spaces, newlines or special characters.\r\n"},
		{"CLIENT SETINFO LIB-COLOUR x", "-ERR Unrecognized option 'LIB-COLOUR'\r\n"},
	} {
		if got := r.do(tt.cmd); got != tt.want {
			t.Errorf("%.40s: got %.80q, want %.80q", tt.cmd, got, tt.want)
		}
	}
	if got := r.do("CLIENT LIST"); !strings.Contains(got, " name="+n256+" ") || strings.Contains(got, n257) {
		t.Errorf("CLIENT LIST = %.200q", got)
	}
}

// TestClientTracking: CLIENT TRACKING, CACHING, TRACKINGINFO and GETREDIR answer as Redis
// 7.0.15 answered the same sequence, in both protocols (invalidations themselves:
// integration/tracking_test.go).
func TestClientTracking(t *testing.T) {
	info := func(mapHdr, setHdr, flags, redirect string) string {
		return mapHdr + "\r\n$5\r\nflags\r\n" + setHdr + flags + "$8\r\nredirect\r\n:" + redirect + "\r\n$8\r\nprefixes\r\n*0\r\n"
	}
	const caching = "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"
	for _, proto := range []string{"2", "3"} {
		r := newRig("")
		r.do("HELLO " + proto)
		mapHdr := map[string]string{"2": "*6", "3": "%3"}[proto]
		set := map[string]string{"2": "*", "3": "~"}[proto]
		for _, tt := range []struct{ cmd, want string }{
			{"CLIENT TRACKINGINFO", info(mapHdr, set+"1\r\n", "$3\r\noff\r\n", "-1")},
			{"CLIENT CACHING yes", caching},
			{"CLIENT CACHING maybe", caching},
			{"CLIENT GETREDIR", ":-1\r\n"},
			{"client tracking on bcast prefix a: prefix b: noloop redirect 7", "-ERR The client ID you want redirect to does not exist\r\n"},
			{"CLIENT TRACKING ON PREFIX a", "-ERR PREFIX option requires BCAST mode to be enabled\r\n"},
			{"CLIENT TRACKING ON OPTIN OPTOUT", "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"},
			{"CLIENT TRACKING ON BCAST OPTIN", "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"},
			{"CLIENT TRACKING ON BCAST PREFIX a PREFIX ab", "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n"},
			{"CLIENT TRACKING ON OPTIN", "+OK\r\n"},
			{"CLIENT TRACKING ON OPTOUT", "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
			{"CLIENT TRACKING ON BCAST", "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
			{"CLIENT CACHING no", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"},
			{"CLIENT CACHING maybe", "-ERR syntax error\r\n"},
			{"CLIENT CACHING yes", "+OK\r\n"},
			{"CLIENT TRACKINGINFO", info(mapHdr, set+"3\r\n", "$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n", "0")},
			{"CLIENT GETREDIR", ":0\r\n"},
			{"CLIENT TRACKING ON REDIRECT", "-ERR syntax error\r\n"},
			{"CLIENT TRACKING ON REDIRECT x", "-ERR value is not an integer or out of range\r\n"},
			{"CLIENT TRACKING ON PREFIX", "-ERR syntax error\r\n"},
			{"CLIENT TRACKING ON FOO", "-ERR syntax error\r\n"},
			{"CLIENT TRACKING MAYBE", "-ERR syntax error\r\n"},
			{"CLIENT TRACKING OFF", "+OK\r\n"},
			{"CLIENT TRACKING OFF BCAST", "+OK\r\n"},
			{"CLIENT TRACKINGINFO", info(mapHdr, set+"1\r\n", "$3\r\noff\r\n", "-1")},
			{"CLIENT TRACKING", "-ERR unknown subcommand or wrong number of arguments for 'TRACKING'. Try CLIENT HELP.\r\n"},
		} {
			if got := r.do(tt.cmd); got != tt.want {
				t.Errorf("RESP%s %s: got %q, want %q", proto, tt.cmd, got, tt.want)
			}
		}
	}
}

// TestInfoMemoryKeyspace: INFO memory and keyspace carry Redis's fields (redis-cli --stat
// reads used_memory and db0's keys), and INFO with no section includes them.
func TestInfoMemoryKeyspace(t *testing.T) {
	r := newRig("")
	if got := r.do("INFO keyspace"); got != "$12\r\n# Keyspace\r\n\r\n" {
		t.Fatalf("INFO keyspace with no cells = %q", got)
	}
	r.do("RL.LIMIT a 5 1s")
	r.do("RL.LIMIT b 5 1s")
	if got := r.do("INFO keyspace"); !strings.Contains(got, "\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n") {
		t.Fatalf("INFO keyspace = %q", got)
	}
	mem := r.do("INFO memory")
	for _, f := range []string{"used_memory", "used_memory_rss", "maxmemory"} {
		i := strings.Index(mem, "\r\n"+f+":")
		if i < 0 {
			t.Fatalf("INFO memory lacks %s: %q", f, mem)
		}
		v := mem[i+len(f)+3:]
		v = v[:strings.Index(v, "\r\n")]
		if v == "" || v == "0" || strings.HasPrefix(v, "-") {
			t.Errorf("INFO memory %s = %q, want a positive figure", f, v)
		}
	}
	if !strings.Contains(mem, "\r\nmaxmemory:1048576\r\n") || !strings.Contains(mem, "\r\nmaxmemory_human:1.00M\r\n") {
		t.Errorf("INFO memory maxmemory: %q", mem)
	}
	all := r.do("INFO")
	for _, sec := range []string{"# Server", "# Clients", "# Memory", "# Stats", "# Keyspace", "# Ratchet", "auth_failures:0", "auth_throttled:0"} {
		if !strings.Contains(all, sec) {
			t.Errorf("INFO lacks %q", sec)
		}
	}
}
