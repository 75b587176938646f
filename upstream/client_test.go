package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/resp"
)

// Keys as engine.AppendKey makes them (the fake origin decodes them as an origin does),
// the first with bytes RESP must carry verbatim.
var (
	testKey  = engine.AppendKey(nil, engine.Tuple{Workspace: "ws", Namespace: "n\r\n", Key: []byte("login:alice"), WindowMs: 1000})
	testKey2 = engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k2"), WindowMs: 60000})
)

var _ engine.Origin = (*Client)(nil)

func TestNewDoesNotDial(t *testing.T) {
	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	time.Sleep(20 * time.Millisecond)
	if conns, _, _ := f.stats(); conns != 0 {
		t.Fatalf("New dialled: %d connections", conns)
	}
	if c.Addr() != f.addr() {
		t.Fatalf("Addr() = %q, want %q", c.Addr(), f.addr())
	}
}

func TestHelloFirstWithSecret(t *testing.T) {
	f := newFake(t, "s3cret")
	c := newClient(t, f.addr(), Config{Secret: "s3cret", NodeRun: "edge-7/42af"})
	if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	conns, hellos, cmds := f.stats()
	if conns != 1 || len(hellos) != 1 || len(cmds) != 1 {
		t.Fatalf("conns %d hellos %d cmds %d, want 1 1 1", conns, len(hellos), len(cmds))
	}
	// The fake fails the test unless HELLO is the first command of the connection.
	if want := []string{"RL.INTERNAL.HELLO", "s3cret", "edge-7/42af"}; !slices.Equal(hellos[0], want) {
		t.Fatalf("HELLO = %q, want %q", hellos[0], want)
	}
}

func TestEncoding(t *testing.T) {
	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx := context.Background()
	if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 29000001, Limit: 100, Want: 16}, {Key: testKey2, Seq: 0}}); err != nil {
		t.Fatal(err)
	}
	// The largest integers an origin takes (batch ids, costs and returns to 2^63-1).
	batch := engine.ReplayBatch{Node: "not-sent/1", ID: 1<<63 - 1, Boot: 1763898912000,
		Items: []engine.ReplayItem{{Key: testKey, Seq: 7, Cost: 3, Limit: 10, Want: 64, Return: 1 << 40},
			{Key: testKey2, Seq: 8, Cost: 1<<63 - 1, Return: 1<<63 - 1}}}
	if _, _, err := c.Replay(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.Decide(ctx, engine.DecideRequest{Key: testKey, Limit: 10, Cost: 2, Pending: 5, Inflight: 1, InflightBatch: 9,
		Want: 24, Return: 77, Deadline: 1763898913750}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.Decide(ctx, engine.DecideRequest{Key: testKey2, Limit: 1, Deadline: 1<<63 - 1}); err != nil {
		t.Fatal(err)
	}
	k, k2 := string(testKey), string(testKey2)
	want := [][]string{
		{"RL.INTERNAL.READ", k, "29000001", "100", "16", k2, "0", "0", "0"},
		{"RL.INTERNAL.REPLAY", "9223372036854775807", "1763898912000", "0", k, "7", "3", "10", "64", "1099511627776",
			k2, "8", "9223372036854775807", "0", "0", "9223372036854775807"},
		{"RL.INTERNAL.DECIDE", k, "10", "2", "5", "1", "9", "24", "77", "1763898913750"},
		{"RL.INTERNAL.DECIDE", k2, "1", "0", "0", "0", "0", "0", "0", "9223372036854775807"},
	}
	_, _, cmds := f.stats()
	if len(cmds) != len(want) {
		t.Fatalf("fake saw %q, want %q", cmds, want)
	}
	for i := range want {
		if !slices.Equal(cmds[i], want[i]) {
			t.Errorf("command %d = %q, want %q", i, cmds[i], want[i])
		}
	}
}

func TestDecoding(t *testing.T) {
	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx := context.Background()

	counts, meta, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 12, Limit: 100, Want: 16}, {Key: testKey2, Seq: 3}})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := uint64(len(testKey)), uint64(len(testKey2))
	wantCounts := []engine.CellCounts{
		{Seq: 12, CurRegional: n1, CurImported: 5, PrevRegional: 2 * n1, PrevImported: 1, LeaseLeft: 16, LeaseSeq: 100},
		{Seq: 3, CurRegional: n2, CurImported: 3, PrevRegional: 2 * n2, PrevImported: 1},
	}
	if wantMeta := (engine.OriginMeta{Edges: 3, Applied: 6, LeaseTTLMs: 10000, Boot: cannedBoot, Now: cannedNow}); !slices.Equal(counts, wantCounts) || meta != wantMeta {
		t.Fatalf("Read = %+v %+v, want %+v %+v", counts, meta, wantCounts, wantMeta)
	}

	counts, meta, err = c.Replay(ctx, engine.ReplayBatch{ID: 77, Items: []engine.ReplayItem{{Key: testKey, Seq: 4, Cost: 6, Limit: 50, Want: 32, Return: 11}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.CellCounts{{Seq: 4, CurRegional: 106, CurImported: 77, PrevRegional: 50, PrevImported: 9, LeaseLeft: 32, LeaseSeq: 11}}
	if wantMeta := (engine.OriginMeta{Edges: 2, Applied: 77, LeaseTTLMs: 5000, Boot: cannedBoot, Now: cannedNow}); !slices.Equal(counts, want) || meta != wantMeta {
		t.Fatalf("Replay = %+v %+v, want %+v %+v", counts, meta, want, wantMeta)
	}

	d, cc, meta, err := c.Decide(ctx, engine.DecideRequest{Key: testKey, Limit: 10, Cost: 4, Pending: 8, Inflight: 2, InflightBatch: 3,
		Want: 16, Return: 13, Deadline: 1763898913750})
	if err != nil {
		t.Fatal(err)
	}
	wantD := engine.Decision{Allowed: true, Limit: 10, Remaining: 6, RetryAfterMs: 0, ResetAfterMs: 1234}
	wantCC := engine.CellCounts{Seq: 17, CurRegional: 8, CurImported: 2, PrevRegional: 3, PrevImported: 4, LeaseLeft: 16, LeaseSeq: 13}
	if wantMeta := (engine.OriginMeta{Edges: 5, Applied: 6, LeaseTTLMs: 7000, Boot: cannedBoot, Now: 1763898913750}); d != wantD || cc != wantCC || meta != wantMeta {
		t.Fatalf("Decide = %+v %+v %+v, want %+v %+v %+v", d, cc, meta, wantD, wantCC, wantMeta)
	}

	d, _, _, err = c.Decide(ctx, engine.DecideRequest{Key: testKey, Limit: 1, Cost: 4})
	if err != nil {
		t.Fatal(err)
	}
	if wantD := (engine.Decision{Limit: 1, RetryAfterMs: -1, ResetAfterMs: 1234}); d != wantD {
		t.Fatalf("denied Decide = %+v, want %+v", d, wantD)
	}
}

// Exact replies, decoded field by field, including the largest counts and edges 0 (read
// as 1). Integers in order: edges, applied, lease_ttl_ms, boot, now, then a counts group (seq,
// cur_regional, cur_imported, prev_regional, prev_imported, lease_left, lease_seq), DECIDE's
// five decision integers before it.
func TestDecodingExactReplies(t *testing.T) {
	f := newFake(t, "s")
	f.setHandler(func(args []string) answer {
		switch args[0] {
		case "RL.INTERNAL.READ":
			return answer{reply: "*18\r\n:0\r\n:42\r\n:10000\r\n:1763898912000\r\n:1763898913234\r\n:41\r\n:0\r\n:0\r\n:0\r\n:1000\r\n:0\r\n" +
				":5\r\n:4611686018427387904\r\n:1\r\n:9223372036854775807\r\n:0\r\n:30\r\n:1849598113792\r\n"}
		default:
			return answer{reply: "*23\r\n:1\r\n:0\r\n:2500\r\n:-3\r\n:-4\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n" +
				":0\r\n:9\r\n:0\r\n:250\r\n:999\r\n" +
				":5\r\n:9\r\n:0\r\n:3\r\n:0\r\n:12\r\n:13\r\n"}
		}
	})
	c := newClient(t, f.addr(), Config{Secret: "s"})
	counts, meta, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.CellCounts{Seq: 5, CurRegional: 1 << 62, CurImported: 1, PrevRegional: 1<<63 - 1, LeaseLeft: 30, LeaseSeq: 1849598113792}
	wantMeta := engine.OriginMeta{Edges: 1, Applied: 42, LeaseTTLMs: 10000, Boot: 1763898912000, Now: 1763898913234, Durable: 41, ColdPPM: 1000}
	if len(counts) != 1 || counts[0] != want || meta != wantMeta {
		t.Fatalf("Read = %+v %+v, want %+v %+v", counts, meta, want, wantMeta)
	}
	d, cc, meta, err := c.Decide(context.Background(), engine.DecideRequest{Key: testKey, Limit: 9, Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := (engine.Decision{Limit: 9, RetryAfterMs: 250, ResetAfterMs: 999}); d != want {
		t.Fatalf("Decide = %+v, want %+v", d, want)
	}
	if want := (engine.CellCounts{Seq: 5, CurRegional: 9, PrevRegional: 3, LeaseLeft: 12, LeaseSeq: 13}); cc != want {
		t.Fatalf("Decide counts = %+v, want %+v", cc, want)
	}
	if want := (engine.OriginMeta{Edges: 1, LeaseTTLMs: 2500, Boot: -3, Now: -4}); meta != want {
		t.Fatalf("Decide meta = %+v, want %+v", meta, want)
	}
}

func TestServerErrorIsPerCall(t *testing.T) {
	f := newFake(t, "s")
	gate := make(chan struct{})
	f.setHandler(func(args []string) answer {
		a := canned(args) // refuses the bad key as an origin does
		if args[1] == "bad" {
			a.wait = gate
		}
		return a
	})
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx := context.Background()
	// A good call, then the bad one and good ones pipelined behind it.
	if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		key := testKey
		if i == 0 {
			key = []byte("bad")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = c.Read(ctx, []engine.ReadItem{{Key: key, Seq: int64(i)}})
		}()
		if i == 0 {
			testwait.UntilTrue(t, atOnce, "the bad call is at the fake", func() bool { _, _, cmds := f.stats(); return len(cmds) == 2 })
		}
	}
	testwait.UntilTrue(t, atOnce, "all calls in flight", func() bool { return c.inflight.Load() == 4 })
	close(gate)
	wg.Wait()
	var se *ServerError
	if !errors.As(errs[0], &se) || !strings.HasPrefix(se.Msg, "ERR internal: wire: malformed tuple key") {
		t.Fatalf("bad call error = %v, want a ServerError", errs[0])
	}
	if !strings.HasPrefix(errs[0].Error(), "upstream "+f.addr()+": read: ") {
		t.Errorf("error %q is not wrapped with the address and operation", errs[0])
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("call %d behind the error reply: %v", i+1, err)
		}
	}
	if _, _, _, err := c.Decide(ctx, engine.DecideRequest{Key: testKey, Limit: 1, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if conns, _, _ := f.stats(); conns != 1 {
		t.Fatalf("%d connections, want 1: an error reply must not close the connection", conns)
	}
}

func TestWrongPass(t *testing.T) {
	f := newFake(t, "right")
	h := &countingHandler{}
	c := newClient(t, f.addr(), Config{Secret: "wrong", Logger: slog.New(h)})
	ctx := context.Background()
	for i := range 5 {
		start := time.Now()
		_, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}})
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("call %d: error = %v, want ErrAuth with the origin's reply", i, err)
		}
		if time.Since(start) > time.Second {
			t.Fatalf("call %d took %v", i, time.Since(start))
		}
	}
	time.Sleep(50 * time.Millisecond)
	// Calls within authRetryAfter fail at once, without dialling again; nothing spins.
	if conns, _, cmds := f.stats(); conns != 1 || len(cmds) != 0 {
		t.Fatalf("%d connections and %d commands after a refused secret, want 1 and 0", conns, len(cmds))
	}
	if n := h.count(slog.LevelError); n != 1 || h.total() != 1 {
		t.Fatalf("%d error lines and %d lines in all, want 1 and 1", n, h.total())
	}
}

// After authRetryAfter, the client tries HELLO again, and logs again only if the state
// changed.
func TestWrongPassRecovers(t *testing.T) {
	f := newFake(t, "right")
	h := &countingHandler{}
	c := newClient(t, f.addr(), Config{Secret: "right", Logger: slog.New(h)})
	c.secret = "wrong" // as if the origin's secret had been changed under us
	if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}}); !errors.Is(err, ErrAuth) {
		t.Fatalf("error = %v, want ErrAuth", err)
	}
	c.mu.Lock()
	c.authUntil = time.Now() // skip the hold-off
	c.secret = "right"
	c.mu.Unlock()
	if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	if h.count(slog.LevelError) != 1 || h.count(slog.LevelInfo) != 1 {
		t.Fatalf("log lines %v, want one refusal and one connect", h.msgs)
	}
}

func TestPipelining(t *testing.T) {
	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx := context.Background()
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := int64(1000 + i)
			switch i % 3 {
			case 0:
				counts, meta, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: seq, Want: uint64(i)}, {Key: testKey2, Seq: seq + 1}})
				if err == nil && (len(counts) != 2 || counts[0].Seq != seq || counts[0].CurImported != uint64(seq%7) || counts[0].LeaseLeft != uint64(i) ||
					counts[1].Seq != seq+1 || counts[1].CurRegional != uint64(len(testKey2)) || meta.Edges != 3) {
					err = fmt.Errorf("read %d: got %+v %+v", i, counts, meta)
				}
				errs <- err
			case 1:
				counts, _, err := c.Replay(ctx, engine.ReplayBatch{ID: uint64(i), Items: []engine.ReplayItem{{Key: testKey, Seq: seq, Cost: uint64(i), Want: uint64(2 * i), Return: uint64(i)}}})
				if err == nil && (len(counts) != 1 || counts[0] != engine.CellCounts{Seq: seq, CurRegional: uint64(100 + i), CurImported: uint64(i), PrevImported: 9,
					LeaseLeft: uint64(2 * i), LeaseSeq: uint64(i)}) {
					err = fmt.Errorf("replay %d: got %+v", i, counts)
				}
				errs <- err
			case 2:
				_, cc, _, err := c.Decide(ctx, engine.DecideRequest{Key: testKey, Limit: 1000, Cost: 1, Pending: uint64(i), Want: uint64(i + 1)})
				if err == nil && (cc.CurRegional != uint64(i) || cc.LeaseLeft != uint64(i+1)) {
					err = fmt.Errorf("decide %d: got %+v", i, cc)
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	conns, _, cmds := f.stats()
	if conns != 1 || len(cmds) != n {
		t.Fatalf("%d connections, %d commands; want 1, %d", conns, len(cmds), n)
	}
	t.Logf("%d calls in %d writes", n, c.writes.Load())
	if c.inflight.Load() != 0 {
		t.Fatalf("inflight = %d after all calls returned", c.inflight.Load())
	}
}

// The writer takes whatever is queued in one write: while one write is blocked, the
// requests queued meanwhile go out together in the next.
func TestWriterCoalesces(t *testing.T) {
	c := newClient(t, "pipe", Config{})
	client, server := net.Pipe()
	defer func() { _ = server.Close() }()
	cn := newConn(c, client, resp.NewReplyReader(client, maxReplyInts))
	c.mu.Lock()
	c.cur = cn
	c.wg.Add(2)
	go cn.readLoop()
	go cn.writeLoop()
	c.mu.Unlock()

	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	call := func(i int) {
		defer wg.Done()
		_, _, errs[i] = c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: int64(i)}})
	}
	wg.Add(1)
	go call(0)
	// The writer has taken the first request and is blocked writing it (net.Pipe is
	// unbuffered): queue the others behind it.
	testwait.UntilTrue(t, atOnce, "the writer took the first request", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return cn.pending.size == 1 && len(cn.out) == 0
	})
	for i := 1; i < n; i++ {
		wg.Add(1)
		go call(i)
	}
	testwait.UntilTrue(t, atOnce, "all requests queued", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return cn.pending.size == n
	})
	buf := make([]byte, 1<<16)
	var reqs []int
	var replies bytes.Buffer
	for total := 0; total < n; {
		m, err := server.Read(buf) // net.Pipe: one Read returns (part of) one Write
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for rest := buf[:m]; len(rest) > 0; k++ {
			args, used, err := resp.Parse(rest, nil, resp.DefaultLimits())
			if err != nil || used == 0 {
				t.Fatalf("parse: %v (used %d)", err, used)
			}
			replies.WriteString(canned(strs(args)).reply)
			rest = rest[used:]
		}
		reqs = append(reqs, k)
		total += k
	}
	if want := []int{1, n - 1}; !slices.Equal(reqs, want) {
		t.Fatalf("requests per write = %v, want %v", reqs, want)
	}
	if _, err := server.Write(replies.Bytes()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

// An origin that stops reading its requests fails the connection after writeTimeout,
// rather than letting requests pile up behind a blocked write.
func TestWriteTimeout(t *testing.T) {
	c := newClient(t, "pipe", Config{})
	c.writeTimeout = 50 * time.Millisecond
	client, server := net.Pipe() // unbuffered: a write blocks until the other end reads
	defer func() { _ = server.Close() }()
	cn := newConn(c, client, resp.NewReplyReader(client, maxReplyInts))
	c.mu.Lock()
	c.cur = cn
	c.wg.Add(2)
	go cn.readLoop()
	go cn.writeLoop()
	c.mu.Unlock()
	start := time.Now()
	_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !strings.Contains(err.Error(), "connection lost: write") {
		t.Fatalf("error = %v, want a write timeout", err)
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("took %v", d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		t.Fatal("the timed out connection is still current")
	}
}

func strs(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

// stallSeq1 makes f hold its answer to the request for sequence 1 until gate is closed (or
// f ends), and with it every later request of that connection.
func stallSeq1(f *fakeOrigin, gate <-chan struct{}) {
	f.setHandler(func(args []string) answer {
		a := canned(args)
		if args[2] == "1" {
			a.wait = gate
		}
		return a
	})
}

func TestContextTimeoutWhileStalled(t *testing.T) {
	f := newFake(t, "s")
	gate := make(chan struct{})
	stallSeq1(f, gate)
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("returned after %v, want about 50ms (the origin never answers)", d)
	}

	// A canceled caller returns at once too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel2() }()
	if _, _, _, err := c.Decide(ctx2, engine.DecideRequest{Key: testKey, Limit: 1, Cost: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	// An already ended ctx sends nothing.
	if _, _, err := c.Read(ctx2, []engine.ReadItem{{Key: testKey, Seq: 5}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}

	// The stalled replies arrive and are discarded; the next call gets its own reply.
	close(gate)
	counts, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if counts[0].Seq != 2 || counts[0].CurImported != 2 {
		t.Fatalf("got %+v, want the reply for seq 2", counts[0])
	}
	conns, _, cmds := f.stats()
	if conns != 1 || len(cmds) != 3 {
		t.Fatalf("%d connections, %d commands; want 1, 3", conns, len(cmds))
	}
	testwait.UntilTrue(t, atOnce, "no call in flight", func() bool { return c.inflight.Load() == 0 })
}

func TestServerClosesConnection(t *testing.T) {
	f := newFake(t, "s")
	gate := make(chan struct{})
	var once sync.Once
	f.setHandler(func(args []string) answer {
		a := canned(args)
		if args[2] == "1" { // the first connection's first request: hang up mid-batch
			once.Do(func() { a.wait, a.hangup = gate, true })
		}
		return a
	})
	c := newClient(t, f.addr(), Config{Secret: "s"})
	const n = 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: int64(i + 1)}})
		}()
		if i == 0 {
			testwait.UntilTrue(t, atOnce, "the first call is at the fake", func() bool { _, _, cmds := f.stats(); return len(cmds) == 1 })
		}
	}
	testwait.UntilTrue(t, atOnce, "all calls in flight", func() bool { return c.inflight.Load() == n })
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err == nil || isCtxErr(err) || !strings.Contains(err.Error(), "connection lost") {
			t.Errorf("call %d: error = %v, want a connection error", i, err)
		}
	}
	counts, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 9}})
	if err != nil {
		t.Fatalf("call after the connection closed: %v", err)
	}
	if counts[0].Seq != 9 {
		t.Fatalf("got %+v", counts)
	}
	if conns, hellos, _ := f.stats(); conns != 2 || len(hellos) != 2 {
		t.Fatalf("%d connections, %d HELLOs; want 2, 2", conns, len(hellos))
	}
}

// A reply that does not fit its request puts the connection out of step: the call fails,
// the connection closes, and the next call reconnects.
func TestMismatchedReplyClosesConnection(t *testing.T) {
	// A valid reply to the two-item read below, and each changed in one place: meta (edges
	// applied lease_ttl_ms boot now durable hand hands_durable hands_restored cold_ppm changes), then per item seq cur_regional cur_imported
	// prev_regional prev_imported lease_left lease_seq. Every field's range is checked in
	// wire's TestMalformedReplies; here one case of each kind of misfit.
	good := []int64{1, 0, 10000, cannedBoot, cannedNow, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 16, 5, 2, 0, 0, 0, 0, 0, 0}
	set := func(i int, n int64) string { v := slices.Clone(good); v[i] = n; return ints(v...) }
	for _, tc := range []struct{ name, reply string }{
		{"too few groups", ints(good[:18]...)},
		{"old format", ints(1, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0)},
		{"wrong seq", set(18, 3)},
		{"negative lease_left", set(23, -1)},
		{"negative lease ttl", set(2, -1)},
		{"simple string", "+OK\r\n"},
		{"bulk string", "$2\r\nhi\r\n"},
		{"oversized", "*" + strconv.Itoa(maxReplyInts+1) + "\r\n"},
		{"valid", ints(good...)}, // the control: answered, the connection kept
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, "s")
			f.setHandler(func(args []string) answer {
				if args[2] == "1" {
					return answer{reply: tc.reply}
				}
				return canned(args)
			})
			c := newClient(t, f.addr(), Config{Secret: "s"})
			_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}, {Key: testKey, Seq: 2}})
			wantConns := 2
			if tc.name == "valid" {
				wantConns = 1
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "connection lost") {
				t.Fatalf("error = %v, want a connection error", err)
			}
			if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 5}}); err != nil {
				t.Fatal(err)
			}
			if conns, _, _ := f.stats(); conns != wantConns {
				t.Fatalf("%d connections, want %d", conns, wantConns)
			}
		})
	}
}

func TestDecideReplyOutOfRange(t *testing.T) {
	f := newFake(t, "s")
	f.setHandler(func([]string) answer {
		// meta, allowed = 2, limit remaining retry reset, counts
		return answer{reply: ints(1, 0, 10000, cannedBoot, cannedNow, 0, 2, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0)}
	})
	c := newClient(t, f.addr(), Config{Secret: "s"})
	_, _, _, err := c.Decide(context.Background(), engine.DecideRequest{Key: testKey, Limit: 1, Cost: 1})
	if !errors.Is(err, errProtocol) {
		t.Fatalf("error = %v, want a protocol error", err)
	}
}

func TestConnectionRefusedFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	h := &countingHandler{}
	c := newClient(t, addr, Config{Secret: "s", DialTimeout: 5 * time.Second, Logger: slog.New(h)})
	for range 3 {
		start := time.Now()
		_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
		if err == nil || isCtxErr(err) {
			t.Fatalf("error = %v, want a dial error", err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("error = %v, want ECONNREFUSED", err)
		}
		if !strings.HasPrefix(err.Error(), "upstream "+addr+": read: ") {
			t.Errorf("error %q is not wrapped with the address and operation", err)
		}
		if d := time.Since(start); d > 5*time.Second/2 {
			t.Fatalf("took %v: waited for DialTimeout (5 s) although the origin refused at once", d)
		}
	}
	if n := h.total(); n != 1 {
		t.Fatalf("%d log lines for 3 failed dials, want 1: %v", n, h.msgs)
	}
	if c.inflight.Load() != 0 {
		t.Fatalf("inflight = %d", c.inflight.Load())
	}
}

// An origin that accepts but never answers HELLO: the call fails after DialTimeout even
// when its ctx has no deadline.
func TestHelloTimeout(t *testing.T) {
	f := newFake(t, "s")
	f.helloWait = make(chan struct{}) // never closed; released by f.close
	c := newClient(t, f.addr(), Config{Secret: "s", DialTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
	if err == nil || isCtxErr(err) || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("error = %v, want a HELLO timeout", err)
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("took %v", d)
	}
}

// Concurrent callers share one dial; a caller whose ctx ends during it leaves at once,
// and the connection is still made for the others.
func TestOneDialAtATime(t *testing.T) {
	f := newFake(t, "s")
	release := make(chan struct{})
	f.helloWait = release
	c := newClient(t, f.addr(), Config{Secret: "s", DialTimeout: 10 * time.Second})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("took %v: waited for the dial (DialTimeout 10 s)", d)
	}

	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: int64(i)}})
		}()
	}
	testwait.UntilTrue(t, atOnce, "all callers waiting", func() bool { return c.inflight.Load() == n })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if conns, _, _ := f.stats(); conns != 1 {
		t.Fatalf("%d connections, want 1", conns)
	}
}

func TestMaxInFlight(t *testing.T) {
	f := newFake(t, "s")
	gate := make(chan struct{})
	f.setHandler(func(args []string) answer {
		a := canned(args)
		a.wait = gate
		return a
	})
	const max = 4
	c := newClient(t, f.addr(), Config{Secret: "s", MaxInFlight: max})
	read := func(ctx context.Context) error {
		_, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}})
		return err
	}
	// Callers that gave up still hold their slots until their replies arrive.
	for range max {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if err := read(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error = %v, want context.DeadlineExceeded", err)
		}
		cancel()
	}
	start := time.Now()
	err := read(context.Background())
	if !errors.Is(err, ErrTooManyInFlight) || time.Since(start) > atOnce {
		t.Fatalf("error = %v after %v, want ErrTooManyInFlight at once (the slots free only when the gate opens)", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "upstream: too many requests in flight") {
		t.Fatalf("error text %q", err)
	}
	close(gate)
	testwait.UntilTrue(t, atOnce, "slots freed", func() bool { return c.inflight.Load() == 0 })
	if err := read(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRequestBounds(t *testing.T) {
	lim := resp.DefaultLimits()
	// READ has 1+4n arguments, REPLAY 4+6n.
	if 1+4*MaxReadItems > lim.MaxArgs || 1+4*(MaxReadItems+1) <= lim.MaxArgs {
		t.Errorf("MaxReadItems %d does not match MaxArgs %d", MaxReadItems, lim.MaxArgs)
	}
	if 4+6*MaxReplayItems > lim.MaxArgs || 4+6*(MaxReplayItems+1) <= lim.MaxArgs {
		t.Errorf("MaxReplayItems %d does not match MaxArgs %d", MaxReplayItems, lim.MaxArgs)
	}
	if MaxRequestBytes > lim.MaxBuffer || maxKeyBytes > lim.MaxBulk {
		t.Errorf("byte bounds beyond resp.DefaultLimits")
	}
	if 6+7*max(MaxReadItems, MaxReplayItems) > maxReplyInts {
		t.Errorf("replies to the largest requests exceed maxReplyInts")
	}

	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ctx := context.Background()
	items := make([]engine.ReadItem, MaxReadItems+1)
	for i := range items {
		items[i] = engine.ReadItem{Key: testKey, Seq: int64(i), Limit: engine.MaxLimit, Want: engine.MaxLimit}
	}
	if _, _, err := c.Read(ctx, items); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read of %d items: %v, want ErrTooLarge", len(items), err)
	}
	if _, meta, err := c.Read(ctx, nil); err != nil || meta.Edges < 1 {
		t.Fatalf("heartbeat Read: %v %+v", err, meta)
	}
	if _, _, err := c.Replay(ctx, engine.ReplayBatch{ID: 1}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty Replay: %v, want ErrEmpty", err)
	}
	bigKey := bytes.Repeat([]byte{'k'}, 1000)
	big := engine.ReplayBatch{ID: 1, Items: make([]engine.ReplayItem, MaxReplayItems)}
	for i := range big.Items {
		big.Items[i] = engine.ReplayItem{Key: bigKey, Seq: int64(i), Cost: 1}
	}
	if _, _, err := c.Replay(ctx, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Replay of %d KiB: %v, want ErrTooLarge", len(big.Items)*len(bigKey)>>10, err)
	}
	if _, _, _, err := c.Decide(ctx, engine.DecideRequest{Key: make([]byte, maxKeyBytes+1), Limit: 1}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decide of a huge key: %v, want ErrTooLarge", err)
	}
	// A forwarded command past the origin's argument bound is refused unsent (sent, the
	// origin would close the connection under every pipelined call).
	if _, err := c.Forward(ctx, 2, "default", make([][]byte, MaxForwardArgs+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Forward of %d arguments: %v, want ErrTooLarge", MaxForwardArgs+1, err)
	}
	// The largest allowed requests go through the origin's own parser.
	counts, _, err := c.Read(ctx, items[:MaxReadItems])
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != MaxReadItems || counts[MaxReadItems-1] != (engine.CellCounts{Seq: MaxReadItems - 1, CurRegional: uint64(len(testKey)),
		CurImported: (MaxReadItems - 1) % 7, PrevRegional: 2 * uint64(len(testKey)), PrevImported: 1, LeaseLeft: engine.MaxLimit, LeaseSeq: engine.MaxLimit}) {
		t.Fatalf("got %d counts", len(counts))
	}
	small := engine.ReplayBatch{ID: 2, Items: big.Items[:MaxReplayItems]}
	for i := range small.Items {
		small.Items[i] = engine.ReplayItem{Key: testKey, Seq: int64(i), Cost: 1<<63 - 1, Limit: 1<<63 - 1, Want: 1<<63 - 1, Return: 1<<63 - 1}
	}
	if counts, _, err := c.Replay(ctx, small); err != nil || len(counts) != MaxReplayItems || counts[MaxReplayItems-1].LeaseSeq != 1<<63-1 {
		t.Fatalf("Replay of %d items: %v", MaxReplayItems, err)
	}
	if conns, _, cmds := f.stats(); conns != 1 || len(cmds) != 3 {
		t.Fatalf("%d connections, %d commands; want 1, 3 (the heartbeat, the two within bounds; refused calls send nothing)", conns, len(cmds))
	}
	if c.inflight.Load() != 0 {
		t.Fatalf("inflight = %d", c.inflight.Load())
	}
}

// settle waits, bounded, for the goroutine count to come back to at most base.
func settle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	f := newFake(t, "s")
	gate := make(chan struct{})
	f.setHandler(func(args []string) answer {
		a := canned(args)
		if args[2] == "7" {
			a.wait = gate
		}
		return a
	})
	base := runtime.NumGoroutine()
	c := New(Config{Addr: f.addr(), Secret: "s", NodeRun: "e/1", Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	for i := range 20 {
		if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: int64(i + 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Pending calls at Close fail with ErrClosed, promptly.
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 7}})
			errs <- err
		}()
	}
	testwait.UntilTrue(t, atOnce, "calls pending", func() bool { return c.inflight.Load() == n })
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("pending call: error = %v, want ErrClosed", err)
		}
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("Close took %v", d)
	}
	if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	close(gate) // lets the fake's connection goroutine see the closed connection
	settle(t, base)
}

// Close during a dial (the origin does not answer HELLO) aborts it at once.
func TestCloseDuringDial(t *testing.T) {
	f := newFake(t, "s")
	release := make(chan struct{})
	f.helloWait = release
	base := runtime.NumGoroutine()
	c := New(Config{Addr: f.addr(), Secret: "s", NodeRun: "e/1", DialTimeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	errs := make(chan error, 1)
	go func() {
		_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
		errs <- err
	}()
	testwait.UntilTrue(t, atOnce, "the dial reached HELLO", func() bool { _, hellos, _ := f.stats(); return len(hellos) == 1 })
	start := time.Now()
	_ = c.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("error = %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > atOnce {
		t.Fatalf("Close took %v", d)
	}
	close(release)
	settle(t, base)
}

// Connections that fail and reconnect leave no goroutines behind either.
func TestReconnectsLeaveNoGoroutines(t *testing.T) {
	f := newFake(t, "s")
	f.setHandler(func(args []string) answer {
		a := canned(args)
		a.hangup = args[2] == "0"
		return a
	})
	base := runtime.NumGoroutine()
	c := New(Config{Addr: f.addr(), Secret: "s", NodeRun: "e/1", Logger: slog.New(slog.DiscardHandler)})
	for i := range 20 {
		_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: int64(i % 2)}})
		if (err != nil) != (i%2 == 0) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if conns, _, _ := f.stats(); conns != 11 {
		t.Fatalf("%d connections, want 11", conns)
	}
	_ = c.Close()
	settle(t, base)
}

// Many callers while the origin hangs up now and then and the client is closed at the
// end: every call either gets its own reply or an error, never another call's, and
// nothing is left running.
func TestChurnAndCloseWhileBusy(t *testing.T) {
	f := newFake(t, "s")
	f.record = false
	var mu sync.Mutex
	served := 0
	f.setHandler(func(args []string) answer {
		a := canned(args)
		mu.Lock()
		served++
		a.hangup = served%50 == 0
		mu.Unlock()
		return a
	})
	base := runtime.NumGoroutine()
	c := New(Config{Addr: f.addr(), Secret: "s", NodeRun: "e/1", MaxInFlight: 64, Logger: slog.New(slog.DiscardHandler)})
	var wg sync.WaitGroup
	var okCalls, failedCalls atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				seq := int64(g*1_000_000 + i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%5)*time.Millisecond)
				counts, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: seq}})
				cancel()
				switch {
				case errors.Is(err, ErrClosed):
					return
				case err != nil:
					if !isCtxErr(err) && !errors.Is(err, ErrTooManyInFlight) && !strings.Contains(err.Error(), "connection lost") {
						t.Errorf("unexpected error: %v", err)
						return
					}
					failedCalls.Add(1)
				case counts[0].Seq != seq || counts[0].CurImported != uint64(seq%7):
					t.Errorf("call for seq %d got %+v", seq, counts[0])
					return
				default:
					okCalls.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	_ = c.Close()
	wg.Wait()
	conns, _, _ := f.stats()
	t.Logf("%d calls answered, %d failed, %d connections", okCalls.Load(), failedCalls.Load(), conns)
	if okCalls.Load() == 0 {
		t.Fatal("no call succeeded")
	}
	if conns < 2 {
		t.Fatalf("%d connections: the origin's hang-ups were not exercised", conns)
	}
	settle(t, base)
}

// An origin that takes requests and answers none (stopped, or cut off without a reset)
// fails the connection after replyTimeout, and the next call dials again; a connection with
// nothing outstanding is never timed out, however long it idles.
func TestReplyTimeout(t *testing.T) {
	f := newFake(t, "s")
	stallSeq1(f, make(chan struct{})) // never closed: seq 1 is never answered
	c := newClient(t, f.addr(), Config{Secret: "s"})
	c.replyTimeout = 100 * time.Millisecond

	// Idle past the timeout, with and without a call answered before: the connection stays.
	if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 2}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * c.replyTimeout)
	if _, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 3}}); err != nil {
		t.Fatal(err)
	}
	if conns, _, _ := f.stats(); conns != 1 {
		t.Fatalf("%d connections after idling, want 1", conns)
	}

	// An unanswered call: its caller gives up at its ctx, the connection at replyTimeout,
	// even while other requests keep being written behind it. (A caller that a loaded
	// machine wakes only after replyTimeout may see the connection's failure first.)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && (time.Since(began) < c.replyTimeout || !strings.Contains(err.Error(), "connection lost")) {
		t.Fatalf("error = %v after %v, want context.DeadlineExceeded", err, time.Since(began))
	}
	stop := time.Now().Add(atOnce) // replyTimeout is 100 ms; the fault is never failing it
	for {
		c.mu.Lock()
		gone := c.cur == nil
		c.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(stop) {
			t.Fatal("the connection with an unanswered request was not failed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, _, _ = c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 4}}) // queued behind seq 1
		cancel()
	}
	counts, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 5}})
	if err != nil {
		t.Fatalf("the call after the timeout: %v", err)
	}
	if counts[0].Seq != 5 {
		t.Fatalf("got %+v, want the reply for seq 5", counts[0])
	}
	if conns, _, _ := f.stats(); conns != 2 {
		t.Fatalf("%d connections, want 2 (one dialed again)", conns)
	}
	testwait.UntilTrue(t, atOnce, "no call in flight", func() bool { return c.inflight.Load() == 0 })
}

// Publish splits components into RL.INTERNAL.PUBLISH commands of at most MaxPublishItems,
// waits for every reply (+OK or integers), and an error reply fails it with a ServerError;
// Ping takes +PONG. Both count as calls on one connection (Connections).
func TestPublishAndPing(t *testing.T) {
	comps := make([]engine.Component, 2*MaxPublishItems+3)
	for i := range comps {
		comps[i] = engine.Component{Key: []byte("k" + strconv.Itoa(i)), Region: "a", Seq: 1, Count: uint64(i)}
	}
	for _, tc := range []struct {
		name, reply string
		wantErr     bool
	}{
		{"ok", "+OK\r\n", false},
		{"ints", "*1\r\n:0\r\n", false},
		{"error", "-ERR refused\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, "s")
			f.setHandler(func(args []string) answer {
				if args[0] == "PING" {
					return answer{reply: "+PONG\r\n"}
				}
				return answer{reply: tc.reply}
			})
			c := newClient(t, f.addr(), Config{Secret: "s", NodeRun: "peer:a", Role: "peer"})
			ctx := context.Background()
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("ping: %v", err)
			}
			err := c.Publish(ctx, comps)
			var se *ServerError
			if tc.wantErr != errors.As(err, &se) || (!tc.wantErr && err != nil) {
				t.Fatalf("publish: %v, want error %v", err, tc.wantErr)
			}
			if n := c.Connections(); n != 1 {
				t.Fatalf("%d connections, want 1", n)
			}
			if tc.wantErr {
				return
			}
			_, _, cmds := f.stats()
			rows := 0
			for _, cmd := range cmds[1:] {
				if cmd[0] != "RL.INTERNAL.PUBLISH" || (len(cmd)-1)/4 > MaxPublishItems {
					t.Fatalf("command %.40q, want RL.INTERNAL.PUBLISH of at most %d rows", cmd, MaxPublishItems)
				}
				rows += (len(cmd) - 1) / 4
			}
			if len(cmds) != 4 || rows != len(comps) {
				t.Fatalf("%d commands, %d rows; want PING and 3 publications of %d rows", len(cmds), rows, len(comps))
			}
		})
	}
}
