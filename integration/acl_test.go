package integration

// ACL users (--aclfile) with the real binary, go-redis and redis-cli, and the NOPERM
// replies compared with redis-server's for the same users (README "Users and ACLs").

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// aclCommon are users both Ratchet and redis-server load: only Redis's commands and
// categories.
const aclCommon = `user default on >adminpw ~* &* +@all
user counter on >cpw ~acme:* resetchannels -@all +get +incr +ping +multi +exec
`

// aclTenant is Ratchet's tenant: its rate limits and counters under acme:, nothing else.
const aclTenant = "user acme on >acmepw ~acme:* resetchannels -@all +@ratelimit +@connection +get +incr\n"

// writeACL writes an ACL file into dir and returns its path.
func writeACL(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestACLTenant: a tenant user confined to ~acme:* with +@ratelimit runs RL.LIMIT in NS
// acme or on keys acme:..., and gets Redis 7's NOPERM for other keys and for CONFIG and
// ACL LOAD, through go-redis (HELLO 3 AUTH) and redis-cli (AUTH user pass).
func TestACLTenant(t *testing.T) {
	t.Parallel()
	acl := writeACL(t, t.TempDir(), aclCommon+aclTenant)
	p := start(t, "--aclfile", acl, "--data-dir", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	acme := p.client(t, &redis.Options{Username: "acme", Password: "acmepw"})
	for _, args := range [][]any{
		{"RL.LIMIT", "u1", 10, "1m", "NS", "acme"},
		{"RL.LIMIT", "acme:u1", 10, "1m"},
		{"RL.STATUS", "u1", "1m", "NS", "acme"},
		{"INCR", "acme:hits"},
	} {
		if err := acme.Do(ctx, args...).Err(); err != nil {
			t.Errorf("acme: %v: %v", args, err)
		}
	}
	const noKey = "NOPERM No permissions to access a key"
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"RL.LIMIT", "u1", 10, "1m"}, noKey},
		{[]any{"RL.LIMIT", "u1", 10, "1m", "NS", "globex"}, noKey},
		{[]any{"RL.LIMIT", "globex:u1", 10, "1m"}, noKey},
		{[]any{"INCR", "globex:hits"}, noKey},
		{[]any{"CONFIG", "GET", "maxclients"}, "NOPERM User acme has no permissions to run the 'config|get' command"},
		{[]any{"ACL", "LOAD"}, "NOPERM User acme has no permissions to run the 'acl|load' command"},
		{[]any{"DEL", "acme:hits"}, "NOPERM User acme has no permissions to run the 'del' command"},
	} {
		err := acme.Do(ctx, tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("acme: %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if u := counted(t, p.client(t, &redis.Options{Password: "adminpw"}), "u1", "1m", "NS", "acme"); u != 1 {
		t.Errorf("count of acme's u1 = %d, want 1 (the refused requests counted nothing)", u)
	}

	out := redisCLI(t, p, "--user", "acme", "--pass", "acmepw", "--no-auth-warning", "RL.LIMIT", "acme:cli", "10", "1d")
	if lines := strings.Fields(out); len(lines) != 5 || lines[0] != "1" {
		t.Errorf("redis-cli as acme, RL.LIMIT acme:cli: %q", out)
	}
	out = redisCLI(t, p, "--user", "acme", "--pass", "acmepw", "--no-auth-warning", "RL.LIMIT", "cli", "10", "1d")
	if strings.TrimSpace(out) != noKey {
		t.Errorf("redis-cli as acme, RL.LIMIT cli: %q", out)
	}

	admin := p.client(t, &redis.Options{Password: "adminpw", PoolSize: 1})
	if who, err := acme.Do(ctx, "ACL", "WHOAMI").Result(); err == nil {
		t.Errorf("acme: ACL WHOAMI = %v; it is @slow only, and acme has not +@slow", who)
	}
	list, err := admin.Do(ctx, "CLIENT", "LIST").Text()
	if err != nil || !strings.Contains(list, " user=acme") || !strings.Contains(list, " user=default") {
		t.Errorf("CLIENT LIST: %v\n%s", err, list)
	}
	users, err := admin.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil || strings.Join(users, ",") != "acme,counter,default" {
		t.Errorf("ACL USERS = %v, %v", users, err)
	}
	// A wrong password for a user is refused as Redis does.
	if err := p.client(t, &redis.Options{Username: "acme", Password: "nope"}).Ping(ctx).Err(); err == nil ||
		!strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("acme with a wrong password: %v", err)
	}
}

// TestACLMatchesRedisServer: for users both load from the same lines, NOPERM replies (in
// and out of MULTI) and ACL LOAD's error for a bad file are Redis's. The redis-server
// here may be 7.0, which words NOPERM as before 7.2 ("this user has no permissions ...");
// Ratchet answers as 7.2 (it reports redis_version 7.2.0), so 7.0's two texts are
// translated to 7.2's before comparing.
func TestACLMatchesRedisServer(t *testing.T) {
	t.Parallel()
	ratchetACL := writeACL(t, t.TempDir(), aclCommon+aclTenant)
	redisACL := writeACL(t, t.TempDir(), aclCommon)
	redisAddr := startRedisServer(t, "--aclfile", redisACL)
	p := start(t, "--aclfile", ratchetACL, "--data-dir", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ratchet := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "counter", Password: "cpw", PoolSize: 1, MaxRetries: -1})
	real := redis.NewClient(&redis.Options{Addr: redisAddr, Username: "counter", Password: "cpw", PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = ratchet.Close(); _ = real.Close() })
	realAdmin := redis.NewClient(&redis.Options{Addr: redisAddr, Password: "adminpw", PoolSize: 1})
	version := infoFields(realAdmin.Info(ctx, "server").Val())["redis_version"]
	_ = realAdmin.Close()
	translate := func(s string) string { return s }
	if strings.HasPrefix(version, "7.0.") || strings.HasPrefix(version, "7.1.") {
		cmdRE := regexp.MustCompile(`^NOPERM this user has no permissions to run the '(.*)' command$`)
		translate = func(s string) string {
			s = cmdRE.ReplaceAllString(s, "NOPERM User counter has no permissions to run the '$1' command")
			return strings.Replace(s, "NOPERM this user has no permissions to access one of the keys used as arguments",
				"NOPERM No permissions to access a key", 1)
		}
		t.Logf("redis-server %s: its NOPERM texts translated to 7.2's", version)
	}
	reply := func(c *redis.Client, args ...any) string {
		v, err := c.Do(ctx, args...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "error: " + translate(err.Error())
		}
		return redisString(v)
	}
	for _, args := range [][]any{
		{"GET", "acme:x"}, {"GET", "other"}, {"INCR", "acme:x"}, {"INCR", "other"}, {"GET", "acme:x"},
		{"SET", "acme:x", "1"}, {"DEL", "acme:x"}, {"EXPIRE", "acme:x", "10"}, {"TTL", "other"},
		{"CONFIG", "GET", "maxclients"}, {"ACL", "LOAD"}, {"ACL", "LIST"}, {"CLIENT", "LIST"},
		{"CLIENT", "ID"}, {"INFO"}, {"DBSIZE"}, {"EVAL", "return 1", "1", "acme:x"}, {"PING"},
	} {
		if want, got := reply(real, args...), reply(ratchet, args...); want != got {
			t.Errorf("%v:\n redis-server %q\n ratchet      %q", args, want, got)
		}
	}
	// In MULTI: the refused command answers NOPERM when queued, and EXEC EXECABORT.
	for _, c := range []*redis.Client{real, ratchet} {
		_ = c.Do(ctx, "PING").Err() // one connection, authenticated
	}
	multi := [][]any{{"MULTI"}, {"INCR", "acme:y"}, {"INCR", "other"}, {"GET", "other"}, {"EXEC"}}
	var replies [2][]string
	for i, c := range []*redis.Client{real, ratchet} {
		conn := c.Conn()
		for _, args := range multi {
			v, err := conn.Do(ctx, args...).Result()
			r := redisString(v)
			if err != nil {
				r = "error: " + translate(err.Error())
			}
			replies[i] = append(replies[i], r)
		}
		_ = conn.Close()
	}
	t.Logf("MULTI replies: %q", replies[1])
	if strings.Join(replies[0], "\n") != strings.Join(replies[1], "\n") {
		t.Errorf("MULTI with refused commands:\n redis-server %q\n ratchet      %q", replies[0], replies[1])
	}

	// COMMAND INFO: the same ACL categories and key positions for every command both have.
	ratchetAdmin := redis.NewClient(&redis.Options{Addr: p.Addr, Password: "adminpw", PoolSize: 1, MaxRetries: -1})
	realAdmin = redis.NewClient(&redis.Options{Addr: redisAddr, Password: "adminpw", PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = ratchetAdmin.Close(); _ = realAdmin.Close() })
	names, err := ratchetAdmin.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatalf("COMMAND LIST: %v", err)
	}
	compared := 0
	for _, name := range names {
		info := func(c *redis.Client) string {
			v, err := c.Do(ctx, "COMMAND", "INFO", name).Slice()
			if err != nil || len(v) != 1 {
				return fmt.Sprint(err)
			}
			e, ok := v[0].([]any)
			if !ok || len(e) < 7 {
				return "(none)"
			}
			return fmt.Sprint(e[3:7]) // first key, last key, step, categories
		}
		want := info(realAdmin)
		if want == "(none)" {
			continue // not a Redis command
		}
		compared++
		if got := info(ratchetAdmin); got != want {
			t.Errorf("COMMAND INFO %s [first last step categories]:\n redis-server %s\n ratchet      %s", name, want, got)
		}
	}
	t.Logf("COMMAND INFO compared for %d commands", compared)

	// ACL LOAD of a bad file: the same error (file names aside), the users kept.
	bad := "user default on >adminpw ~* &* +@all\nuser counter on >cpw ~acme:* +get +nosuchcmd\nusr x\n"
	writeACL(t, filepath.Dir(ratchetACL), bad)
	writeACL(t, filepath.Dir(redisACL), bad)
	var loads [2]string
	for i, addr := range []string{redisAddr, p.Addr} {
		admin := redis.NewClient(&redis.Options{Addr: addr, Password: "adminpw", PoolSize: 1, MaxRetries: -1})
		err := admin.Do(ctx, "ACL", "LOAD").Err()
		_ = admin.Close()
		if err == nil {
			t.Fatalf("ACL LOAD of a bad file on %s: OK", addr)
		}
		loads[i] = strings.NewReplacer(redisACL, "FILE", ratchetACL, "FILE").Replace(err.Error())
	}
	if loads[0] != loads[1] {
		t.Errorf("ACL LOAD of a bad file:\n redis-server %q\n ratchet      %q", loads[0], loads[1])
	}
	if got := reply(ratchet, "INCR", "acme:x"); got != "2" {
		t.Errorf("INCR after a failed ACL LOAD = %q, want 2", got)
	}
}

// redisString renders a go-redis reply for comparison.
func redisString(v any) string {
	switch x := v.(type) {
	case nil:
		return "(nil)"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = redisString(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return fmt.Sprint(x)
	}
}

// TestACLFileRefusedAtStart: a file with an error, or none, stops ratchet before it
// serves, with Redis's message naming the file and line.
func TestACLFileRefusedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{writeACL(t, dir, "user acme on >pw +@nope\n"), "users.acl:1: Error in applying operation '+@nope': Unknown command or category name in ACL."},
		{filepath.Join(dir, "missing.acl"), "missing.acl"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binPath, "--aclfile", tc.path, "--listen", loopback(freePort(t)),
			"--metrics-listen", "", "--data-dir", "")
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Errorf("--aclfile %s: exited %v (timed out: %v); want a failure at once\n%s", tc.path, err, timedOut, out)
		}
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "--aclfile") {
			t.Errorf("--aclfile %s: output does not name the flag and %q:\n%s", tc.path, tc.want, out)
		}
	}
}

// TestACLEdge: an edge with --aclfile checks its clients' permissions itself, before
// deciding locally or forwarding to its origin (which has no users of its own): the
// tenant's RL.LIMIT and INCR under acme: work, others are refused with NOPERM.
func TestACLEdge(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	edge := startEdge(t, []*proc{origin}, "--aclfile", writeACL(t, t.TempDir(), aclCommon+aclTenant))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acme := edge.client(t, &redis.Options{Username: "acme", Password: "acmepw"})
	for _, args := range [][]any{{"RL.LIMIT", "u1", 10, "1m", "NS", "acme"}, {"INCR", "acme:hits"}} {
		if err := acme.Do(ctx, args...).Err(); err != nil {
			t.Errorf("acme on the edge: %v: %v", args, err)
		}
	}
	for _, args := range [][]any{{"RL.LIMIT", "u1", 10, "1m", "NS", "globex"}, {"INCR", "globex:hits"}} {
		if err := acme.Do(ctx, args...).Err(); err == nil || err.Error() != "NOPERM No permissions to access a key" {
			t.Errorf("acme on the edge: %v: %v, want NOPERM", args, err)
		}
	}
	if v, err := origin.client(t, nil).Get(ctx, "acme:hits").Result(); err != nil || v != "1" {
		t.Errorf("GET acme:hits on the origin = %q, %v; want 1 (forwarded once)", v, err)
	}
	if err := edge.client(t, nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("PING on the edge without AUTH: %v, want NOAUTH (the file's default user has a password)", err)
	}
}
