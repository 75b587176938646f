package commands

import (
	"container/list"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ratchet/ratchet/ratelog"
)

// Failed authentication is throttled, per connection, per source address (the IP without
// its port) and for the whole server, separately for client passwords (AUTH, HELLO AUTH)
// and for the cluster secret (RL.INTERNAL.HELLO). The rule: a wrong guess never stops the
// right secret. Every attempt is checked (in constant time), and a right one is accepted
// whatever failed before from the same connection or address; the throttle acts on wrong
// ones only:
//
//   - the first authFreeFailures failures of a connection, authFreeAddrFailures of an
//     address (several clients may share one) and authFreeAllFailures of the server (a
//     botnet of addresses) are counted in AuthStats.Failures and answered WRONGPASS;
//   - each further failure puts that connection, address or the server over budget for a
//     backoff, authBackoffMin doubling up to authBackoffMax. A wrong attempt made while
//     over budget gets the same WRONGPASS reply (it tells an attacker nothing), counts in
//     AuthStats.Throttled, and closes its connection: a guesser then pays a new
//     connection for each guess and cannot pipeline them;
//   - a success resets the connection's count; an address's or the server's count is
//     forgotten after authForget without a failure. At most authAddrs addresses are
//     remembered per kind, the least recently failed forgotten first.
//
// Nothing sleeps: handlers may run on an event loop shared by many connections. Failures
// are logged at most once per 10 s per kind, with the number not logged, and never with
// the password.

const (
	authFreeFailures     = 5
	authFreeAddrFailures = 20
	authFreeAllFailures  = 1000
	authBackoffMin       = 100 * time.Millisecond
	authBackoffMax       = 10 * time.Second
	authForget           = time.Minute
	authAddrs            = 4096
)

// failState counts one connection's or one address's consecutive failures.
type failState struct {
	fails        int
	lastMs       int64 // the last failure
	blockedUntil int64 // ms; wrong attempts before it are over budget
}

func (f *failState) blocked(nowMs int64) bool { return nowMs < f.blockedUntil }

// fail records a failure at nowMs, forgetting the count when forget ms passed without one
// (0: never); past free failures it puts further wrong attempts over budget for a backoff.
func (f *failState) fail(nowMs, forget int64, free int) {
	if forget > 0 && nowMs-f.lastMs > forget {
		f.fails = 0
	}
	f.fails++
	f.lastMs = nowMs
	if over := f.fails - free; over >= 0 {
		backoff := authBackoffMax
		if over < 8 { // 100 ms << 7 is past the cap already
			backoff = min(authBackoffMin<<over, authBackoffMax)
		}
		f.blockedUntil = nowMs + backoff.Milliseconds()
	}
}

// authThrottle is the per-address state of one kind of secret.
type authThrottle struct {
	kind string // for the log: "password" or "cluster secret"
	log  *ratelog.Limiter

	mu    sync.Mutex
	all   failState                // the server's failures, every address together
	addrs map[string]*list.Element // of *addrFails
	lru   list.List                // most recently failed in front
}

type addrFails struct {
	addr string
	failState
}

func newAuthThrottle(kind string) *authThrottle {
	return &authThrottle{kind: kind, log: ratelog.New(10 * time.Second), addrs: make(map[string]*list.Element)}
}

// blocked reports whether wrong attempts from addr are over budget at nowMs: addr's, or
// every address's together.
func (t *authThrottle) blocked(addr string, nowMs int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all.blocked(nowMs) {
		return true
	}
	e := t.addrs[addr]
	return e != nil && e.Value.(*addrFails).blocked(nowMs)
}

// fail records a failure from addr at nowMs and returns the address's count.
func (t *authThrottle) fail(addr string, nowMs int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.addrs[addr]
	if e == nil {
		if t.lru.Len() >= authAddrs {
			old := t.lru.Back()
			delete(t.addrs, old.Value.(*addrFails).addr)
			t.lru.Remove(old)
		}
		e = t.lru.PushFront(&addrFails{addr: addr})
		t.addrs[addr] = e
	} else {
		t.lru.MoveToFront(e)
	}
	a := e.Value.(*addrFails)
	a.fail(nowMs, authForget.Milliseconds(), authFreeAddrFailures)
	t.all.fail(nowMs, authForget.Milliseconds(), authFreeAllFailures)
	return a.fails
}

// hostOf is addr without its port ("127.0.0.1:5000" -> "127.0.0.1"); addr itself when it
// has none.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// authFailed records a wrong secret of kind t from s, and logs it rate-limited. Over
// budget, the attempt counts as throttled instead and s is closed after its reply (the
// caller answers WRONGPASS either way).
func (d *Dispatcher) authFailed(s *Session, t *authThrottle) {
	now := d.now()
	nowMs := now.UnixMilli()
	host := hostOf(s.Addr)
	if s.authFail.blocked(nowMs) || t.blocked(host, nowMs) {
		d.authThrottled.Add(1)
		s.Quit = true
		return
	}
	s.authFail.fail(nowMs, 0, authFreeFailures)
	n := t.fail(host, nowMs)
	total := d.authFailures.Add(1)
	if ok, suppressed := t.log.Allow(now); ok {
		d.logger().Warn("authentication failed", "secret", t.kind, "remote", host, "address_failures", n,
			"failures_total", total, "throttled_total", d.authThrottled.Load(), "suppressed", suppressed)
	}
}

// authSucceeded resets the connection's failures.
func (d *Dispatcher) authSucceeded(s *Session) { s.authFail = failState{} }

func (d *Dispatcher) logger() *slog.Logger {
	if d.opt.Logger != nil {
		return d.opt.Logger
	}
	return slog.Default()
}
