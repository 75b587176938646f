package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

const (
	noauth    = "NOAUTH Authentication required."
	wrongpass = "WRONGPASS invalid username-password pair or user is disabled."
)

// Test 6: --requirepass.
func TestAuth(t *testing.T) {
	t.Parallel()
	p := start(t, "--requirepass", "s3cret")
	ctx := context.Background()

	t.Run("raw", func(t *testing.T) {
		c := dialRaw(t, p.Addr)
		for _, args := range [][]string{
			{"PING"}, {"RL.LIMIT", "k", "10", "1m"}, {"RL.STATUS", "k", "1m"}, {"INFO"}, {"DBSIZE"},
			{"CLIENT", "ID"}, {"CLIENT", "SETNAME", "x"}, {"ECHO", "x"}, {"TIME"}, {"SELECT", "0"},
			{"COMMAND", "COUNT"}, {"CONFIG", "GET", "save"},
		} {
			if got := asError(t, c.do(args...)); got != noauth {
				t.Errorf("%q before AUTH: got %q, want %q", args, got, noauth)
			}
		}
		if got := asError(t, c.do("HELLO", "3")); !strings.HasPrefix(got, "NOAUTH") {
			t.Errorf("HELLO 3 without AUTH: got %q, want a NOAUTH error", got)
		}
		for _, args := range [][]string{{"AUTH", "wrong"}, {"AUTH", "default", "wrong"}, {"AUTH", "bob", "s3cret"},
			{"HELLO", "3", "AUTH", "default", "wrong"}} {
			if got := asError(t, c.do(args...)); got != wrongpass {
				t.Errorf("%q: got %q, want %q", args, got, wrongpass)
			}
		}
		if got := asError(t, c.do("PING")); got != noauth {
			t.Errorf("PING after failed AUTHs: got %q", got)
		}
		if v := c.do("AUTH", "s3cret"); v != "OK" {
			t.Fatalf("AUTH s3cret = %#v", v)
		}
		c.expectPong()
		if r := ints(t, c.do("RL.LIMIT", "k", "10", "1d")); r[0] != 1 || r[2] != 9 {
			t.Errorf("RL.LIMIT after AUTH = %v", r)
		}

		c2 := dialRaw(t, p.Addr)
		if v := c2.do("AUTH", "default", "s3cret"); v != "OK" {
			t.Fatalf("AUTH default s3cret = %#v", v)
		}
		if r := ints(t, c2.do("RL.LIMIT", "k", "10", "1d")); r[0] != 1 || r[2] != 8 {
			t.Errorf("RL.LIMIT after AUTH default = %v", r)
		}

		c3 := dialRaw(t, p.Addr)
		m, ok := c3.do("HELLO", "3", "AUTH", "default", "s3cret").(respMap)
		if !ok {
			t.Fatal("HELLO 3 AUTH default s3cret did not return a map")
		}
		if v, _ := m.get("proto"); v != int64(3) {
			t.Errorf("HELLO 3 AUTH: proto = %#v", v)
		}
		if _, ok := c3.do("RL.STATUS", "k", "1d").(respMap); !ok {
			t.Errorf("RL.STATUS after HELLO 3 AUTH is not a map")
		}
	})

	t.Run("go-redis without password", func(t *testing.T) {
		c := p.client(t, nil)
		if err := c.Ping(ctx).Err(); err == nil || err.Error() != noauth {
			t.Errorf("PING: got %v, want %q", err, noauth)
		}
		if err := c.Do(ctx, "RL.LIMIT", "k", 10, "1d").Err(); err == nil || err.Error() != noauth {
			t.Errorf("RL.LIMIT: got %v, want %q", err, noauth)
		}
	})

	t.Run("go-redis with password", func(t *testing.T) {
		for _, proto := range []int{2, 3} {
			c := p.client(t, &redis.Options{Password: "s3cret", Protocol: proto})
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("protocol %d: PING: %v", proto, err)
			}
			limitReply(t, c, "gr", 10, "1d")
			_, shape := status(t, c, "gr", "1d")
			if want := map[int]string{2: "array", 3: "map"}[proto]; shape != want {
				t.Errorf("protocol %d: RL.STATUS is a %s, want a %s (HELLO %d AUTH must have worked)", proto, shape, want, proto)
			}
		}
		if u := used(t, p.client(t, &redis.Options{Username: "default", Password: "s3cret"}), "gr", "1d"); u != 2 {
			t.Errorf("used = %d, want 2", u)
		}
	})

	t.Run("go-redis with a wrong password", func(t *testing.T) {
		c := p.client(t, &redis.Options{Password: "nope"})
		if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("PING: got %v, want a WRONGPASS error", err)
		}
	})

	t.Run("redis-cli", func(t *testing.T) {
		out := redisCLI(t, p, "RL.LIMIT", "cli", "10", "1d")
		if strings.TrimSpace(out) != noauth {
			t.Errorf("redis-cli without -a: %q", out)
		}
		out = redisCLI(t, p, "-a", "s3cret", "--no-auth-warning", "RL.LIMIT", "cli", "10", "1d")
		if lines := strings.Fields(out); len(lines) != 5 || lines[0] != "1" || lines[2] != "9" {
			t.Errorf("redis-cli -a: %q", out)
		}
	})
}

// Without --requirepass, AUTH with a username behaves as Redis's default user, which has
// no password: any password is accepted (redis 7: AUTH default x -> OK; HELLO 3 AUTH
// default x -> the HELLO map). A client configured with a password then still connects.
func TestAuthWithoutRequirepassLikeRedis(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := dialRaw(t, p.Addr)
	if v := c.do("AUTH", "default", "anything"); v != "OK" {
		t.Errorf("AUTH default anything without --requirepass = %#v, want OK (as Redis)", v)
	}
	c.expectPong()
	if _, ok := c.do("HELLO", "3", "AUTH", "default", "anything").(respMap); !ok {
		t.Errorf("HELLO 3 AUTH default anything without --requirepass did not return the HELLO map (Redis does)")
	}
	c.expectPong()
	gr := p.client(t, &redis.Options{Password: "anything"})
	if err := gr.Ping(context.Background()).Err(); err != nil {
		t.Errorf("go-redis with a password against a server without one: %v (Redis accepts it)", err)
	}
}

// Test 7: HELLO and the compatibility commands.
func TestHelloAndCompatibilityCommands(t *testing.T) {
	t.Parallel()
	p := start(t, "--max-clients", "77")
	c := dialRaw(t, p.Addr)

	// HELLO without a version answers in the current protocol: RESP2, a flat array.
	arr, ok := c.do("HELLO").([]any)
	if !ok || len(arr)%2 != 0 {
		t.Fatalf("HELLO: %#v", arr)
	}

	m, ok := c.do("HELLO", "3").(respMap)
	if !ok {
		t.Fatal("HELLO 3 did not return a RESP3 map")
	}
	if v, _ := m.get("proto"); v != int64(3) {
		t.Errorf("HELLO 3: proto = %#v, want 3", v)
	}
	for _, f := range []string{"server", "version", "id", "mode", "role", "modules"} {
		if _, ok := m.get(f); !ok {
			t.Errorf("HELLO 3 has no %q", f)
		}
	}
	helloID, _ := m.get("id")

	// After HELLO 3 every reply is RESP3.
	if _, ok := c.do("RL.STATUS", "h", "1m").(respMap); !ok {
		t.Error("RL.STATUS after HELLO 3 is not a map")
	}
	if v := c.do("CLIENT", "GETNAME"); v != (respNull{}) {
		t.Errorf("CLIENT GETNAME without a name in RESP3 = %#v, want _ (null)", v)
	}
	if cfg, ok := c.do("CONFIG", "GET", "maxclients").(respMap); !ok || len(cfg) != 1 || cfg[0].K != "maxclients" || cfg[0].V != "77" {
		t.Errorf("CONFIG GET maxclients in RESP3 = %#v, want a map maxclients=77", cfg)
	}

	if got := asError(t, c.do("HELLO", "4")); !strings.HasPrefix(got, "NOPROTO") {
		t.Errorf("HELLO 4: got %q, want NOPROTO", got)
	}
	if got := asError(t, c.do("HELLO", "1")); !strings.HasPrefix(got, "NOPROTO") {
		t.Errorf("HELLO 1: got %q, want NOPROTO", got)
	}
	if _, ok := c.do("RL.STATUS", "h", "1m").(respMap); !ok {
		t.Error("a refused HELLO 4 changed the protocol")
	}

	if m, ok := c.do("HELLO", "3", "SETNAME", "viahello").(respMap); !ok || len(m) == 0 {
		t.Error("HELLO 3 SETNAME did not return a map")
	}
	if v := c.do("CLIENT", "GETNAME"); v != "viahello" {
		t.Errorf("CLIENT GETNAME after HELLO SETNAME = %#v", v)
	}

	// Back to RESP2.
	if arr, ok := c.do("HELLO", "2").([]any); !ok || len(arr) == 0 {
		t.Fatal("HELLO 2 did not return a flat array")
	}
	if _, ok := c.do("RL.STATUS", "h", "1m").([]any); !ok {
		t.Error("RL.STATUS after HELLO 2 is not a flat array")
	}

	// CLIENT.
	if v := c.do("CLIENT", "SETNAME", "app1"); v != "OK" {
		t.Errorf("CLIENT SETNAME = %#v", v)
	}
	if v := c.do("CLIENT", "GETNAME"); v != "app1" {
		t.Errorf("CLIENT GETNAME = %#v", v)
	}
	if got := asError(t, c.do("CLIENT", "SETNAME", "bad name")); !strings.HasPrefix(got, "ERR") {
		t.Errorf("CLIENT SETNAME with a space: %q", got)
	}
	id, ok := c.do("CLIENT", "ID").(int64)
	if !ok || id != helloID {
		t.Errorf("CLIENT ID = %#v, HELLO said id %#v", id, helloID)
	}
	for _, kv := range [][2]string{{"LIB-NAME", "mylib"}, {"lib-ver", "1.2.3"}} {
		if v := c.do("CLIENT", "SETINFO", kv[0], kv[1]); v != "OK" {
			t.Errorf("CLIENT SETINFO %s = %#v", kv[0], v)
		}
	}
	other := dialRaw(t, p.Addr)
	other.expectPong()
	list, _ := c.do("CLIENT", "LIST").(string)
	lines := strings.Split(strings.TrimRight(list, "\n"), "\n")
	if len(lines) < 2 {
		t.Errorf("CLIENT LIST with two connections:\n%s", list)
	}
	var mine string
	for _, l := range lines {
		if strings.HasPrefix(l, "id="+strconv.FormatInt(id, 10)+" ") {
			mine = l
		}
	}
	for _, want := range []string{"name=app1", "lib-name=mylib", "lib-ver=1.2.3", "addr=127.0.0.1:", "resp=2"} {
		if !strings.Contains(mine, want) {
			t.Errorf("CLIENT LIST line of this connection lacks %q: %q", want, mine)
		}
	}
	info, _ := c.do("CLIENT", "INFO").(string)
	if !strings.HasPrefix(info, "id="+strconv.FormatInt(id, 10)+" ") || !strings.Contains(info, "name=app1") {
		t.Errorf("CLIENT INFO = %q", info)
	}

	// PING, ECHO, TIME.
	c.expectPong()
	if v := c.do("PING", "hi there"); v != "hi there" {
		t.Errorf("PING msg = %#v", v)
	}
	if v := c.do("ECHO", "a\r\nb"); v != "a\r\nb" {
		t.Errorf("ECHO = %#v", v)
	}
	tm, ok := c.do("TIME").([]any)
	if !ok || len(tm) != 2 {
		t.Fatalf("TIME = %#v", tm)
	}
	sec, err1 := strconv.ParseInt(tm[0].(string), 10, 64)
	usec, err2 := strconv.ParseInt(tm[1].(string), 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 || sec < time.Now().Unix()-60 || sec > time.Now().Unix()+60 {
		t.Errorf("TIME = %#v", tm)
	}

	// DBSIZE counts cells.
	if v := c.do("DBSIZE"); v != int64(0) {
		t.Errorf("DBSIZE before any count = %#v", v)
	}
	c.do("RL.LIMIT", "a", "10", "1m")
	c.do("RL.LIMIT", "b", "10", "1m")
	if v := c.do("DBSIZE"); v != int64(2) {
		t.Errorf("DBSIZE after counting two keys = %#v, want 2", v)
	}

	// CONFIG GET.
	if v, ok := c.do("CONFIG", "GET", "save").([]any); !ok || len(v) != 2 || v[0] != "save" {
		t.Errorf("CONFIG GET save = %#v", v)
	}
	if v, ok := c.do("CONFIG", "GET", "maxclients").([]any); !ok || len(v) != 2 || v[0] != "maxclients" || v[1] != "77" {
		t.Errorf("CONFIG GET maxclients = %#v, want [maxclients 77]", v)
	}
	if v, ok := c.do("CONFIG", "GET", "appendonly").([]any); !ok || len(v) != 2 || v[1] != "no" {
		t.Errorf("CONFIG GET appendonly = %#v", v)
	}
	if v, ok := c.do("CONFIG", "GET", "no-such-parameter").([]any); !ok || len(v) != 0 {
		t.Errorf("CONFIG GET of an unknown parameter = %#v, want an empty array", v)
	}

	// COMMAND.
	count, ok := c.do("COMMAND", "COUNT").(int64)
	if !ok || count < 14 {
		t.Errorf("COMMAND COUNT = %#v", count)
	}
	if all, ok := c.do("COMMAND").([]any); !ok || int64(len(all)) != count {
		t.Errorf("COMMAND returned %d entries, COMMAND COUNT says %d", len(all), count)
	}
	ci, ok := c.do("COMMAND", "INFO", "rl.limit").([]any)
	if !ok || len(ci) != 1 {
		t.Fatalf("COMMAND INFO rl.limit = %#v", ci)
	}
	entry, ok := ci[0].([]any)
	if !ok || len(entry) < 6 || entry[0] != "rl.limit" || entry[1] != int64(-4) || entry[3] != int64(1) {
		t.Errorf("COMMAND INFO rl.limit entry = %#v, want [rl.limit -4 flags 1 1 1 ...]", ci[0])
	}
	if ci, ok := c.do("COMMAND", "INFO", "RL.STATUS", "nosuch").([]any); !ok || len(ci) != 2 || ci[1] != (respNull{}) {
		t.Errorf("COMMAND INFO RL.STATUS nosuch = %#v", ci)
	}
	docs, ok := c.do("COMMAND", "DOCS", "rl.limit").([]any)
	if !ok || len(docs) != 2 || docs[0] != "rl.limit" {
		t.Fatalf("COMMAND DOCS rl.limit = %#v", docs)
	}
	doc, _ := docs[1].([]any)
	fields := map[string]any{}
	for i := 0; i+1 < len(doc); i += 2 {
		if k, ok := doc[i].(string); ok {
			fields[k] = doc[i+1]
		}
	}
	if s, _ := fields["summary"].(string); s == "" {
		t.Errorf("COMMAND DOCS rl.limit has no summary: %#v", doc)
	}
	if a, _ := fields["arguments"].([]any); len(a) < 3 {
		t.Errorf("COMMAND DOCS rl.limit arguments = %#v", fields["arguments"])
	}

	// INFO.
	all, _ := c.do("INFO").(string)
	for _, sec := range []string{"# Server\r\n", "# Clients\r\n", "# Stats\r\n", "# Ratchet\r\n"} {
		if !strings.Contains(all, sec) {
			t.Errorf("INFO lacks %q:\n%s", sec, all)
		}
	}
	f := infoFields(all)
	for _, k := range []string{"redis_version", "connected_clients", "total_connections_received", "role", "cells"} {
		if _, ok := f[k]; !ok {
			t.Errorf("INFO lacks %s", k)
		}
	}
	if f["cells"] != "2" {
		t.Errorf("INFO cells = %q, want 2", f["cells"])
	}
	only, _ := c.do("INFO", "ratchet").(string)
	if !strings.HasPrefix(only, "# Ratchet\r\n") || strings.Count(only, "# ") != 1 {
		t.Errorf("INFO ratchet is not only the ratchet section:\n%s", only)
	}
	two, _ := c.do("INFO", "server", "CLIENTS").(string)
	if !strings.Contains(two, "# Server") || !strings.Contains(two, "# Clients") || strings.Contains(two, "# Ratchet") {
		t.Errorf("INFO server CLIENTS:\n%s", two)
	}

	// QUIT answers OK and closes.
	if v := c.do("QUIT"); v != "OK" {
		t.Errorf("QUIT = %#v", v)
	}
	c.expectEOF()
}

// installRedisTools installs redis-cli and redis-benchmark on Debian.
const installRedisTools = "apt-get install -y redis-tools"

// redisCLI runs redis-cli against p with args; it fails the test if redis-cli fails.
func redisCLI(t testing.TB, p *proc, args ...string) string {
	t.Helper()
	cli := requireTool(t, "redis-cli", installRedisTools)
	host, port, _ := net.SplitHostPort(p.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// Test 8: redis-cli.
func TestRedisCLI(t *testing.T) {
	t.Parallel()
	requireTool(t, "redis-cli", installRedisTools)
	p := start(t)

	lines := strings.Fields(redisCLI(t, p, "RL.LIMIT", "user:42", "100", "60s"))
	if len(lines) != 5 || lines[0] != "1" || lines[1] != "100" || lines[2] != "99" || lines[3] != "0" {
		t.Fatalf("redis-cli RL.LIMIT printed %q, want 1 100 99 0 reset", lines)
	}
	if n, err := strconv.Atoi(lines[4]); err != nil || n <= 60_000 || n > 120_000 {
		t.Errorf("reset_after_ms printed as %q", lines[4])
	}

	lines = strings.Fields(redisCLI(t, p, "-3", "RL.LIMIT", "user:42", "100", "60s"))
	if len(lines) != 5 || lines[0] != "1" || lines[2] != "98" {
		t.Errorf("redis-cli -3 RL.LIMIT printed %q", lines)
	}
	out := redisCLI(t, p, "-3", "RL.STATUS", "user:42", "60s", "LIMIT", "100")
	fields := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			fields[k] = v
		}
	}
	if fields["used"] != "2" || fields["remaining"] != "98" || fields["source"] != "origin" {
		t.Errorf("redis-cli -3 RL.STATUS printed:\n%s", out)
	}
	if out := redisCLI(t, p, "RL.STATUS", "user:42", "60s"); !strings.Contains(out, "used\n2\n") {
		t.Errorf("redis-cli RL.STATUS (RESP2) printed:\n%s", out)
	}

	if out := redisCLI(t, p, "RL.LIMIT", "user:42", "0", "60s"); strings.TrimSpace(out) != msgLimit {
		t.Errorf("redis-cli with limit 0 printed %q, want %q", out, msgLimit)
	}
	if out := redisCLI(t, p, "-3", "RL.LIMIT", "user:42", "100", "60s", "COST"); strings.TrimSpace(out) != msgSyntax {
		t.Errorf("redis-cli -3 with a missing value printed %q", out)
	}
	if out := redisCLI(t, p, "PING"); strings.TrimSpace(out) != "PONG" {
		t.Errorf("redis-cli PING printed %q", out)
	}
	if out := redisCLI(t, p, "INFO", "ratchet"); !strings.Contains(out, "# Ratchet") {
		t.Errorf("redis-cli INFO ratchet printed %q", out)
	}
}

// Test 9: redis-benchmark runs against RL.LIMIT, with and without pipelining.
func TestRedisBenchmark(t *testing.T) {
	t.Parallel()
	requireTool(t, "redis-benchmark", installRedisTools)
	p := start(t)
	host, port, _ := net.SplitHostPort(p.Addr)
	for _, extra := range [][]string{nil, {"-P", "16"}} {
		args := []string{"-h", host, "-p", port, "-c", "50", "-n", "20000", "-r", "1000", "-q"}
		args = append(append(args, extra...), "RL.LIMIT", "key:__rand_int__", "100", "60s")
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		out, err := exec.CommandContext(ctx, "redis-benchmark", args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("redis-benchmark %q: %v\n%s", args, err, out)
		}
		if !contains(out, "requests per second") {
			t.Errorf("redis-benchmark %q printed no rate:\n%s", args, out)
		}
		if contains(out, "rror") {
			t.Errorf("redis-benchmark %q reported errors:\n%s", args, out)
		}
		p.requireRunning(t)
	}
	c := p.client(t, nil)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after redis-benchmark: %v", err)
	}
	if n := infoInt(t, c, "decisions_allowed") + infoInt(t, c, "decisions_denied"); n != 40000 {
		t.Errorf("decisions after two runs of 20000 = %d, want 40000", n)
	}
	// 1000 random keys, each one cell: the window may roll over once (two cells).
	if n := infoInt(t, c, "cells"); n < 1 || n > 2000 {
		t.Errorf("cells = %d, want at most 1000 keys' worth", n)
	}
}

// Test 12: --max-clients.
func TestMaxClients(t *testing.T) {
	t.Parallel()
	p := start(t, "--max-clients", "5")
	first := dialRaw(t, p.Addr)
	// The readiness probe's connection may still be closing: wait until this one is alone.
	testwait.Until(t, 10*time.Second, "connected_clients 1", func() (bool, string) {
		text, _ := first.do("INFO", "clients").(string)
		return infoFields(text)["connected_clients"] == "1", text
	})
	conns := []*rawConn{first}
	for range 4 {
		c := dialRaw(t, p.Addr)
		c.expectPong()
		conns = append(conns, c)
	}
	sixth := dialRaw(t, p.Addr)
	if v, err := sixth.tryRead(5 * time.Second); err != nil || v != respError("ERR max number of clients reached") {
		t.Fatalf("6th connection: got %#v, %v; want -ERR max number of clients reached", v, err)
	}
	sixth.expectEOF()
	for _, c := range conns {
		c.expectPong() // the five are untouched
	}
	if v := infoFields(first.do("INFO", "stats").(string))["rejected_connections"]; v != "1" {
		t.Errorf("rejected_connections = %q, want 1", v)
	}

	// Closing one makes room again.
	_ = conns[4].Close()
	ok := false
	retryUntil := time.Now().Add(10 * time.Second)
	for i := 0; i < 200 && time.Now().Before(retryUntil) && !ok; i++ {
		c := dialRaw(t, p.Addr)
		_, _ = c.Write(encode("PING"))
		v, err := c.tryRead(5 * time.Second)
		_ = c.Close()
		switch {
		case v == "PONG":
			ok = true
		case err != nil || v == respError("ERR max number of clients reached"):
			time.Sleep(20 * time.Millisecond) // the server has not noticed the close yet
		default:
			t.Fatalf("new connection got an unexpected reply %#v", v)
		}
	}
	if !ok {
		t.Error("no connection was accepted after one of the five closed")
	}
}

// Test 13: /metrics and /healthz.
func TestMetrics(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := p.client(t, nil)
	limitReply(t, c, "secret-key-name-7731", 1, "1h", "NS", "secret-namespace-8842")
	limitReply(t, c, "secret-key-name-7731", 1, "1h", "NS", "secret-namespace-8842")

	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get("http://" + p.MetricsAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, string(body)
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{"ratchet_decisions_total{", `result="allowed"`, `result="denied"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, leak := range []string{"secret-key-name", "secret-namespace"} {
		if strings.Contains(body, leak) {
			t.Errorf("/metrics exposes a key or namespace (%q)", leak)
		}
	}
	var allowed, denied bool
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "ratchet_decisions_total{") {
			allowed = allowed || (strings.Contains(l, `result="allowed"`) && strings.HasSuffix(l, " 1"))
			denied = denied || (strings.Contains(l, `result="denied"`) && strings.HasSuffix(l, " 1"))
		}
	}
	if !allowed || !denied {
		t.Errorf("ratchet_decisions_total does not show 1 allowed and 1 denied:\n%s", grepLines(body, "ratchet_decisions_total"))
	}
	// Per command: names of the table only (a client's made-up name counts as unknown),
	// with the sample of durations; the build that runs.
	_ = c.Do(t.Context(), "secret-command-5521").Err()
	_, body = get("/metrics")
	for _, want := range []string{`ratchet_commands_total{command="rl.limit"} 2`, `ratchet_commands_total{command="unknown"} 1`,
		`ratchet_command_duration_seconds_count{command="`, `ratchet_build_info{goversion="go`, `role="origin",version="`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(body, "command"))
		}
	}
	if strings.Contains(body, "secret-command") {
		t.Error("/metrics exposes a client's command name")
	}
	stats, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil || !regexp.MustCompile(`cmdstat_rl\.limit:calls=2,usec=\d+,usec_per_call=[\d.]+,rejected_calls=0,failed_calls=0`).MatchString(stats) {
		t.Errorf("INFO commandstats: %q (%v)", stats, err)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz: %d %q", code, body)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Test 14: flags come from RATCHET_<NAME> when absent from the command line.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	addr := loopback(freePort(t))
	p := startEnv(t, []string{
		"RATCHET_LISTEN=" + addr,
		"RATCHET_REQUIREPASS=envpass",
		"RATCHET_METRICS_LISTEN=" + loopback(freePort(t)),
		"RATCHET_DATA_DIR=" + t.TempDir(),
		"RATCHET_MAX_CLIENTS=33",
	})
	if p.Addr != addr || strings.Contains(strings.Join(p.args, " "), "--listen") {
		t.Fatalf("the helper passed --listen: %q", p.args)
	}
	c := dialRaw(t, addr)
	if got := asError(t, c.do("PING")); got != noauth {
		t.Errorf("PING without AUTH: %q, want %q", got, noauth)
	}
	if v := c.do("AUTH", "envpass"); v != "OK" {
		t.Fatalf("AUTH envpass = %#v", v)
	}
	if v, ok := c.do("CONFIG", "GET", "maxclients").([]any); !ok || len(v) != 2 || v[1] != "33" {
		t.Errorf("CONFIG GET maxclients = %#v, want 33 from RATCHET_MAX_CLIENTS", v)
	}
	if v, ok := c.do("CONFIG", "GET", "port").([]any); !ok || len(v) != 2 || !strings.HasSuffix(addr, ":"+v[1].(string)) {
		t.Errorf("CONFIG GET port = %#v, want the port of %s", v, addr)
	}

	// A flag on the command line wins over the environment.
	q := startEnv(t, []string{"RATCHET_REQUIREPASS=envpass"}, "--requirepass", "flagpass")
	c2 := dialRaw(t, q.Addr)
	if got := asError(t, c2.do("AUTH", "envpass")); got != wrongpass {
		t.Errorf("AUTH with the environment's password when the flag set another: %q", got)
	}
	if v := c2.do("AUTH", "flagpass"); v != "OK" {
		t.Errorf("AUTH flagpass = %#v", v)
	}
}
