package commands

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// TestParseACL: the rules of an ACL file line, and the errors Redis 7 gives for the same
// lines (checked against redis-server 7.0.15's ACL LOAD).
func TestParseACL(t *testing.T) {
	pwHash := sha256.Sum256([]byte("pw"))
	pwHex := hex.EncodeToString(pwHash[:])
	tests := []struct {
		name, text string
		want       string // ACL LIST of the users, joined by "\n"; or the error
		wantErr    bool
	}{
		{"empty file: the built-in default", "", "user default on nopass ~* &* +@all", false},
		{"blank lines and CRLF", "\r\n  \r\nuser a on nopass\r\n", "user a on nopass resetchannels -@all\nuser default on nopass ~* &* +@all", false},
		{"tenant", "user acme on >pw ~acme:* +@ratelimit",
			"user acme on #" + pwHex + " ~acme:* resetchannels -@all +@ratelimit\nuser default on nopass ~* &* +@all", false},
		{"hash, off, allkeys, allcommands", "user b off #" + pwHex + " allkeys allcommands -config",
			"user b off #" + pwHex + " ~* resetchannels +@all -config\nuser default on nopass ~* &* +@all", false},
		{"default overridden", "user default on >pw ~x:* +@read",
			"user default on #" + pwHex + " ~x:* resetchannels -@all +@read", false},
		{"nopass then password, resetpass", "user a on nopass >pw resetpass nocommands +get +CONFIG|GET",
			"user a on resetchannels -@all +get +config|get\nuser default on nopass ~* &* +@all", false},
		{"remove a password", "user a on >pw >x <x %R~r:* %W~w:* &chan",
			"user a on #" + pwHex + " %R~r:* %W~w:* resetchannels &chan -@all\nuser default on nopass ~* &* +@all", false},
		{"reset", "user a on >pw ~* +@all reset", "user a off resetchannels -@all\nuser default on nopass ~* &* +@all", false},
		{"unknown category", "user acme on >pw ~acme:* +@bogus",
			"f:1: Error in applying operation '+@bogus': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"unknown command", "user acme on >pw +nosuchcmd",
			"f:1: Error in applying operation '+nosuchcmd': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"unknown rule", "user acme bogus",
			"f:1: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"not a user line", "usr acme on",
			"f:1 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"a comment is no user line either, as in Redis", "# users\nuser a on",
			"f:1 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"user without a name", "user",
			"f:1 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"bad hash", "user acme on #abc",
			"f:1: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"upper-case hash", "user acme on #" + strings.ToUpper(pwHex),
			"f:1: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"duplicate user", "user acme on >pw\nuser acme on >pw2",
			"WARNING: Duplicate user 'acme' found on line 2. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"removing a missing password", "user a <nope",
			"f:1: The password you are trying to remove from the user does not exist. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"pattern after allkeys", "user a allkeys ~x",
			"f:1: Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"two errors on two lines", "user a bogus\nuser b +@nope",
			"f:1: Syntax error. f:2: Error in applying operation '+@nope': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", true},
		{"selectors", "user a on (+get ~x)", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := parseACL("f", []byte(tc.text), "")
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error; want %q", tc.want)
				}
				if tc.want != "" && err.Error() != tc.want {
					t.Fatalf("error\n got %q\nwant %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, n := range st.names {
				lines = append(lines, st.users[n].describe())
			}
			if got := strings.Join(lines, "\n"); got != tc.want {
				t.Fatalf("ACL LIST\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestParseACLRequirePass: --requirepass is the built-in default user's password; a
// default user in the file replaces it.
func TestParseACLRequirePass(t *testing.T) {
	st, err := parseACL("f", []byte("user a on nopass"), "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if !st.needAuth || st.login(nil, []byte("s3cret")) == nil || st.login(nil, []byte("x")) != nil {
		t.Fatalf("default user with --requirepass: needAuth %v", st.needAuth)
	}
	st, err = parseACL("f", []byte("user default on nopass -@all +ping"), "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if st.needAuth || st.login(nil, []byte("anything")) == nil {
		t.Fatal("the file's nopass default user does not log in without a password")
	}
}

// FuzzACLFile: no file crashes the parser; a file it accepts lists users whose lines
// parse again to the same users.
func FuzzACLFile(f *testing.F) {
	for _, seed := range []string{
		"user acme on >pw ~acme:* +@ratelimit",
		"user default on nopass ~* &* +@all\nuser b off #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 -@all +get",
		"user a on %R~r:* %W~w:* &c resetchannels allchannels reset nocommands +client|list -client",
		"user a bogus\nusr b", "user x on (+get ~x)", "user a <b !00", "\r\n\r\nuser a on ~[a-z]* +@read -@write",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		st, err := parseACL("f", []byte(text), "")
		if err != nil {
			return
		}
		var lines []string
		for _, n := range st.names {
			lines = append(lines, st.users[n].describe())
		}
		again, err := parseACL("f", []byte(strings.Join(lines, "\n")), "")
		if err != nil {
			t.Fatalf("ACL LIST of %q does not parse: %v\n%s", text, err, strings.Join(lines, "\n"))
		}
		for _, n := range st.names {
			a, b := st.users[n], again.users[n]
			if b == nil || a.describe() != b.describe() || a.open != b.open || !equalBits(a.cmds, b.cmds) {
				t.Fatalf("user %q differs after ACL LIST and parse: %v / %v", n, a.describe(), b)
			}
		}
	})
}

func equalBits(a, b bits) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// aclRig is a dispatcher with an ACL file.
type aclRig struct {
	t    *testing.T
	d    *Dispatcher
	path string
}

func newACLRig(t *testing.T, text, requirePass string) *aclRig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Origin: eng, Host: noHost{}, Role: "origin", RequirePass: requirePass, ACLFile: path})
	if err := d.LoadACL(); err != nil {
		t.Fatal(err)
	}
	return &aclRig{t: t, d: d, path: path}
}

// steps serves each command on s and checks its reply starts with want.
func (r *aclRig) steps(s *Session, steps []aclStep) {
	r.t.Helper()
	for _, st := range steps {
		if got := r.serve(s, st.cmd); !strings.HasPrefix(got, st.want) {
			r.t.Fatalf("%s = %q, want %q...", st.cmd, got, st.want)
		}
	}
}

type aclStep struct{ cmd, want string }

func (r *aclRig) serve(s *Session, line string) string {
	var w resp.Writer
	r.d.Serve(s, &w, split(line))
	return string(w.Bytes())
}

func split(line string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(line) {
		out = append(out, []byte(f))
	}
	return out
}

const aclTenants = `user default on >adminpw ~* &* +@all
user acme on >acmepw ~acme:* +@ratelimit +@read +@write +@connection -@admin
user ro on >ropw %R~* +@read +@ratelimit
user scripts on >scpw ~lim:* +@scripting +get
user off off >offpw +@all ~*
user cli on >clipw +client -client|list
user watch on >wpw %R~acme:* %W~w:* +watch
`

// TestACLPermissions: commands and keys a user may and may not use, with Redis 7's
// NOPERM texts.
func TestACLPermissions(t *testing.T) {
	r := newACLRig(t, aclTenants, "")
	const (
		noKey = "-NOPERM No permissions to access a key\r\n"
		ok    = "+OK\r\n"
	)
	noCmd := func(user, cmd string) string {
		return "-NOPERM User " + user + " has no permissions to run the '" + cmd + "' command\r\n"
	}
	tests := []struct {
		user, pass string
		cmd        string
		want       string // a prefix of the reply
	}{
		{"acme", "acmepw", "RL.LIMIT acme:u1 10 1m", "*5\r\n:1"},
		{"acme", "acmepw", "RL.LIMIT u1 10 1m NS acme", "*5\r\n:1"},
		{"acme", "acmepw", "rl.limit u1 10 1m ns acme cost 2", "*5\r\n:1"},
		{"acme", "acmepw", "RL.LIMIT u1 10 1m", noKey},                  // the default namespace: the bare key
		{"acme", "acmepw", "RL.LIMIT acme:u1 10 1m NS other", noKey},    // other:acme:u1
		{"acme", "acmepw", "RL.LIMIT u1 10 1m NS acme NS other", noKey}, // every NS counts
		{"acme", "acmepw", "RL.LIMIT u1 10 1m NS default", noKey},
		{"acme", "acmepw", "RL.STATUS u1 1m NS acme", "*"},
		{"acme", "acmepw", "RL.STATUS globex:u1 1m", noKey},
		{"acme", "acmepw", "RL.RESET u1 1m 1h NS acme", ":1"},
		{"acme", "acmepw", "RL.RESET acme:u1 1m", ":1"},
		{"acme", "acmepw", "RL.RESET u1 1m", noKey},
		{"acme", "acmepw", "RL.RESET u1 1m NS other", noKey},
		{"acme", "acmepw", "INCR acme:c", ":1"},
		{"acme", "acmepw", "INCR other", noKey},
		{"acme", "acmepw", "GET other", noKey},
		{"acme", "acmepw", "DEL acme:c acme:d other", noKey},
		{"acme", "acmepw", "DEL acme:c acme:d", ":1"},
		{"acme", "acmepw", "CL.THROTTLE acme:t 10 10 60", "*5"},
		{"acme", "acmepw", "CL.THROTTLE t 10 10 60", noKey},
		{"acme", "acmepw", "CONFIG GET maxclients", noCmd("acme", "config|get")},
		{"acme", "acmepw", "ACL LOAD", noCmd("acme", "acl|load")},
		{"acme", "acmepw", "ACL WHOAMI", noCmd("acme", "acl|whoami")}, // @slow only, as in Redis
		{"acme", "acmepw", "CLIENT LIST", noCmd("acme", "client|list")},
		{"acme", "acmepw", "CLIENT ID", ":"},
		{"acme", "acmepw", "INFO", noCmd("acme", "info")},
		{"acme", "acmepw", "EVALSHA 0000000000000000000000000000000000000000 1 acme:x", noCmd("acme", "evalsha")},
		{"acme", "acmepw", "PING", "+PONG"},
		{"acme", "acmepw", "COMMAND", "*"}, // @slow @connection, as its subcommands
		{"acme", "acmepw", "COMMAND DOCS rl.limit", "*"},
		{"ro", "ropw", "GET anything", "$-1"},
		{"ro", "ropw", "RL.STATUS k 1m", "*"},
		{"ro", "ropw", "RL.LIMIT k 10 1m", noKey}, // @ratelimit allows it; %R~* grants no write
		{"ro", "ropw", "INCR k", noCmd("ro", "incr")},
		{"scripts", "scpw", "EVALSHA 0000000000000000000000000000000000000000 1 lim:a", "-NOSCRIPT"},
		{"scripts", "scpw", "EVALSHA 0000000000000000000000000000000000000000 2 lim:a other", noKey},
		{"scripts", "scpw", "EVAL x 1 other", noKey},
		{"scripts", "scpw", "GET other", noKey},
		{"scripts", "scpw", "SCRIPT FLUSH", ok},
		{"cli", "clipw", "CLIENT ID", ":"}, // +client: every subcommand
		{"cli", "clipw", "client getname", "$-1"},
		{"cli", "clipw", "CLIENT LIST", noCmd("cli", "client|list")},
		{"cli", "clipw", "PING", noCmd("cli", "ping")},
		{"watch", "wpw", "WATCH acme:k", ok}, // a matching pattern will do, as Redis 7's key spec
		{"watch", "wpw", "WATCH w:k", ok},
		{"watch", "wpw", "WATCH acme:k w:k", ok},
		{"watch", "wpw", "WATCH acme:k other:k", noKey},
		{"default", "adminpw", "CONFIG GET maxclients", "*"},
		{"default", "adminpw", "ACL WHOAMI", "$7\r\ndefault"},
		// RL.OVERRIDE SET and DEL are @admin, not @ratelimit: an application cannot raise its
		// own limit; GET and LIST are @read @ratelimit.
		{"acme", "acmepw", "RL.OVERRIDE SET acme:u1 1m 1000", noCmd("acme", "rl.override|set")},
		{"acme", "acmepw", "RL.OVERRIDE DEL acme:u1 1m", noCmd("acme", "rl.override|del")},
		{"ro", "ropw", "RL.OVERRIDE SET k 1m 1000", noCmd("ro", "rl.override|set")},
		{"ro", "ropw", "RL.OVERRIDE GET k 1m", "$-1"},
		{"ro", "ropw", "RL.OVERRIDE LIST", "*0"},
		{"default", "adminpw", "RL.OVERRIDE SET k 1m 1000", ok},
	}
	for _, tc := range tests {
		s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		if got := r.serve(s, "AUTH "+tc.user+" "+tc.pass); got != ok {
			t.Fatalf("AUTH %s = %q", tc.user, got)
		}
		if got := r.serve(s, tc.cmd); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %s = %q, want %q...", tc.user, tc.cmd, got, tc.want)
		}
	}
}

// TestACLAuth: who logs in with what; an unauthenticated connection gets NOAUTH; a
// disabled user cannot log in; ACL WHOAMI, USERS and CLIENT LIST's user= say who.
func TestACLAuth(t *testing.T) {
	r := newACLRig(t, aclTenants, "")
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	r.steps(s, []aclStep{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"AUTH acme wrong", wrongPass},
		{"AUTH acmepw", wrongPass}, // the default user's password is another
		{"AUTH off offpw", wrongPass},
		{"AUTH nobody x", wrongPass},
		{"HELLO 3 AUTH acme acmepw", "%7"},
		{"ACL WHOAMI", "-NOPERM User acme has no permissions to run the 'acl|whoami' command\r\n"},
		{"CLIENT INFO", "$"},
		{"AUTH adminpw", "+OK\r\n"},
		{"ACL WHOAMI", "$7\r\ndefault\r\n"},
		{"ACL USERS", "*7\r\n$4\r\nacme\r\n$3\r\ncli\r\n$7\r\ndefault\r\n$3\r\noff\r\n$2\r\nro\r\n$7\r\nscripts\r\n$5\r\nwatch\r\n"},
		{"ACL CAT ratelimit", "*6\r\n$11\r\ncl.throttle\r\n$8\r\nrl.limit\r\n$15\r\nrl.override|get\r\n" +
			"$16\r\nrl.override|list\r\n$8\r\nrl.reset\r\n$9\r\nrl.status\r\n"},
		{"ACL CAT nosuch", "-ERR Unknown category 'nosuch'\r\n"},
		{"ACL SETUSER x on", "-ERR ACL SETUSER is not supported"},
		{"ACL NOPE", "-ERR unknown subcommand 'NOPE'. Try ACL HELP.\r\n"},
	})
	if line := s.ClientLine(0); !strings.HasSuffix(line, " user=default") {
		t.Errorf("CLIENT LIST line %q does not end with user=default", line)
	}
	s.setUser(r.d.acl.Load(), r.d.acl.Load().users["acme"])
	if line := s.ClientLine(0); !strings.HasSuffix(line, " user=acme") {
		t.Errorf("CLIENT LIST line %q does not end with user=acme", line)
	}
}

// TestACLMulti: a command refused by the ACL inside MULTI answers NOPERM when queued, and
// EXEC answers EXECABORT, as Redis 7.
func TestACLMulti(t *testing.T) {
	r := newACLRig(t, aclTenants+"user tx on >txpw ~acme:* +@ratelimit +@transaction +@connection\n", "")
	r.steps(NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0), []aclStep{
		{"AUTH tx txpw", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RL.LIMIT acme:a 10 1m", "+QUEUED\r\n"},
		{"RL.LIMIT other 10 1m", "-NOPERM No permissions to access a key\r\n"},
		{"GET acme:a", "-NOPERM User tx has no permissions to run the 'get' command\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RL.LIMIT acme:a 10 1m", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n*5\r\n:1"},
	})
}

// TestACLLoad: ACL LOAD puts the edited file in force for connections already logged in;
// a file with an error keeps the users in force and answers Redis's error; a user removed
// closes its connections.
func TestACLLoad(t *testing.T) {
	r := newACLRig(t, aclTenants, "")
	admin := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	acme := NewSession(2, "127.0.0.1:5001", "127.0.0.1:6380", 0)
	ro := NewSession(3, "127.0.0.1:5002", "127.0.0.1:6380", 0)
	for s, auth := range map[*Session]string{admin: "AUTH adminpw", acme: "AUTH acme acmepw", ro: "AUTH ro ropw"} {
		if got := r.serve(s, auth); got != "+OK\r\n" {
			t.Fatalf("%s = %q", auth, got)
		}
	}
	write := func(text string) {
		if err := os.WriteFile(r.path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("user default on >adminpw ~* +@all\nuser acme on >acmepw ~acme:* +@ratelimit +bogus\n")
	want := "-ERR " + r.path + ":2: Error in applying operation '+bogus': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n"
	if got := r.serve(admin, "ACL LOAD"); got != want {
		t.Fatalf("ACL LOAD of a bad file = %q, want %q", got, want)
	}
	if got := r.serve(acme, "INCR acme:x"); got != ":1\r\n" {
		t.Fatalf("after a failed ACL LOAD, INCR = %q", got)
	}
	write("user default on >adminpw ~* +@all\nuser acme on >acmepw ~acme:* +@ratelimit\n")
	if got := r.serve(admin, "ACL LOAD"); got != "+OK\r\n" {
		t.Fatalf("ACL LOAD = %q", got)
	}
	if got := r.serve(acme, "INCR acme:x"); got != "-NOPERM User acme has no permissions to run the 'incr' command\r\n" {
		t.Fatalf("after ACL LOAD, INCR = %q", got)
	}
	if got := r.serve(acme, "RL.LIMIT acme:x 1 1m"); !strings.HasPrefix(got, "*5\r\n:1") {
		t.Fatalf("after ACL LOAD, RL.LIMIT = %q", got)
	}
	if got := r.serve(ro, "RL.STATUS k 1m"); got != "-"+errUserGone+"\r\n" || !ro.Closing() {
		t.Fatalf("a removed user's connection: %q, closing %v", got, ro.Closing())
	}
	noFile := New(Options{Limiter: r.d.opt.Limiter, Host: noHost{}})
	var w resp.Writer
	noFile.Serve(NewSession(9, "", "", 0), &w, split("ACL LOAD"))
	if got := string(w.Bytes()); got != "-"+errACLNoFile+"\r\n" {
		t.Fatalf("ACL LOAD without --aclfile = %q", got)
	}
}

// TestACLWithoutFile: without --aclfile nothing changes: the default user, with
// --requirepass, holds every permission and connections carry no user to check.
func TestACLWithoutFile(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Origin: eng, Host: noHost{}, RequirePass: "pw"})
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	var w resp.Writer
	for _, step := range []struct{ cmd, want string }{
		{"GET k", "-NOAUTH Authentication required.\r\n"},
		{"AUTH other pw", wrongPass},
		{"AUTH default pw", "+OK\r\n"},
		{"CONFIG GET nothing", "*0\r\n"},
		{"ACL LIST", "*1\r\n$"},
		{"ACL WHOAMI", "$7\r\ndefault\r\n"},
	} {
		w.Reset()
		d.Serve(s, &w, split(step.cmd))
		if got := string(w.Bytes()); !strings.HasPrefix(got, step.want) {
			t.Fatalf("%s = %q, want %q...", step.cmd, got, step.want)
		}
	}
	if s.user != nil {
		t.Fatal("a connection without --aclfile holds a user to check")
	}
}

// TestACLCategoriesCoverTable: every command of the table that an ACL user can run has
// its categories written in aclCommandCategories or aclSubcommands (not guessed from its
// flags), and @all holds every one.
func TestACLCategoriesCoverTable(t *testing.T) {
	tab := aclCommands()
	for _, c := range append(commandTable(), kvCommands()...) {
		_, plain := aclCommandCategories[c.Name]
		_, container := aclSubcommands[c.Name]
		if !plain && !container {
			t.Errorf("command %q has no ACL categories in acl_table.go", c.Name)
		}
	}
	all := newACLUser("x")
	if err := all.apply("+@all"); err != nil || !all.cmds.full(len(tab.names)) {
		t.Fatalf("+@all: %v", err)
	}
	for _, n := range []string{"rl.limit", "rl.status", "cl.throttle"} {
		found := false
		for _, b := range tab.members["ratelimit"] {
			found = found || tab.names[b] == n
		}
		if !found {
			t.Errorf("%s is not in @ratelimit", n)
		}
	}
}

// TestACLDefaultRestricted: a file's default user "on nopass" with few permissions is
// what a connection that never authenticates runs as.
func TestACLDefaultRestricted(t *testing.T) {
	r := newACLRig(t, "user default on nopass ~pub:* +get +@connection\nuser admin on >adminpw ~* +@all\n", "")
	r.steps(NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0), []aclStep{
		{"GET pub:x", "$-1\r\n"},
		{"GET other", "-NOPERM No permissions to access a key\r\n"},
		{"INCR pub:x", "-NOPERM User default has no permissions to run the 'incr' command\r\n"},
		{"AUTH admin adminpw", "+OK\r\n"},
		{"INCR other", ":1\r\n"},
	})
}

// TestACLScriptCalls: a script's redis.call is checked against the caller's command
// permissions, as Redis 7's scriptVerifyACL: a user with +@read +eval may GET but not DEL
// nor read TIME from a script, with redis-server 7.0.15's texts (byte for byte).
func TestACLScriptCalls(t *testing.T) {
	r := newACLRig(t, "user default on nopass ~* &* +@all\nuser lua on >luapw ~acme:* +@read +eval\n", "")
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	if got := r.serve(s, "AUTH lua luapw"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	const noCmd = "-ERR The user executing the script can't run this command or subcommand"
	del, tm := "return redis.call('DEL',KEYS[1])", "return redis.call('time')"
	tail := func(script string) string {
		sum := sha1.Sum([]byte(script))
		return " script: " + hex.EncodeToString(sum[:]) + ", on @user_script:1.\r\n"
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"EVAL", del, "1", "acme:x"}, noCmd + tail(del)},
		{[]string{"EVAL", "return redis.pcall('DEL',KEYS[1])", "1", "acme:x"}, noCmd + "\r\n"},
		{[]string{"EVAL", tm, "0"}, noCmd + tail(tm)},
		{[]string{"EVAL", "return redis.call('GET',KEYS[1])", "1", "acme:x"}, "$-1\r\n"},
		{[]string{"EVAL", "return redis.call('incr',KEYS[1],'x')", "1", "acme:x"}, // arity first, as Redis
			"-ERR Wrong number of args calling Redis command from script" + tail("return redis.call('incr',KEYS[1],'x')")},
	} {
		if got := serveArgs(r.d, s, tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestACLScriptOnEdge: an edge cannot check a script's calls against a user's rules (its
// origin runs the script without the user), so an interpreted script of a user who may not
// run every command scripts call is refused there with the reason; a user who may is
// forwarded, and a known script is not the interpreter's to check.
func TestACLScriptOnEdge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	text := "user default on nopass ~* &* +@all\nuser lua on >pw ~acme:* +@read +eval +multi +exec\nuser full on >pw ~acme:* +@all\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var forwarded int
	fwd := func(context.Context, string, []byte, int, [][]byte) ([]byte, error) {
		forwarded++
		return []byte(":1\r\n"), nil
	}
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Limiter: Local(eng), Host: noHost{}, Role: "edge", Forward: fwd, ACLFile: path})
	if err := d.LoadACL(); err != nil {
		t.Fatal(err)
	}
	serve := func(s *Session, args ...string) string { return serveArgs(d, s, args...) }
	script := "return redis.call('DEL',KEYS[1])"
	for _, tc := range []struct {
		user string
		want string
		fwd  int
	}{
		{"lua", "-ERR on an edge, the commands of a script cannot be checked against user lua's", 0},
		{"full", ":1\r\n", 1},
	} {
		forwarded = 0
		s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		if got := serve(s, "AUTH", tc.user, "pw"); got != "+OK\r\n" {
			t.Fatalf("AUTH %s = %q", tc.user, got)
		}
		if got := serve(s, "EVAL", script, "1", "acme:x"); !strings.HasPrefix(got, tc.want) || forwarded != tc.fwd {
			t.Errorf("%s: EVAL = %q, forwarded %d; want %q..., forwarded %d", tc.user, got, forwarded, tc.want, tc.fwd)
		}
		// In MULTI the refusal comes when queued, and EXEC aborts, as for NOPERM.
		serve(s, "MULTI")
		got := serve(s, "EVAL", script, "1", "acme:x")
		exec := serve(s, "EXEC")
		if tc.fwd == 0 && (!strings.HasPrefix(got, tc.want) || !strings.HasPrefix(exec, "-EXECABORT")) {
			t.Errorf("%s: queued EVAL = %q, EXEC = %q; want the refusal, then EXECABORT", tc.user, got, exec)
		}
	}
}
