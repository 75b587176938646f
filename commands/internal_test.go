package commands_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// doArgs serves one command given as separate arguments (binary keys contain spaces).
func (r *rig) doArgs(args ...string) string {
	r.w.Reset()
	var a [][]byte
	for _, s := range args {
		a = append(a, []byte(s))
	}
	r.d.Serve(r.s, &r.w, a)
	return string(r.w.Bytes())
}

func newClusterRig() *rig {
	r, _ := newClusterRigEngine()
	return r
}

// newClusterRigEngine is newClusterRig that also returns the origin's engine.
func newClusterRigEngine() (*rig, *engine.Engine) {
	clock := engine.NewManualClock(1_000_000)
	// A fixed lease TTL (not engine.DefaultLeaseTTL): the replies below state it.
	eng := engine.New(clock, engine.Config{LeaseTTL: 10 * time.Second})
	s := commands.NewSession(1, "127.0.0.1:1", "127.0.0.1:2", clock.NowMs())
	d := commands.New(commands.Options{Origin: eng, ClusterSecret: "cs", RequirePass: "pw",
		Host: &fakeHost{sessions: []*commands.Session{s}}, Version: "test"})
	return &rig{d: d, s: s, clock: clock}, eng
}

func TestInternalCommands(t *testing.T) {
	r := newClusterRig()
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}))
	if got := r.doArgs("RL.INTERNAL.READ", key, "1000"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("read before hello = %q", got)
	}
	if got := r.doArgs("RL.INTERNAL.HELLO", "wrong", "edge1/a"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("hello with a wrong secret = %q", got)
	}
	if got := r.doArgs("RL.INTERNAL.HELLO", "cs", "edge1/a"); got != "+OK\r\n" {
		t.Fatalf("hello = %q", got)
	}
	steps := []struct {
		args []string
		want string
	}{
		// Replies start with the meta: edges, applied batch, lease TTL, the origin's boot
		// and its clock (both 1000000 here), the durable batch (2^63-1: this origin
		// saves no snapshots, so edges keep nothing for it), the hand-off's number (in a
		// DECIDE reply), the durable hand-off (2^63-1 too) and the restored one.
		{[]string{"RL.INTERNAL.READ", key, "1000", "0", "0"}, "*18\r\n:1\r\n:0\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.REPLAY", "1", "0", "0", key, "1000", "3", "10", "0", "0"}, "*18\r\n:1\r\n:1\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:3\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"},
		// The same batch again: applied once.
		{[]string{"RL.INTERNAL.REPLAY", "1", "0", "0", key, "1000", "3", "10", "0", "0"}, "*18\r\n:1\r\n:1\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:3\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.REPLAY", "2", "0", "0", key, "1000", "2", "10", "0", "0", key, "999", "4", "0", "0", "0"}, "*25\r\n:1\r\n:2\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:5\r\n:0\r\n:4\r\n:0\r\n:0\r\n:0\r\n:999\r\n:4\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"},
		// limit 10, used 5 + 4 + pending 1 = 10: cost 1 is denied.
		{[]string{"RL.INTERNAL.DECIDE", key, "10", "1", "1", "0", "0", "0", "0", "0"}, "*23\r\n:1\r\n:2\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:1\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:0\r\n:10\r\n:0\r\n"},
		// In flight in batch 2, which was applied: not counted again. Batch 3 was not: counted.
		{[]string{"RL.INTERNAL.DECIDE", key, "10", "1", "0", "5", "2", "0", "0", "0"}, "*23\r\n:1\r\n:2\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:2\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1\r\n:10\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.DECIDE", key, "11", "1", "0", "1", "3", "0", "0", "0"}, "*23\r\n:1\r\n:2\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:3\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:0\r\n:11\r\n:0\r\n"},
		// A lease: used 6 + 4 of limit 100 leaves 90; one edge may hold half of it, and
		// asks for 16. The lease sequence starts from the boot time.
		{[]string{"RL.INTERNAL.READ", key, "1000", "100", "16"}, "*18\r\n:1\r\n:2\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:6\r\n:0\r\n:4\r\n:0\r\n:16\r\n:1048576000001\r\n"},
		// The run replays 5 accepted under it: the origin counts them, and the lease left
		// shrinks by as much (16 - 5). The item neither asks for a lease nor gives one back:
		// its answer carries none (0, 0), and the edge keeps the lease it holds.
		{[]string{"RL.INTERNAL.REPLAY", "3", "0", "0", key, "1000", "5", "100", "0", "0"}, "*18\r\n:1\r\n:3\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:11\r\n:0\r\n:4\r\n:0\r\n:0\r\n:0\r\n"},
		// The lease left counts as used in a hand-off: 11 + 4 + 11 + 75 > 100.
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "75", "0", "0", "0", "0", "0", "0"}, "*23\r\n:1\r\n:3\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:4\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "74", "0", "0", "0", "0", "0", "0"}, "*23\r\n:1\r\n:3\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:5\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1\r\n"},
		// Given back by a replay (the run has replayed all it accepted): the lease holds
		// nothing more, and its sequence moves on.
		{[]string{"RL.INTERNAL.REPLAY", "4", "0", "0", key, "1000", "0", "100", "0", "1048576000001"}, "*18\r\n:1\r\n:4\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:85\r\n:0\r\n:4\r\n:0\r\n:0\r\n:1048576000002\r\n"},
		// A new lease within the room left: (100 - 85 - 4) / 2 = 5.
		{[]string{"RL.INTERNAL.READ", key, "1000", "100", "16"}, "*18\r\n:1\r\n:4\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:85\r\n:0\r\n:4\r\n:0\r\n:5\r\n:1048576000003\r\n"},
		// Given back by a hand-off with 1 pending and 1 in flight in batch 5 (not applied):
		// the lease holds only those 2 (counted as used once: 85 + 4 + 2 + 1 <= 100).
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "1", "1", "5", "0", "1048576000003", "0"}, "*23\r\n:1\r\n:4\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:6\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n" +
			":1\r\n:100\r\n:8\r\n:0\r\n:2000\r\n:1000\r\n:86\r\n:0\r\n:4\r\n:0\r\n:2\r\n:1048576000003\r\n"},
		// Batch 5 lands: the lease holds the pending 1; then its replay: nothing (neither
		// asks for a lease: their answers carry none).
		{[]string{"RL.INTERNAL.REPLAY", "5", "0", "0", key, "1000", "1", "100", "0", "0"}, "*18\r\n:1\r\n:5\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:87\r\n:0\r\n:4\r\n:0\r\n:0\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.REPLAY", "6", "0", "0", key, "1000", "1", "100", "0", "0"}, "*18\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:88\r\n:0\r\n:4\r\n:0\r\n:0\r\n:0\r\n"},
		// A new lease: (100 - 88 - 4) / 2 = 4.
		{[]string{"RL.INTERNAL.READ", key, "1000", "100", "16"}, "*18\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:88\r\n:0\r\n:4\r\n:0\r\n:4\r\n:1048576000004\r\n"},
		// A hand-off whose deadline has passed (the clock is at 1000000): the edge no longer
		// waits for it, so the origin denies it and counts nothing, whatever the room. It
		// still takes the lease given back with it: the lease holds nothing more.
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "0", "0", "0", "0", "1048576000004", "999999"},
			"*23\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:0\r\n:100\r\n:0\r\n:1\r\n:1000\r\n" +
				":1000\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"},
		{[]string{"RL.INTERNAL.READ", key, "1000", "0", "0"}, "*18\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:88\r\n:0\r\n:4\r\n:0\r\n:0\r\n:0\r\n"},
		// At its deadline the edge gives up too: denied, nothing counted. Just before it,
		// decided and counted.
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "0", "0", "0", "0", "0", "1000000"}, "*23\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:0\r\n:100\r\n"},
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "0", "0", "0", "0", "0", "1000001"}, "*23\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:7\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1\r\n:100\r\n"},
		{[]string{"RL.INTERNAL.READ", key, "1000", "0", "0"}, "*18\r\n:1\r\n:6\r\n:10000\r\n:1000000\r\n:1000000\r\n:9223372036854775807\r\n:0\r\n:9223372036854775807\r\n:0\r\n:0\r\n:1048576000000\r\n:1000\r\n:89\r\n:0\r\n:4\r\n:0\r\n"},
		// A malformed deadline gets DECIDE's error for its integers other than the limit.
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "0", "0", "0", "0", "0", "-1"}, "-ERR cost must be"},
		{[]string{"RL.INTERNAL.DECIDE", key, "100", "1", "0", "0", "0", "0", "0"}, "-ERR wrong number of arguments"},
		{[]string{"RL.INTERNAL.READ", "garbage", "1", "0", "0"}, "-ERR internal: malformed tuple key"},
		{[]string{"RL.INTERNAL.REPLAY", "7", "0", "0", key, "1000", "1"}, "-ERR wrong number of arguments"},
		{[]string{"RL.INTERNAL.REPLAY", "7", "0", "0", key, "1000", "x", "1", "0", "0"}, "-ERR internal: malformed integer"},
		{[]string{"RL.INTERNAL.REPLAY", "7", "0", "0", key, "1000", "1", "1", "0", "0", key}, "-ERR syntax error"},
	}
	for _, s := range steps {
		if got := r.doArgs(s.args...); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%q:\n got %q\nwant prefix %q", s.args[0], got, s.want)
		}
	}
	// The cluster connection may also use client commands (it is authenticated).
	if got := r.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING on a cluster connection = %q", got)
	}
}

func TestInternalRefusedWithoutSecretConfigured(t *testing.T) {
	r := newRig("")
	if got := r.doArgs("RL.INTERNAL.HELLO", "", "n"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("hello with no secret configured = %q", got)
	}
	var w resp.Writer
	_ = w
}

// TestInternalHelloNeedsClientCert: with ClusterClientCert (--cluster-client-ca), HELLO on a
// connection without a verified client certificate is refused whatever the secret; with
// one, the secret decides as before.
func TestInternalHelloNeedsClientCert(t *testing.T) {
	tests := []struct {
		name     string
		required bool
		verified bool
		secret   string
		want     string
	}{
		{name: "not required, no certificate", secret: "cs", want: "+OK"},
		{name: "required, no certificate, right secret", required: true, secret: "cs", want: "-NOPERM"},
		{name: "required, no certificate, wrong secret", required: true, secret: "wrong", want: "-NOPERM"},
		{name: "required, verified, right secret", required: true, verified: true, secret: "cs", want: "+OK"},
		{name: "required, verified, wrong secret", required: true, verified: true, secret: "wrong", want: "-WRONGPASS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
			s := commands.NewSession(1, "127.0.0.1:1", "127.0.0.1:2", 1_000_000)
			s.CertVerified = tt.verified
			r := &rig{s: s, d: commands.New(commands.Options{Origin: eng, ClusterSecret: "cs",
				ClusterClientCert: tt.required, Host: &fakeHost{sessions: []*commands.Session{s}}, Version: "test"})}
			if got := r.doArgs("RL.INTERNAL.HELLO", tt.secret, "edge1/a"); !strings.HasPrefix(got, tt.want) {
				t.Fatalf("hello = %q, want %s", got, tt.want)
			}
			key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}))
			got := r.doArgs("RL.INTERNAL.READ", key, "1000", "0", "0")
			if ok := strings.HasPrefix(got, "*"); ok != (tt.want == "+OK") {
				t.Fatalf("read after hello %s = %q", tt.want, got)
			}
		})
	}
}

// TestInternalPublish: only another region's origin may publish, and only components of
// known regions are taken.
func TestInternalPublish(t *testing.T) {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{Region: "us"})
	s := commands.NewSession(1, "127.0.0.1:1", "127.0.0.1:2", clock.NowMs())
	d := commands.New(commands.Options{Origin: eng, ClusterSecret: "cs", Region: "us",
		PeerRegions: map[string]bool{"eu": true}, Host: &fakeHost{}, Version: "test"})
	r := &rig{d: d, s: s, clock: clock}
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}))
	r.doArgs("RL.INTERNAL.HELLO", "cs", "edge1/a")
	if got := r.doArgs("RL.INTERNAL.PUBLISH", key, "1000", "eu", "5"); !strings.HasPrefix(got, "-ERR internal: RL.INTERNAL.PUBLISH is for") {
		t.Fatalf("publish from an edge = %q", got)
	}
	r.s = commands.NewSession(2, "127.0.0.1:3", "127.0.0.1:2", clock.NowMs())
	r.doArgs("RL.INTERNAL.HELLO", "cs", "peer:eu")
	if got := r.doArgs("RL.INTERNAL.PUBLISH", key, "1000", "eu", "5", key, "1000", "mars", "7", key, "1000", "us", "2"); got != "*1\r\n:2\r\n" {
		t.Fatalf("publish from a peer = %q, want 2 rows taken", got)
	}
	st := eng.Status(engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000})
	if st.CurrentImported != 5 || st.CurrentRegional != 2 {
		t.Fatalf("status after publish: %+v", st)
	}
}

// TestInternalChanges: RL.INTERNAL.CHANGES needs the cluster secret and answers the
// origin's change feed as one bulk string.
func TestInternalChanges(t *testing.T) {
	r, eng := newClusterRigEngine()
	if got := r.doArgs("RL.INTERNAL.CHANGES", "0"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("changes before hello = %q", got)
	}
	if got := r.doArgs("RL.INTERNAL.HELLO", "cs", "edge1/a"); got != "+OK\r\n" {
		t.Fatalf("hello = %q", got)
	}
	base := eng.ChangeVersion()
	v := eng.AddChange(engine.ChangeReset, []byte("\x01\x00\x00k"), nil)
	for _, c := range []struct {
		since   uint64
		resync  bool
		changes int
	}{{base, false, 1}, {v, false, 0}, {v + 1, true, 0}} {
		got := r.doArgs("RL.INTERNAL.CHANGES", strconv.FormatUint(c.since, 10))
		_, body, ok := strings.Cut(got, "\r\n")
		if !strings.HasPrefix(got, "$") || !ok {
			t.Fatalf("changes since %d = %q, want a bulk string", c.since, got)
		}
		rep, err := wire.ParseChangesReply([]byte(strings.TrimSuffix(body, "\r\n")))
		if err != nil || rep.Version != v || rep.Resync != c.resync || len(rep.Changes) != c.changes {
			t.Fatalf("changes since %d: %+v, %v", c.since, rep, err)
		}
	}
	for _, args := range [][]string{{"RL.INTERNAL.CHANGES", "x"}, {"RL.INTERNAL.CHANGES", "-1"}} {
		if got := r.doArgs(args...); got != "-ERR syntax error\r\n" {
			t.Errorf("%q = %q", args, got)
		}
	}
}
