package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const dayMs = 86_400_000

// limitReply runs RL.LIMIT through go-redis and returns its five integers.
func limitReply(t testing.TB, c *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(context.Background(), append([]any{"RL.LIMIT"}, args...)...).Result()
	if err != nil {
		t.Fatalf("RL.LIMIT %v: %v", args, err)
	}
	return fiveInts(t, v)
}

func fiveInts(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		t.Fatalf("RL.LIMIT reply %T %#v, want an array of 5 integers", v, v)
	}
	out := make([]int64, 5)
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("RL.LIMIT reply element %d is %T %#v, want an integer", i, e, e)
		}
		out[i] = n
	}
	return out
}

// status runs RL.STATUS through go-redis and returns its fields and the reply's shape:
// "map" (RESP3) or "array" (RESP2 flat array of names and values).
func status(t testing.TB, c *redis.Client, args ...any) (map[string]any, string) {
	t.Helper()
	v, err := c.Do(context.Background(), append([]any{"RL.STATUS"}, args...)...).Result()
	if err != nil {
		t.Fatalf("RL.STATUS %v: %v", args, err)
	}
	out := map[string]any{}
	switch r := v.(type) {
	case map[any]any:
		for k, v := range r {
			ks, ok := k.(string)
			if !ok {
				t.Fatalf("RL.STATUS map key %T %#v is not a string", k, k)
			}
			out[ks] = v
		}
		return out, "map"
	case []any:
		if len(r)%2 != 0 {
			t.Fatalf("RL.STATUS flat array has an odd length %d: %#v", len(r), r)
		}
		for i := 0; i < len(r); i += 2 {
			ks, ok := r[i].(string)
			if !ok {
				t.Fatalf("RL.STATUS field name %d is %T %#v, not a string", i, r[i], r[i])
			}
			if _, dup := out[ks]; dup {
				t.Fatalf("RL.STATUS repeats field %q", ks)
			}
			out[ks] = r[i+1]
		}
		return out, "array"
	}
	t.Fatalf("RL.STATUS reply %T %#v is neither a map nor an array", v, v)
	return nil, ""
}

// statusInt returns an integer field of a status.
func statusInt(t testing.TB, st map[string]any, field string) int64 {
	t.Helper()
	v, ok := st[field]
	if !ok {
		t.Fatalf("RL.STATUS has no field %q: %v", field, st)
	}
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("RL.STATUS field %q is %T %#v, want an integer", field, v, v)
	}
	return n
}

// used returns RL.STATUS's used for key and window.
func used(t testing.TB, c *redis.Client, args ...any) int64 {
	t.Helper()
	st, _ := status(t, c, args...)
	return statusInt(t, st, "used")
}

// counted is the regional count of the tuple RL.STATUS args reads, its current and previous
// cells together: unlike used, it does not change when a window boundary passes between
// the requests and the read.
func counted(t testing.TB, c *redis.Client, args ...any) int64 {
	t.Helper()
	st, _ := status(t, c, args...)
	return statusInt(t, st, "current_regional") + statusInt(t, st, "previous_regional")
}

// Test 1: the replies of RL.LIMIT and RL.STATUS through go-redis in RESP2 and RESP3.
func TestGoRedisRESP2AndRESP3(t *testing.T) {
	t.Parallel()
	p := start(t)
	cases := []struct {
		name     string
		protocol int
		shape    string
	}{
		{"RESP2", 2, "array"},
		{"RESP3", 3, "map"},
		{"default", 0, "map"}, // go-redis defaults to RESP3
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := p.client(t, &redis.Options{Protocol: tc.protocol})
			key := "user:" + tc.name
			before := time.Now().UnixMilli()

			r := limitReply(t, c, key, 10, "1d")
			if r[0] != 1 || r[1] != 10 || r[2] != 9 || r[3] != 0 {
				t.Fatalf("first RL.LIMIT = %v, want [1 10 9 0 reset]", r)
			}
			if r[4] <= dayMs || r[4] > 2*dayMs {
				t.Fatalf("reset_after_ms = %d, want the end of the next cell (%d, %d]", r[4], dayMs, 2*dayMs)
			}
			if r = limitReply(t, c, key, 10, "1d", "COST", 3); r[0] != 1 || r[2] != 6 || r[3] != 0 {
				t.Fatalf("RL.LIMIT COST 3 = %v, want [1 10 6 0 reset]", r)
			}
			r = limitReply(t, c, key, 10, "1d", "COST", 7)
			if r[0] != 0 || r[1] != 10 || r[2] != 6 || r[3] <= 0 || r[3] > 2*dayMs {
				t.Fatalf("RL.LIMIT COST 7 over the limit = %v, want [0 10 6 retry>0 reset]", r)
			}

			st, shape := status(t, c, key, "1d")
			after := time.Now().UnixMilli()
			if shape != tc.shape {
				t.Fatalf("RL.STATUS came back as %s, want %s (protocol %d)", shape, tc.shape, tc.protocol)
			}
			seq := statusInt(t, st, "sequence")
			if seq < before/dayMs || seq > after/dayMs {
				t.Errorf("sequence = %d, want floor(now/window) in [%d, %d]", seq, before/dayMs, after/dayMs)
			}
			want := map[string]int64{"current_regional": 4, "current_imported": 0, "previous_regional": 0,
				"previous_imported": 0, "used": 4, "fresh": 1}
			for f, w := range want {
				if got := statusInt(t, st, f); got != w {
					t.Errorf("%s = %d, want %d", f, got, w)
				}
			}
			if sm := statusInt(t, st, "strict_ms"); sm < 0 {
				t.Errorf("strict_ms = %d, want >= 0", sm)
			}
			if src, _ := st["source"].(string); src != "origin" {
				t.Errorf("source = %#v, want \"origin\" on a standalone origin", st["source"])
			}
			for _, f := range []string{"limit", "remaining"} {
				if _, ok := st[f]; ok {
					t.Errorf("RL.STATUS without LIMIT has field %q", f)
				}
			}

			st, shape = status(t, c, key, "1d", "LIMIT", 10)
			if shape != tc.shape {
				t.Fatalf("RL.STATUS LIMIT came back as %s, want %s", shape, tc.shape)
			}
			if l, rem := statusInt(t, st, "limit"), statusInt(t, st, "remaining"); l != 10 || rem != 6 {
				t.Errorf("with LIMIT 10: limit=%d remaining=%d, want 10 and 6", l, rem)
			}
			if u := statusInt(t, st, "used"); u != 4 {
				t.Errorf("RL.STATUS LIMIT changed used to %d", u)
			}
		})
	}
}

// Test 2: 640 concurrent requests on one cold key with limit 100 admit exactly 100.
func TestConcurrentAdmissionIsExact(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := p.client(t, &redis.Options{PoolSize: 64, MinIdleConns: 0})
	const n, limit = 640, 100
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		errs    []error
		gate    = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			v, err := c.Do(ctx, "RL.LIMIT", "hot", limit, "10m").Result()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			arr, ok := v.([]any)
			if !ok || len(arr) != 5 {
				errs = append(errs, fmt.Errorf("reply %#v", v))
				return
			}
			if arr[0] == int64(1) {
				allowed++
			}
		}()
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			break
		}
		t.Errorf("RL.LIMIT: %v", err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d requests failed", len(errs), n)
	}
	if allowed != limit {
		t.Errorf("allowed %d of %d concurrent requests, want exactly %d", allowed, n, limit)
	}
	st, _ := status(t, c, "hot", "10m")
	// A 10-minute window may roll over during the test: count both cells.
	if got := statusInt(t, st, "current_regional") + statusInt(t, st, "previous_regional"); got != limit {
		t.Errorf("regional count = %d, want %d", got, limit)
	}
	if got := infoInt(t, c, "decisions_allowed") + infoInt(t, c, "decisions_denied"); got != n {
		t.Errorf("INFO decisions = %d, want %d", got, n)
	}
}

// Test 3: pipelined requests are decided and answered in order.
func TestPipelinedOrder(t *testing.T) {
	t.Parallel()
	p := start(t)

	t.Run("go-redis", func(t *testing.T) {
		c := p.client(t, nil)
		ctx := context.Background()
		const n, limit = 200, 150
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "RL.LIMIT", "pipe", limit, "1d")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("pipelined request %d: %v", i, err)
			}
			r := fiveInts(t, v)
			if i < limit {
				if r[0] != 1 || r[2] != int64(limit-1-i) || r[3] != 0 {
					t.Fatalf("request %d = %v, want allowed with remaining %d", i, r, limit-1-i)
				}
			} else if r[0] != 0 || r[2] != 0 || r[3] <= 0 {
				t.Fatalf("request %d = %v, want denied with remaining 0 and retry > 0", i, r)
			}
		}
	})

	t.Run("raw", func(t *testing.T) {
		c := dialRaw(t, p.Addr)
		const n, limit = 300, 1000
		var buf []byte
		for i := range n {
			buf = append(buf, encode("ECHO", strconv.Itoa(i))...)
			buf = append(buf, encode("RL.LIMIT", "raw", strconv.Itoa(limit), "1d")...)
			if i%50 == 0 {
				buf = append(buf, "PING\r\n"...) // inline commands mix with multibulk ones
			}
		}
		c.write(buf) // one write: every command is in flight before any reply is read
		for i := range n {
			if v := c.read(); v != strconv.Itoa(i) {
				t.Fatalf("reply %d to ECHO: got %#v, want %q", i, v, strconv.Itoa(i))
			}
			r := ints(t, c.read())
			if len(r) != 5 || r[0] != 1 || r[2] != int64(limit-1-i) {
				t.Fatalf("RL.LIMIT %d: got %v, want allowed with remaining %d", i, r, limit-1-i)
			}
			if i%50 == 0 {
				if v := c.read(); v != "PONG" {
					t.Fatalf("inline PING after request %d: got %#v", i, v)
				}
			}
		}
		c.expectPong()
	})
}

// The README's "Clients" examples. Each connects, runs RL.LIMIT user:42 10 1h, then two
// more in one MULTI/EXEC, and returns (or prints, one line each) the three replies' five
// integers. The Go ones are the functions below, quoted in the README as they are here
// (TestReadmeClientSnippets checks it); the others are the files of clients/.

// goRedisExample is the README's go-redis example.
func goRedisExample(ctx context.Context, addr string) ([][]int64, error) {
	// RESP3 unless Protocol: 2. MaxRetries: -1, so that a request lost with its connection
	// is not sent, and counted, twice.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()

	// allowed, limit, remaining, retry_after_ms, reset_after_ms
	r, err := rdb.Do(ctx, "RL.LIMIT", "user:42", 10, "1h").Int64Slice()
	if err != nil {
		return nil, err
	}
	replies := [][]int64{r}

	// MULTI, RL.LIMIT, RL.LIMIT, EXEC: both decided at one instant.
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "RL.LIMIT", "user:42", 10, "1h")
		p.Do(ctx, "RL.LIMIT", "user:42", 10, "1h")
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range cmds {
		r, err := c.(*redis.Cmd).Int64Slice()
		if err != nil {
			return nil, err
		}
		replies = append(replies, r)
	}
	return replies, nil
}

// rueidisExample is the README's rueidis example.
func rueidisExample(ctx context.Context, addr string) ([][]int64, error) {
	// RESP3. DisableCache: an edge refuses CLIENT TRACKING ON (tracking is its origin's),
	// so that this runs against an edge too; an origin tracks, and rueidis's client-side
	// cache works there. DisableRetry: rueidis resends only
	// read-only commands, which an Arbitrary one is not, but nothing here should ever be
	// sent twice.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, DisableRetry: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	limit := func() rueidis.Completed {
		return c.B().Arbitrary("RL.LIMIT").Keys("user:42").Args("10", "1h").Build()
	}

	// allowed, limit, remaining, retry_after_ms, reset_after_ms
	r, err := c.Do(ctx, limit()).AsIntSlice()
	if err != nil {
		return nil, err
	}
	replies := [][]int64{r}

	// MULTI, RL.LIMIT, RL.LIMIT, EXEC in one round trip: both decided at one instant.
	res := c.DoMulti(ctx, c.B().Multi().Build(), limit(), limit(), c.B().Exec().Build())
	exec, err := res[3].ToArray()
	if err != nil {
		return nil, err
	}
	for _, e := range exec {
		r, err := e.AsIntSlice()
		if err != nil {
			return nil, err
		}
		replies = append(replies, r)
	}
	return replies, nil
}

// checkExampleReplies checks the three replies of an example against a fresh server: 9, 8
// and 7 remaining of 10, and that the server counted exactly 3.
func checkExampleReplies(t *testing.T, p *proc, replies [][]int64) {
	t.Helper()
	if len(replies) != 3 {
		t.Fatalf("the example returned %d replies, want 3: %v", len(replies), replies)
	}
	for i, r := range replies {
		if len(r) != 5 || r[0] != 1 || r[1] != 10 || r[2] != int64(9-i) || r[3] != 0 || r[4] <= 0 || r[4] > 2*3_600_000 {
			t.Errorf("reply %d = %v, want [1 10 %d 0 reset_after_ms in (0, 2h]]", i+1, r, 9-i)
		}
	}
	if u := used(t, p.client(t, nil), "user:42", "1h"); u != 3 {
		t.Errorf("the server counted %d, want 3", u)
	}
}

func TestClientExamplesGo(t *testing.T) {
	t.Parallel()
	for name, example := range map[string]func(context.Context, string) ([][]int64, error){
		"go-redis": goRedisExample, "rueidis": rueidisExample} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := start(t, "--data-dir", "")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			replies, err := example(ctx, p.Addr)
			if err != nil {
				t.Fatalf("%s example: %v", name, err)
			}
			checkExampleReplies(t, p, replies)
		})
	}
}

// installPythonRedis installs redis-py for Debian's python3.
const installPythonRedis = "apt-get install -y python3-redis"

// installNodeClients installs Node.js, npm and the clients/ packages.
const installNodeClients = "apt-get install -y nodejs npm && (cd clients && npm ci)"

// pythonWithRedis returns a python3 that can import redis: the first on PATH, else Debian's
// (apt's python3-redis serves /usr/bin/python3, which another python3 on PATH may hide).
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.CommandContext(ctx, path, "-c", "import redis").Run()
		cancel()
		if err == nil {
			return path
		}
		tried = append(tried, path)
	}
	missingTool(t, fmt.Sprintf("no python3 with the redis module (tried %v)", tried), installPythonRedis)
	return ""
}

// nodeWithClients returns node, with clients/node_modules holding pkg.
func nodeWithClients(t *testing.T, pkg string) string {
	t.Helper()
	node := requireTool(t, "node", installNodeClients)
	if _, err := os.Stat(filepath.Join(clientsDir(t), "node_modules", pkg, "package.json")); err != nil {
		missingTool(t, fmt.Sprintf("clients/node_modules has no %s", pkg), installNodeClients)
	}
	return node
}

func clientsDir(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "clients")
}

// runExample runs `interpreter clients/file ADDR` against a fresh server and checks what
// it printed: three lines of five integers.
func runExample(t *testing.T, interpreter, file string) {
	t.Helper()
	p := start(t, "--data-dir", "")
	checkExampleReplies(t, p, exampleReplies(t, interpreter, file, p.Addr))
}

// exampleReplies runs clients/FILE with interpreter against addr and returns the integers
// of each line it printed.
func exampleReplies(t *testing.T, interpreter, file, addr string) [][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, filepath.Join(clientsDir(t), file), addr)
	cmd.Dir = clientsDir(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s %s: %v\n--- stdout ---\n%s--- stderr ---\n%s", interpreter, file, addr, err, out, stderr.Bytes())
	}
	var replies [][]int64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r []int64
		for _, f := range strings.Fields(line) {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("%s printed %q, not integers:\n%s", file, line, out)
			}
			r = append(r, n)
		}
		replies = append(replies, r)
	}
	return replies
}

// TestClientExampleRedisPyTwoLimits runs the README's redis-py two-limit example: twelve
// calls of 10 a second and 1000 an hour. The hour counts exactly the calls allowed (a
// call the second's limit refused is counted nowhere), and a refusal names the second's
// limit with a wait.
func TestClientExampleRedisPyTwoLimits(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "")
	replies := exampleReplies(t, pythonWithRedis(t), "redis-py-two-limits.py", p.Addr)
	if len(replies) != 12 {
		t.Fatalf("the example printed %d replies, want 12: %v", len(replies), replies)
	}
	var allowed int64
	for i, r := range replies {
		switch {
		case len(r) != 4:
			t.Errorf("reply %d = %v, want allowed, limit, remaining, retry_after_ms", i+1, r)
		case r[0] == 1 && (r[1] != 10 || r[3] != 0):
			t.Errorf("allowed reply %d = %v, want the second's limit binding (10), no wait", i+1, r)
		case r[0] == 0 && (r[1] != 10 || r[2] != 0 || r[3] <= 0 || r[3] > 2000):
			t.Errorf("denied reply %d = %v, want the second's limit (10), 0 left, a wait in (0, 2000] ms (two windows at most)", i+1, r)
		}
		allowed += r[0]
	}
	if allowed < 10 {
		t.Errorf("%d of 12 allowed, want at least the second's 10: %v", allowed, replies)
	}
	if n := counted(t, p.client(t, nil), "api:42", "1h"); n != allowed {
		t.Errorf("the hour counted %d, want the %d allowed (all or nothing)", n, allowed)
	}
}

func TestClientExampleRedisPy(t *testing.T) {
	t.Parallel()
	runExample(t, pythonWithRedis(t), "redis-py.py")
}

func TestClientExampleIoredis(t *testing.T) {
	t.Parallel()
	runExample(t, nodeWithClients(t, "ioredis"), "ioredis.js")
}

func TestClientExampleNodeRedis(t *testing.T) {
	t.Parallel()
	runExample(t, nodeWithClients(t, "redis"), "node-redis.js")
}
