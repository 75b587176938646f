package commands

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

// Session is one client connection's state as the commands see it. The server creates it
// and owns its goroutine; only that goroutine calls Dispatcher.Serve with it. CLIENT LIST
// reads other sessions from other goroutines, so the fields it shows that can change are
// guarded by mu or atomic.
type Session struct {
	*server.Conn // ID, addresses, and the flags the server reads and sets
	CreatedMs    int64
	d            *Dispatcher // serves the connection's requests; nil for a session made by NewSession

	// Owned by the connection's goroutine (or event loop).
	Authed     bool
	Workspace  string
	cluster    bool      // authenticated with the cluster secret (RL.INTERNAL.HELLO)
	nodeRun    string    // the peer node's run id, from RL.INTERNAL.HELLO
	peerRegion string    // set when that node is another region's origin
	nsSeen     [4]string // the last namespaces named by NS, reused so NS costs no allocation
	nsNext     uint8     // the nsSeen slot to replace next
	statTick   uint32    // requests begun, for the timed sample (cmdstats.go)

	lastMs  atomic.Int64            // ms of the last request batch
	lastCmd atomic.Pointer[Command] // the last command served
	txLen   atomic.Int32            // commands queued + 1 inside MULTI; 0 outside (CLIENT LIST)

	mu       sync.Mutex // guards the fields below
	name     string
	libName  string
	libVer   string
	proto    int
	userName string // the user logged in ("": default), for CLIENT LIST and ACL WHOAMI

	// Owned by the connection's goroutine, like Authed.
	user     *aclUser        // the ACL user logged in; nil: every permission (no --aclfile, or a node)
	aclState *aclState       // the users user was found among; another after ACL LOAD (acl.go)
	authFail failState       // consecutive failed AUTH/HELLO AUTH/RL.INTERNAL.HELLO (auth.go)
	tx       *txQueue        // the open transaction; nil outside MULTI
	txAcct   *txAccount      // this session's share of the queued-bytes budget; nil before MULTI
	fwd      *forwardState   // a cluster connection's RL.INTERNAL.FORWARD state (forward.go)
	watch    *keyspace.Watch // WATCH's keys; nil before the first WATCH (multi.go)

	// Pub/sub and tracking (pubsub.go, tracking.go). subs, caching and selfPush are the
	// connection's goroutine's; the rest are read by others.
	subs        *subState                  // subscriptions; nil before the first
	nSub, nPSub atomic.Int32               // channels and patterns subscribed
	track       atomic.Pointer[trackState] // tracking options; nil: off
	trackBroken atomic.Bool                // REDIRECT's connection has gone
	caching     bool                       // CLIENT CACHING given for the next command
	selfPush    []byte                     // invalidations of the command's own writes, after its reply
}

// NewSession returns the state of a new connection, unauthenticated, in RESP2 and in
// the default workspace.
func NewSession(id int64, addr, localAddr string, nowMs int64) *Session {
	return newSession(&server.Conn{ID: id, Addr: addr, LocalAddr: localAddr}, nowMs)
}

func newSession(c *server.Conn, nowMs int64) *Session {
	s := &Session{Conn: c, CreatedMs: nowMs, Workspace: "default", proto: 2}
	s.lastMs.Store(nowMs)
	return s
}

// Serve serves one request of the connection, appending its reply to w (server.Session).
func (s *Session) Serve(w *resp.Writer, args [][]byte) { s.d.Serve(s, w, args) }

// namespace returns the namespace named by ns (nil: DefaultNamespace) as a string. A
// connection sends the same few namespaces again and again: they are converted once and
// reused, so a request with NS does not allocate. The strings are ordinary immutable
// copies, so whatever the Limiter does with a Tuple's Namespace is safe.
func (s *Session) namespace(ns []byte) string {
	if ns == nil || string(ns) == DefaultNamespace {
		return DefaultNamespace
	}
	for _, seen := range s.nsSeen {
		if string(ns) == seen {
			return seen
		}
	}
	str := string(ns)
	s.nsSeen[s.nsNext%uint8(len(s.nsSeen))] = str
	s.nsNext++
	return str
}

// tuple is the engine's tuple of a request's key, namespace (nil: the default) and window
// in the session's workspace.
func (s *Session) tuple(key, ns []byte, windowMs int64) engine.Tuple {
	return engine.Tuple{Workspace: s.Workspace, Namespace: s.namespace(ns), Key: key, WindowMs: windowMs}
}

// ctx is the context of the session's requests, which reaches every call that may
// wait (an edge's calls to its origin): the connection's (server.Conn.Context).
func (s *Session) ctx() context.Context { return s.Conn.Context() }

// Touch records activity at nowMs, for CLIENT LIST's idle field.
func (s *Session) Touch(nowMs int64) { s.lastMs.Store(nowMs) }

// Closing reports whether the client asked to close the connection (QUIT). The server
// writes the pending replies, then closes.
func (s *Session) Closing() bool { return s.Quit }

// Internal reports whether the connection authenticated with the cluster secret (an edge
// or a peer region's origin). Like Redis's replicas, such connections are never closed
// for being idle.
func (s *Session) Internal() bool { return s.cluster }

func (s *Session) setName(n string) {
	s.mu.Lock()
	s.name = n
	s.mu.Unlock()
}

func (s *Session) getName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// ClientLine is the session as one line of CLIENT LIST, in Redis's field order for the
// fields that apply.
func (s *Session) ClientLine(nowMs int64) string {
	s.mu.Lock()
	name, lib, ver, proto, user := s.name, s.libName, s.libVer, s.proto, s.userName
	s.mu.Unlock()
	if user == "" {
		user = "default"
	}
	cmd := "NULL"
	if c := s.lastCmd.Load(); c != nil {
		cmd = c.Name
	}
	var b strings.Builder
	b.WriteString("id=")
	b.WriteString(strconv.FormatInt(s.ID, 10))
	b.WriteString(" addr=" + s.Addr + " laddr=" + s.LocalAddr + " name=" + name)
	b.WriteString(" age=" + strconv.FormatInt((nowMs-s.CreatedMs)/1000, 10))
	b.WriteString(" idle=" + strconv.FormatInt((nowMs-s.lastMs.Load())/1000, 10))
	b.WriteString(" flags=" + s.clientFlags() + " db=0 sub=" + strconv.Itoa(int(s.nSub.Load())) +
		" psub=" + strconv.Itoa(int(s.nPSub.Load())) + " ssub=0 multi=" + s.multiField() + " resp=" + strconv.Itoa(proto))
	b.WriteString(" lib-name=" + lib + " lib-ver=" + ver + " cmd=" + cmd + " user=" + user)
	return b.String()
}

// clientFlags are CLIENT LIST's flags, in Redis's order: P (subscribed), x (MULTI), t
// (tracking), R (its redirect has gone), B (BCAST); N for none.
func (s *Session) clientFlags() string {
	var f []byte
	if s.subscribed() {
		f = append(f, 'P')
	}
	if s.txLen.Load() > 0 {
		f = append(f, 'x')
	}
	if ts := s.track.Load(); ts != nil {
		f = append(f, 't')
		if s.trackBroken.Load() {
			f = append(f, 'R')
		}
		if ts.bcast {
			f = append(f, 'B')
		}
	}
	if len(f) == 0 {
		return "N"
	}
	return string(f)
}

// Proto returns the protocol the connection speaks: 2, or 3 after HELLO 3.
func (s *Session) Proto() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proto
}
