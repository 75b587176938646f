package commands

import (
	"strings"
	"testing"
)

// TestOverrideACLKeyPatterns: RL.OVERRIDE's key is checked against the user's key
// patterns as RL.LIMIT's is (namespace:key with NS): SET and DEL need write, GET read, a
// prefix is matched as written ("prefix*"), LIST is not filtered (as KEYS).
func TestOverrideACLKeyPatterns(t *testing.T) {
	r := newACLRig(t, aclTenants+
		"user acmeadmin on >aapw ~acme:* +@all\n"+
		"user nsadmin on >nspw ~tenant:acme:* +@all\n"+
		"user reader on >rdpw %R~acme:* +@all\n"+
		"user root on >rootpw ~* +@all\n", "")
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	r.serve(s, "AUTH default adminpw")
	r.serve(s, "RL.OVERRIDE SET globex:u1 1m 777")
	r.serve(s, "RL.OVERRIDE SET acme:u1 1m 777")
	for _, tc := range []struct {
		user, pass, cmd string
		ok              bool
	}{
		{"acme", "acmepw", "RL.OVERRIDE GET globex:u1 1m", false},
		{"acme", "acmepw", "RL.OVERRIDE GET acme:u1 1m", true},
		{"acme", "acmepw", "RL.OVERRIDE LIST", true},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET globex:u1 1m 1000000", false},
		{"acmeadmin", "aapw", "RL.OVERRIDE DEL globex:u1 1m", false},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET * 1m 1000000", false},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET acme:* 1m 1000", true},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET acme:u2 1m 1000", true},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET u2 1m 1000 NS acme", true},
		{"acmeadmin", "aapw", "RL.OVERRIDE SET u2 1m 1000 NS globex", false},
		{"acmeadmin", "aapw", "RL.OVERRIDE DEL acme:u2 1m", true},
		{"nsadmin", "nspw", "RL.OVERRIDE SET acme:u3 1m 10 NS tenant", true},
		{"nsadmin", "nspw", "RL.OVERRIDE SET acme:u3 1m 10", false},
		{"reader", "rdpw", "RL.OVERRIDE GET acme:u1 1m", true},
		{"reader", "rdpw", "RL.OVERRIDE SET acme:u1 1m 5", false},
		{"reader", "rdpw", "RL.OVERRIDE DEL acme:u1 1m", false},
		{"root", "rootpw", "RL.OVERRIDE SET * 1m 1000000", true},
	} {
		s := NewSession(2, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		r.serve(s, "AUTH "+tc.user+" "+tc.pass)
		got := r.serve(s, tc.cmd)
		if denied := strings.HasPrefix(got, "-NOPERM"); denied == tc.ok {
			t.Errorf("%s: %s = %q, want allowed %v", tc.user, tc.cmd, got, tc.ok)
		}
	}
}
