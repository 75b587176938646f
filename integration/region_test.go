package integration

// Region tests: real origin processes of different regions on loopback, exchanging
// G-Counter components with --peer (SPEC section 6, README "Regions",
// docs/internal-protocol.md "Between regions"), driven through go-redis.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// regionSecret is the --cluster-secret of every origin of these tests.
const regionSecret = "region-test-secret"

// publishInterval keeps the region tests fast; regionPoll bounds how long a publication
// may take to show on a connected peer (a few intervals, jittered, plus scheduling).
const (
	publishInterval = "200ms"
	regionPoll      = 3 * time.Second
	// reconnectPoll bounds convergence after a peer comes back: the sender's backoff
	// (50 ms doubling to 5 s) may be a few seconds into its sequence by then.
	reconnectPoll = 8 * time.Second
)

// regionArgs returns the flags of an origin of region listening on listen, with one --peer
// per entry of peers (region -> address, in sorted region order) and extra flags last.
func regionArgs(region, listen string, peers map[string]string, extra ...string) []string {
	args := []string{"--region", region, "--listen", listen, "--cluster-secret", regionSecret,
		"--publish-interval", publishInterval, "--metrics-listen", ""}
	names := make([]string, 0, len(peers))
	for n := range peers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "--peer", n+"="+peers[n])
	}
	return append(args, extra...)
}

// startRegions starts one origin per region name, each peered with all the others
// directly, and returns them by name. extra flags go to every process (e.g.
// "--data-dir", "" when persistence is not the point).
func startRegions(t testing.TB, names []string, extra ...string) map[string]*proc {
	t.Helper()
	addrs := map[string]string{}
	for _, n := range names {
		addrs[n] = loopback(freePort(t))
	}
	out := map[string]*proc{}
	for _, n := range names {
		peers := map[string]string{}
		for _, o := range names {
			if o != n {
				peers[o] = addrs[o]
			}
		}
		out[n] = start(t, regionArgs(n, addrs[n], peers, extra...)...)
	}
	return out
}

// peerLines returns INFO ratchet's peerN lines, parsed, by peer region; it checks that
// `peers` matches their number.
func peerLines(t testing.TB, c *redis.Client) map[string]map[string]string {
	t.Helper()
	info := ratchetInfo(t, c)
	n, err := strconv.Atoi(info["peers"])
	if err != nil {
		t.Fatalf("INFO ratchet peers=%q is not an integer", info["peers"])
	}
	out := map[string]map[string]string{}
	for i := range n {
		v, ok := info["peer"+strconv.Itoa(i)]
		if !ok {
			t.Fatalf("INFO ratchet says peers:%d but has no peer%d line: %v", n, i, info)
		}
		f := map[string]string{}
		for _, part := range strings.Split(v, ",") {
			if k, val, ok := strings.Cut(part, "="); ok {
				f[k] = val
			}
		}
		out[f["region"]] = f
	}
	return out
}

// peerField returns one field of the peerN line of region.
func peerField(t testing.TB, c *redis.Client, region, field string) string {
	t.Helper()
	lines := peerLines(t, c)
	l, ok := lines[region]
	if !ok {
		t.Fatalf("INFO ratchet has no peer line for region %q: %v", region, lines)
	}
	v, ok := l[field]
	if !ok {
		t.Fatalf("INFO ratchet peer %q has no field %q: %v", region, field, l)
	}
	return v
}

// waitPeersUp waits until every client's INFO ratchet shows each of its peers up=1.
func waitPeersUp(t testing.TB, cs map[string]*redis.Client) {
	t.Helper()
	testwait.Until(t, 5*time.Second, "every peer up", func() (bool, string) {
		for name, c := range cs {
			for region, l := range peerLines(t, c) {
				if l["up"] != "1" {
					return false, fmt.Sprintf("%s sees peer %s up=%s", name, region, l["up"])
				}
			}
		}
		return true, ""
	})
}

// counts is the part of RL.STATUS these tests look at.
type counts struct {
	seq, regional, imported, used int64
}

func (c counts) String() string {
	return fmt.Sprintf("seq=%d regional=%d imported=%d used=%d", c.seq, c.regional, c.imported, c.used)
}

// statusCounts reads RL.STATUS key window through c.
func statusCounts(t testing.TB, c *redis.Client, key, window string) counts {
	t.Helper()
	st, _ := status(t, c, key, window)
	return counts{seq: statusInt(t, st, "sequence"), regional: statusInt(t, st, "current_regional"),
		imported: statusInt(t, st, "current_imported"), used: statusInt(t, st, "used")}
}

// waitCounts polls RL.STATUS on c until want(counts) holds, within timeout.
func waitCounts(t testing.TB, timeout time.Duration, what string, c *redis.Client, key, window string, want func(counts) bool) counts {
	t.Helper()
	var last counts
	testwait.Until(t, timeout, what, func() (bool, string) {
		last = statusCounts(t, c, key, window)
		return want(last), last.String()
	})
	return last
}

// regionWindow returns a window of about 10 minutes whose current cell has at least
// half a minute to run, so that a test's counts stay in one cell.
func regionWindow(t testing.TB) string {
	t.Helper()
	w, _ := liveWindow(t, 30*time.Second, "10m", "11m", "13m")
	return w
}

// allow runs RL.LIMIT and fails t unless its allowed flag is want; it returns the reply.
func allow(t testing.TB, c *redis.Client, want bool, args ...any) []int64 {
	t.Helper()
	r := limitReply(t, c, args...)
	if (r[0] == 1) != want {
		t.Fatalf("RL.LIMIT %v = %v, want allowed=%v", args, r, want)
	}
	return r
}

// TestRegionTwoWayExchange: a count in A reaches B, B's decisions use it, and B's own count
// (published once A's count is there) reaches A.
func TestRegionTwoWayExchange(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	allow(t, a, true, "k", 100, w, "COST", 60)
	began := time.Now()
	waitCounts(t, regionPoll, "B to import A's 60", b, "k", w, func(c counts) bool { return c.imported == 60 })
	t.Logf("A -> B in %v", time.Since(began))
	if c := statusCounts(t, b, "k", w); c.regional != 0 || c.used != 60 {
		t.Fatalf("B after import: %v, want regional 0, used 60", c)
	}

	// B decides with A's count: 60 + 41 > 100, 60 + 40 fits exactly.
	if r := allow(t, b, false, "k", 100, w, "COST", 41); r[2] != 40 {
		t.Errorf("B denied reply %v, want remaining 40", r)
	}
	if r := allow(t, b, true, "k", 100, w, "COST", 40); r[2] != 0 {
		t.Errorf("B allowed reply %v, want remaining 0", r)
	}

	// A's count is non-zero at B, so B's growth is published back.
	began = time.Now()
	c := waitCounts(t, regionPoll, "A to import B's 40", a, "k", w, func(c counts) bool { return c.imported == 40 })
	t.Logf("B -> A in %v", time.Since(began))
	if c.regional != 60 || c.used != 100 {
		t.Errorf("A after import: %v, want regional 60, used 100", c)
	}
	allow(t, a, false, "k", 100, w)
	// B's own count is never echoed back as imported (a region writes only its component).
	time.Sleep(600 * time.Millisecond)
	if c := statusCounts(t, b, "k", w); c.regional != 40 || c.imported != 60 || c.used != 100 {
		t.Errorf("B at the end: %v, want regional 40, imported 60, used 100", c)
	}
	if c := statusCounts(t, a, "k", w); c.regional != 60 || c.imported != 40 || c.used != 100 {
		t.Errorf("A at the end: %v, want regional 60, imported 40, used 100", c)
	}
	// The peer lines account for it.
	if v := peerField(t, a, "b", "published"); v == "0" {
		t.Errorf("A's peer b line: published=0 after publishing")
	}
	if v := peerField(t, b, "a", "imported"); v == "0" {
		t.Errorf("B's peer a line: imported=0 after importing")
	}
	if v := peerField(t, a, "b", "addr"); v != ps["b"].Addr {
		t.Errorf("A's peer b addr=%s, want %s", v, ps["b"].Addr)
	}
}

// TestRegionThreeWayNoDoubleCounting: three regions each counting 30 converge to 90
// everywhere; anti-entropy relays foreign rows (A sends B's row to C), and max keeps them
// from being counted twice.
func TestRegionThreeWayNoDoubleCounting(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "c"}
	// 30 of 1000 is below the default threshold (20%): publish from 1%.
	ps := startRegions(t, names, "--data-dir", "", "--publish-threshold", "0.01")
	cs := map[string]*redis.Client{}
	for _, n := range names {
		cs[n] = ps[n].client(t, nil)
	}
	waitPeersUp(t, cs)
	w := regionWindow(t)
	for _, n := range names {
		allow(t, cs[n], true, "k", 1000, w, "COST", 30)
	}
	for _, n := range names {
		waitCounts(t, regionPoll, "region "+n+" to converge to 90", cs[n], "k", w, func(c counts) bool { return c.used == 90 })
	}
	// Several more rounds (and repeated anti-entropy relays) change nothing.
	time.Sleep(time.Second)
	for _, n := range names {
		if c := statusCounts(t, cs[n], "k", w); c.regional != 30 || c.imported != 60 || c.used != 90 {
			t.Errorf("region %s: %v, want regional 30, imported 60, used 90", n, c)
		}
		if r := allow(t, cs[n], true, "k", 1000, w, "COST", 0); r[2] != 910 {
			t.Errorf("region %s peek: %v, want remaining 910", n, r)
		}
		if l := peerLines(t, cs[n]); len(l) != 2 {
			t.Errorf("region %s INFO peer lines: %v, want 2", n, l)
		}
	}
}

// TestRegionPublishThreshold: a count below --publish-threshold of the cell's limit stays
// regional; once another region has counted the cell, every growth is published.
func TestRegionPublishThreshold(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	// 5 of 1000 is under 20%: not published.
	allow(t, b, true, "quiet", 1000, w, "COST", 5)
	// 300 of 1000 is over it.
	allow(t, a, true, "k", 1000, w, "COST", 300)
	waitCounts(t, regionPoll, "B to import A's 300", b, "k", w, func(c counts) bool { return c.imported == 300 })
	// B's 5 on "k" is under the threshold, but A has counted "k": published.
	allow(t, b, true, "k", 1000, w, "COST", 5)
	waitCounts(t, regionPoll, "A to import B's 5 (foreign count present)", a, "k", w, func(c counts) bool { return c.imported == 5 })
	if c := statusCounts(t, a, "quiet", w); c.imported != 0 {
		t.Errorf("A imported B's 5 of 1000 on a cell below the threshold: %v", c)
	}
}

// TestRegionPublishThresholdZero: --publish-threshold 0 (accepted: "from 0 to 1") means
// every count is published at once.
func TestRegionPublishThresholdZero(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "", "--publish-threshold", "0")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)
	allow(t, a, true, "k", 1000, w, "COST", 1)
	waitCounts(t, regionPoll, "B to import A's 1 of 1000 with --publish-threshold 0", b, "k", w,
		func(c counts) bool { return c.imported == 1 })
}

// TestRegionPeerDownCatchesUp: a peer that was down while A counted gets A's count when it
// starts (anti-entropy on connect), without new traffic; A's INFO shows it down, lagging,
// then up.
func TestRegionPeerDownCatchesUp(t *testing.T) {
	t.Parallel()
	addrA, addrB := loopback(freePort(t)), loopback(freePort(t))
	pa := start(t, regionArgs("a", addrA, map[string]string{"b": addrB}, "--data-dir", "")...)
	a := pa.client(t, nil)
	w := regionWindow(t)
	allow(t, a, true, "k", 100, w, "COST", 60)
	time.Sleep(3 * 200 * time.Millisecond) // a few publish rounds with nobody to take them
	if up := peerField(t, a, "b", "up"); up != "0" {
		t.Errorf("A's peer b up=%s while b is not running, want 0", up)
	}
	if lag, _ := strconv.Atoi(peerField(t, a, "b", "lag_ms")); lag <= 0 {
		t.Errorf("A's peer b lag_ms=%d while a publication waits, want > 0", lag)
	}

	pb := start(t, regionArgs("b", addrB, map[string]string{"a": addrA}, "--data-dir", "")...)
	b := pb.client(t, nil)
	began := time.Now()
	waitCounts(t, reconnectPoll, "B to get A's 60 by anti-entropy", b, "k", w, func(c counts) bool { return c.imported == 60 })
	t.Logf("caught up %v after B started", time.Since(began))
	testwait.Until(t, regionPoll, "A's peer b up with no lag", func() (bool, string) {
		l := peerLines(t, a)["b"]
		return l["up"] == "1" && l["lag_ms"] == "0", fmt.Sprint(l)
	})
	allow(t, b, false, "k", 100, w, "COST", 41)
	allow(t, b, true, "k", 100, w, "COST", 40)
}

// TestRegionRestoreOwnComponentFromPeer: a region killed with kill -9 and restarted with an
// empty data directory gets its own published count back from a peer, without new traffic.
func TestRegionRestoreOwnComponentFromPeer(t *testing.T) {
	t.Parallel()
	// Each with its own data dir, snapshotting often: B's snapshot holds the count before
	// the test deletes it.
	ps := startRegions(t, []string{"a", "b"}, "--snapshot-interval", "100ms")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	allow(t, b, true, "k", 100, w, "COST", 50)
	allow(t, a, true, "k", 100, w, "COST", 20)
	waitCounts(t, regionPoll, "A to import B's 50", a, "k", w, func(c counts) bool { return c.imported == 50 })
	waitCounts(t, regionPoll, "B to import A's 20", b, "k", w, func(c counts) bool { return c.imported == 20 })

	testwait.Until(t, 5*time.Second, "B to snapshot its cell", func() (bool, string) {
		n := infoInt(t, b, "snapshot_last_cells")
		return n >= 1, fmt.Sprintf("snapshot_last_cells=%d", n)
	})
	pb := ps["b"]
	_ = b.Close()
	pb.Kill()
	entries, err := os.ReadDir(pb.DataDir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("B's data dir %s holds no snapshot to delete (%d entries, %v)", pb.DataDir, len(entries), err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(pb.DataDir, e.Name())); err != nil {
			t.Fatalf("empty B's data dir: %v", err)
		}
	}
	pb.Restart()
	b = pb.client(t, nil)
	began := time.Now()
	c := waitCounts(t, reconnectPoll, "restarted B to get its own 50 back from A", b, "k", w,
		func(c counts) bool { return c.regional == 50 && c.imported == 20 })
	t.Logf("B restored %v after restart: %v", time.Since(began), c)
	if c.used != 70 {
		t.Errorf("B after restore: %v, want used 70", c)
	}
	allow(t, b, false, "k", 100, w, "COST", 31)
	// A still counts B once: its copy of B's row was not raised by the round trip.
	if c := statusCounts(t, a, "k", w); c.regional != 20 || c.imported != 50 {
		t.Errorf("A after B's restore: %v, want regional 20, imported 50", c)
	}
	// B's next growth is published on top of the restored count.
	allow(t, b, true, "k", 100, w, "COST", 30)
	waitCounts(t, regionPoll, "A to import B's 80", a, "k", w, func(c counts) bool { return c.imported == 80 && c.used == 100 })
}

// faultProxy forwards TCP connections to target until it is cut. Cut drops every current
// connection, or (blackhole) keeps them open and silently discards what they carry; while
// cut, new connections are closed at once, or (blackhole) accepted and never answered.
// Heal closes whatever the cut left open and forwards new connections again.
type faultProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex // guards the fields below
	cut       bool
	blackhole bool
	conns     map[net.Conn]bool
	accepted  int
}

// newFaultProxy listens on a free loopback port and forwards to target; t's cleanup closes it.
func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	// A port from freePort, so that no process started by another test is handed it too.
	ln, err := net.Listen("tcp", loopback(freePort(t)))
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

func (p *faultProxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		cut, hole := p.cut, p.blackhole
		if cut && hole {
			p.conns[c] = true // held open, never answered, closed by Heal
		}
		p.mu.Unlock()
		if cut {
			if !hole {
				_ = c.Close()
			}
			continue
		}
		go p.forward(c)
	}
}

func (p *faultProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut && !p.blackhole {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go p.pipe(up, c)
	go p.pipe(c, up)
}

// pipe copies src to dst while not cut (discarding while blackholed), then closes both.
func (p *faultProxy) pipe(dst, src net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if !cut {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut starts a partition: blackhole false drops connections, true stalls them.
func (p *faultProxy) Cut(blackhole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.blackhole = true, blackhole
	if !blackhole {
		p.closeConnsLocked()
	}
}

// Heal ends the partition: connections the cut stalled are closed (their streams lost
// bytes), new ones are forwarded.
func (p *faultProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.closeConnsLocked()
}

func (p *faultProxy) closeConnsLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closeConnsLocked()
	p.mu.Unlock()
}

// TestRegionLinkCutHeals: a link cut between two running regions (both directions through
// fault-injecting proxies) hides each side's counts from the other, shows the peer down,
// and heals by itself: both converge without new traffic.
func TestRegionLinkCutHeals(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name      string
		blackhole bool
	}{{"drop", false}, {"blackhole", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			addrA, addrB := loopback(freePort(t)), loopback(freePort(t))
			toB, toA := newFaultProxy(t, addrB), newFaultProxy(t, addrA)
			pa := start(t, regionArgs("a", addrA, map[string]string{"b": toB.Addr()}, "--data-dir", "")...)
			pb := start(t, regionArgs("b", addrB, map[string]string{"a": toA.Addr()}, "--data-dir", "")...)
			a, b := pa.client(t, nil), pb.client(t, nil)
			waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
			w := regionWindow(t)

			// The link works before the cut.
			allow(t, a, true, "before", 100, w, "COST", 25)
			waitCounts(t, regionPoll, "B to import before the cut", b, "before", w, func(c counts) bool { return c.imported == 25 })

			toB.Cut(mode.blackhole)
			toA.Cut(mode.blackhole)
			cutAt := time.Now()
			allow(t, a, true, "k", 100, w, "COST", 30)
			allow(t, b, true, "k", 100, w, "COST", 20)
			// A blackholed link is noticed when a heartbeat times out (2 s); a dropped one at
			// the next heartbeat.
			testwait.Until(t, 5*time.Second, "A to see peer b down", func() (bool, string) {
				l := peerLines(t, a)["b"]
				return l["up"] == "0", fmt.Sprint(l)
			})
			t.Logf("A saw b down after %v", time.Since(cutAt))
			time.Sleep(5 * 200 * time.Millisecond) // several publish rounds while cut
			if c := statusCounts(t, a, "k", w); c.imported != 0 || c.regional != 30 {
				t.Errorf("A while cut: %v, want regional 30, imported 0", c)
			}
			if c := statusCounts(t, b, "k", w); c.imported != 0 || c.regional != 20 {
				t.Errorf("B while cut: %v, want regional 20, imported 0", c)
			}
			if up := peerField(t, a, "b", "up"); up != "0" {
				t.Errorf("A's peer b up=%s while cut, want 0", up)
			}
			// Imports from before the cut stay.
			if c := statusCounts(t, b, "before", w); c.imported != 25 {
				t.Errorf("B lost an import while cut: %v, want imported 25", c)
			}

			toB.Heal()
			toA.Heal()
			healedAt := time.Now()
			waitCounts(t, reconnectPoll, "A to converge after heal", a, "k", w, func(c counts) bool { return c.imported == 20 && c.used == 50 })
			waitCounts(t, reconnectPoll, "B to converge after heal", b, "k", w, func(c counts) bool { return c.imported == 30 && c.used == 50 })
			t.Logf("converged %v after heal", time.Since(healedAt))
			testwait.Until(t, regionPoll, "A to see peer b up after heal", func() (bool, string) {
				l := peerLines(t, a)["b"]
				return l["up"] == "1", fmt.Sprint(l)
			})
			if c := statusCounts(t, b, "before", w); c.imported != 25 || c.used != 25 {
				t.Errorf("B's earlier import after heal: %v, want imported 25 (not counted twice)", c)
			}
		})
	}
}

// TestRegionForeignSurvivesRestart: imported components are in the snapshot: A, stopped
// cleanly and restarted with its data dir while B is down, still has B's count.
func TestRegionForeignSurvivesRestart(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--snapshot-interval", "1h") // only the final snapshot
	pa, pb := ps["a"], ps["b"]
	a, b := pa.client(t, nil), pb.client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	allow(t, a, true, "k", 100, w, "COST", 30)
	allow(t, b, true, "k", 100, w, "COST", 50)
	waitCounts(t, regionPoll, "A to import B's 50", a, "k", w, func(c counts) bool { return c.imported == 50 })
	_ = a.Close()
	_ = b.Close()
	if code := pa.Stop(); code != 0 {
		t.Fatalf("A's exit code after SIGTERM = %d, want 0", code)
	}
	if code := pb.Stop(); code != 0 {
		t.Fatalf("B's exit code after SIGTERM = %d, want 0", code)
	}
	pa.Restart()
	a = pa.client(t, nil)
	if c := statusCounts(t, a, "k", w); c.regional != 30 || c.imported != 50 || c.used != 80 {
		t.Errorf("A after restart with B down: %v, want regional 30, imported 50, used 80", c)
	}
	allow(t, a, false, "k", 100, w, "COST", 21)
	allow(t, a, true, "k", 100, w, "COST", 20)
	if up := peerField(t, a, "b", "up"); up != "0" {
		t.Errorf("A's peer b up=%s while B is stopped, want 0", up)
	}
}

// TestRegionPeerNeedsClusterSecret: --peer without --cluster-secret (flag or environment)
// is refused at start, naming --cluster-secret.
func TestRegionPeerNeedsClusterSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
	}{
		{"flag", []string{"--region", "a", "--peer", "b=127.0.0.1:1"}, nil},
		{"comma separated", []string{"--region", "a", "--peer", "b=127.0.0.1:1,c=127.0.0.1:2"}, nil},
		{"environment", []string{"--region", "a"}, []string{"RATCHET_PEER=b=127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(tc.args, "--listen", loopback(freePort(t)), "--metrics-listen", "", "--data-dir", "")
			if out := refusedStart(t, tc.env, args...); !strings.Contains(out, "--cluster-secret") {
				t.Errorf("ratchet %v: output does not name --cluster-secret:\n%s", args, out)
			}
		})
	}
}

// TestRegionWrongSecretRefused: a peer with another cluster secret is refused: its
// components are not imported and it shows down.
func TestRegionWrongSecretRefused(t *testing.T) {
	t.Parallel()
	addrA, addrB := loopback(freePort(t)), loopback(freePort(t))
	pa := start(t, regionArgs("a", addrA, map[string]string{"b": addrB}, "--data-dir", "")...)
	pb := start(t, append(regionArgs("b", addrB, map[string]string{"a": addrA}, "--data-dir", ""),
		"--cluster-secret", "another-secret")...)
	a, b := pa.client(t, nil), pb.client(t, nil)
	w := regionWindow(t)
	allow(t, a, true, "k", 100, w, "COST", 60)
	allow(t, b, true, "k", 100, w, "COST", 60)
	time.Sleep(5 * 200 * time.Millisecond)
	for name, c := range map[string]*redis.Client{"a": a, "b": b} {
		if st := statusCounts(t, c, "k", w); st.imported != 0 || st.regional != 60 {
			t.Errorf("%s with a mismatched secret: %v, want regional 60, imported 0", name, st)
		}
		for region, l := range peerLines(t, c) {
			if l["up"] != "0" || l["imported"] != "0" {
				t.Errorf("%s's peer %s with a mismatched secret: %v, want up=0 imported=0", name, region, l)
			}
		}
	}
}

// TestRegionEdgeSeesImported: an edge of region B decides with what B's origin imported
// from A, and what the edge counts reaches A through B.
func TestRegionEdgeSeesImported(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	pe := start(t, "--role", "edge", "--region", "b", "--origin", ps["b"].Addr, "--cluster-secret", regionSecret,
		"--data-dir", "", "--metrics-listen", "", "--max-memory", "32MiB")
	e := pe.client(t, nil)
	w := regionWindow(t)

	allow(t, a, true, "k", 100, w, "COST", 60)
	waitCounts(t, regionPoll, "B's edge to see A's 60 through its origin", e, "k", w, func(c counts) bool { return c.imported == 60 })
	allow(t, e, false, "k", 100, w, "COST", 41)
	allow(t, e, true, "k", 100, w, "COST", 40)
	waitCounts(t, regionPoll, "B's origin to hold the edge's 40", b, "k", w, func(c counts) bool { return c.regional == 40 && c.imported == 60 })
	waitCounts(t, regionPoll, "A to import the edge's 40 from B", a, "k", w, func(c counts) bool { return c.imported == 40 && c.used == 100 })
}

// TestRegionSIGTERMFlushesPublications: SIGTERM publishes what is due before exiting, even
// when the next publication round is far away.
func TestRegionSIGTERMFlushesPublications(t *testing.T) {
	t.Parallel()
	addrA, addrB := loopback(freePort(t)), loopback(freePort(t))
	// A publishes only at exit (its interval is an hour); B is ordinary.
	pa := start(t, append(regionArgs("a", addrA, map[string]string{"b": addrB}, "--data-dir", ""), "--publish-interval", "1h")...)
	pb := start(t, regionArgs("b", addrB, map[string]string{"a": addrA}, "--data-dir", "")...)
	a, b := pa.client(t, nil), pb.client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)
	allow(t, a, true, "k", 100, w, "COST", 60)
	time.Sleep(3 * 200 * time.Millisecond)
	if c := statusCounts(t, b, "k", w); c.imported != 0 {
		t.Fatalf("B imported before A's first publication round: %v", c)
	}
	_ = a.Close()
	if code := pa.Stop(); code != 0 {
		t.Fatalf("A's exit code after SIGTERM = %d, want 0", code)
	}
	if c := statusCounts(t, b, "k", w); c.imported != 60 {
		t.Errorf("B after A's SIGTERM: %v, want imported 60 (publications flushed at exit)", c)
	}
}

// TestRegionPreviousCellImported: a count that reaches a peer only after its cell ended (the
// link was cut until the rollover) still arrives, by anti-entropy, as the peer's previous
// cell, and weighs on its decisions.
func TestRegionPreviousCellImported(t *testing.T) {
	t.Parallel()
	addrA, addrB := loopback(freePort(t)), loopback(freePort(t))
	toB := newFaultProxy(t, addrB)
	pa := start(t, regionArgs("a", addrA, map[string]string{"b": toB.Addr()}, "--data-dir", "")...)
	pb := start(t, regionArgs("b", addrB, map[string]string{"a": addrA}, "--data-dir", "")...)
	a, b := pa.client(t, nil), pb.client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	const w, wMs = "4s", 4000
	// Late in a cell, with time to count before it ends.
	for {
		if e := time.Now().UnixMilli() % wMs; e >= 2800 && e <= 3300 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	toB.Cut(false)
	allow(t, a, true, "k", 100, w, "COST", 60)
	st, _ := status(t, a, "k", w)
	seq := statusInt(t, st, "sequence")
	if statusInt(t, st, "current_regional") != 60 {
		t.Fatalf("A's count not in its current cell: %v", st)
	}
	time.Sleep(time.Duration((seq+1)*wMs-time.Now().UnixMilli()+50) * time.Millisecond)
	if c := statusCounts(t, b, "k", w); c.imported != 0 {
		t.Fatalf("B imported through a cut link: %v", c)
	}
	st, _ = status(t, b, "k", w)
	if got := statusInt(t, st, "sequence"); got != seq+1 || statusInt(t, st, "previous_imported") != 0 {
		t.Fatalf("B before heal: %v, want sequence %d and nothing imported", st, seq+1)
	}
	toB.Heal()
	testwait.Until(t, 3*time.Second, "B to import A's 60 as its previous cell", func() (bool, string) {
		st, _ = status(t, b, "k", w)
		return statusInt(t, st, "previous_imported") == 60, fmt.Sprint(st)
	})
	if got := statusInt(t, st, "sequence"); got != seq+1 {
		t.Fatalf("B's cell rolled again before the import (sequence %d, want %d): %v", got, seq+1, st)
	}
	if cur, u := statusInt(t, st, "current_imported"), statusInt(t, st, "used"); cur != 0 || u <= 0 {
		t.Errorf("B after heal: current_imported=%d used=%d, want 0 and the decayed previous cell (> 0): %v", cur, u, st)
	}
	// A decision on B weighs the previous cell: with used u (decaying by about one every
	// 67 ms), a cost of 105-u cannot fit now; it would if the import were ignored.
	if u := statusInt(t, st, "used"); u >= 5 {
		if r := limitReply(t, b, "k", 100, w, "COST", 105-u); r[0] != 0 {
			t.Errorf("B admitted cost %d with used %d from A's previous cell: %v", 105-u, u, r)
		}
	}
}
