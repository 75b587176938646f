package commands

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ratchet/ratchet/resp"
)

// Pub/sub on one node, as Redis 7.0 answers it: SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE,
// PUNSUBSCRIBE, PUBLISH and PUBSUB CHANNELS/NUMSUB/NUMPAT. Channels belong to the
// publisher's workspace: tenants never hear each other. A message reaches a subscriber
// through its connection's outbox (server.Conn.Push), written by the connection's owner
// between replies; a subscriber that does not read is cut at the server's bound
// (--pubsub-output-limit). A RESP2 connection with subscriptions accepts only what Redis
// accepts there, and answers PING as Redis does in that mode. An edge refuses pub/sub: its
// channels would be the origin's, and a subscription needs a long-lived connection to it,
// which an edge does not keep.
//
// Concurrency: pubsub.mu guards the channel and pattern tables. A Session's own sets of
// subscriptions are its goroutine's (subState); their counts are atomic, for CLIENT LIST
// and for invalidations redirected to a subscriber (tracking.go). Lock order: pubsub.mu,
// then a connection's outbox.

// maxSubscriptions bounds the channels and patterns one connection subscribes to.
const maxSubscriptions = 100_000

const (
	errTooManySubs = "ERR too many subscriptions on this connection (at most 100000 channels and patterns)"
	errSubContext  = "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
)

// errPubSubOnEdge refuses a pub/sub command on an edge.
func errPubSubOnEdge(name string) string {
	return "ERR " + strings.ToUpper(name) + " is served by the origin only: pub/sub channels are the origin's, and an edge " +
		"keeps no long-lived connection to it for subscriptions; connect to the origin"
}

// pubsub is one node's subscriptions, per workspace.
type pubsub struct {
	mu     sync.RWMutex
	spaces map[string]*psSpace // by workspace
}

// psSpace is one workspace's channels and patterns, each with its subscribers.
type psSpace struct {
	channels map[string]map[*Session]struct{}
	patterns map[string]map[*Session]struct{}
}

// subState is one connection's subscriptions; owned by its goroutine.
type subState struct {
	channels map[string]struct{}
	patterns map[string]struct{}
}

// subscribed reports whether s has any subscription (Redis's CLIENT_PUBSUB). Any
// goroutine may ask.
func (s *Session) subscribed() bool { return s.nSub.Load()+s.nPSub.Load() > 0 }

// pubsubCommands are the command table's rows of pub/sub.
func pubsubCommands() []*Command {
	ch := ArgDoc{Name: "channel", Type: "string"}
	pat := ArgDoc{Name: "pattern", Type: "pattern"}
	opt := func(a ArgDoc) ArgDoc { a.Optional = true; return a }
	return []*Command{
		{Name: "subscribe", Arity: -2, Group: "pubsub", Summary: "Listens for messages published to channels.",
			Args: []ArgDoc{ch}, Handler: cmdSubscribe(false)},
		{Name: "psubscribe", Arity: -2, Group: "pubsub", Summary: "Listens for messages published to channels that match patterns.",
			Args: []ArgDoc{pat}, Handler: cmdSubscribe(true)},
		{Name: "unsubscribe", Arity: -1, Group: "pubsub", Summary: "Stops listening to messages posted to channels.",
			Args: []ArgDoc{opt(ch)}, Handler: cmdUnsubscribe(false)},
		{Name: "punsubscribe", Arity: -1, Group: "pubsub", Summary: "Stops listening to messages published to channels that match patterns.",
			Args: []ArgDoc{opt(pat)}, Handler: cmdUnsubscribe(true)},
		{Name: "publish", Arity: 3, Flags: flagFast, Group: "pubsub", Summary: "Posts a message to a channel.",
			Args: []ArgDoc{ch, {Name: "message", Type: "string"}}, Handler: cmdPublish},
		{Name: "pubsub", Arity: -2, Group: "pubsub", Summary: "PUBSUB CHANNELS, NUMSUB, NUMPAT.",
			Args: []ArgDoc{{Name: "subcommand", Type: "string"}}, Handler: cmdPubsub},
	}
}

// subKind names a subscription reply: "subscribe", "psubscribe", "unsubscribe", ...
func subKind(pattern bool, verb string) string {
	if pattern {
		return "p" + verb
	}
	return verb
}

// subCount returns s's subscriptions, channels and patterns together, as Redis counts them.
func (s *Session) subCount() int64 { return int64(s.nSub.Load() + s.nPSub.Load()) }

func cmdSubscribe(pattern bool) func(*Dispatcher, *Session, *resp.Writer, [][]byte) {
	kind := subKind(pattern, "subscribe")
	return func(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
		if d.kv() == nil {
			w.Error(errPubSubOnEdge(kind))
			return
		}
		if s.subs == nil {
			s.subs = &subState{channels: map[string]struct{}{}, patterns: map[string]struct{}{}}
		}
		for _, a := range args[1:] {
			if _, ok := s.subs.set(pattern)[string(a)]; !ok {
				if s.subCount() >= maxSubscriptions {
					w.Error(errTooManySubs)
					return
				}
				d.pubsub.add(s, string(a), pattern)
			}
			w.Push(3)
			w.BulkString(kind)
			w.Bulk(a)
			w.Int(s.subCount())
		}
	}
}

// set returns the channels, or the patterns.
func (st *subState) set(pattern bool) map[string]struct{} {
	if pattern {
		return st.patterns
	}
	return st.channels
}

func cmdUnsubscribe(pattern bool) func(*Dispatcher, *Session, *resp.Writer, [][]byte) {
	kind := subKind(pattern, "unsubscribe")
	return func(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
		if d.kv() == nil {
			w.Error(errPubSubOnEdge(kind))
			return
		}
		names := args[1:]
		if len(names) == 0 { // all of them, in order of name (Redis: its table's order)
			if s.subs != nil {
				for _, n := range sortedKeys(s.subs.set(pattern)) {
					names = append(names, []byte(n))
				}
			}
			if len(names) == 0 {
				w.Push(3)
				w.BulkString(kind)
				w.Null()
				w.Int(s.subCount())
				return
			}
		}
		for _, a := range names {
			if s.subs != nil {
				if _, ok := s.subs.set(pattern)[string(a)]; ok {
					d.pubsub.remove(s, string(a), pattern)
				}
			}
			w.Push(3)
			w.BulkString(kind)
			w.Bulk(a)
			w.Int(s.subCount())
		}
	}
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// add subscribes s to name (a channel, or a pattern).
func (p *pubsub) add(s *Session, name string, pattern bool) {
	p.mu.Lock()
	sp := p.spaces[s.Workspace]
	if sp == nil {
		sp = &psSpace{channels: map[string]map[*Session]struct{}{}, patterns: map[string]map[*Session]struct{}{}}
		p.spaces[s.Workspace] = sp
	}
	tbl := sp.table(pattern)
	subs := tbl[name]
	if subs == nil {
		subs = map[*Session]struct{}{}
		tbl[name] = subs
	}
	subs[s] = struct{}{}
	p.mu.Unlock()
	s.subs.set(pattern)[name] = struct{}{}
	if pattern {
		s.nPSub.Add(1)
	} else {
		s.nSub.Add(1)
	}
}

// remove unsubscribes s from name.
func (p *pubsub) remove(s *Session, name string, pattern bool) {
	p.mu.Lock()
	if sp := p.spaces[s.Workspace]; sp != nil {
		tbl := sp.table(pattern)
		if subs := tbl[name]; subs != nil {
			delete(subs, s)
			if len(subs) == 0 {
				delete(tbl, name)
			}
		}
		if len(sp.channels) == 0 && len(sp.patterns) == 0 {
			delete(p.spaces, s.Workspace)
		}
	}
	p.mu.Unlock()
	delete(s.subs.set(pattern), name)
	if pattern {
		s.nPSub.Add(-1)
	} else {
		s.nSub.Add(-1)
	}
}

func (sp *psSpace) table(pattern bool) map[string]map[*Session]struct{} {
	if pattern {
		return sp.patterns
	}
	return sp.channels
}

// unsubscribeAll drops every subscription of s (its connection closed).
func (p *pubsub) unsubscribeAll(s *Session) {
	if s.subs == nil {
		return
	}
	for _, pattern := range []bool{false, true} {
		for name := range s.subs.set(pattern) {
			p.remove(s, name, pattern)
		}
	}
}

// cmdPublish delivers a message to the channel's subscribers and to those of matching
// patterns, and answers how many received it. A RESP3 publisher subscribed to the
// channel gets its own message before the reply, as from Redis.
func cmdPublish(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if d.kv() == nil {
		w.Error(errPubSubOnEdge("publish"))
		return
	}
	w.Int(d.publish(s, w, s.Workspace, args[1], args[2]))
}

// publish sends msg on channel ch of workspace ws and returns its receivers. from (with
// its reply writer w) is the publishing connection, which is written to directly; nil
// when no connection publishes.
func (d *Dispatcher) publish(from *Session, w *resp.Writer, ws string, ch, msg []byte) int64 {
	p := &d.pubsub
	p.mu.RLock()
	defer p.mu.RUnlock()
	sp := p.spaces[ws]
	if sp == nil {
		return 0
	}
	var n int64
	var enc [2][]byte // the message in RESP2 and RESP3, made once
	for sub := range sp.channels[string(ch)] {
		n++
		deliver(from, w, sub, &enc, func(b []byte, proto int) []byte {
			return appendMessage(b, proto, nil, ch, msg)
		})
	}
	for pat, subs := range sp.patterns {
		if !globMatch([]byte(pat), ch) {
			continue
		}
		var penc [2][]byte
		for sub := range subs {
			n++
			deliver(from, w, sub, &penc, func(b []byte, proto int) []byte {
				return appendMessage(b, proto, []byte(pat), ch, msg)
			})
		}
	}
	return n
}

// deliver sends a message to sub, encoded by enc in sub's protocol (cached in cache):
// into w when sub is the publishing connection itself, else through its outbox.
func deliver(from *Session, w *resp.Writer, sub *Session, cache *[2][]byte, enc func([]byte, int) []byte) {
	proto := sub.Proto()
	i := 0
	if proto == 3 {
		i = 1
	}
	if cache[i] == nil {
		cache[i] = enc(nil, proto)
	}
	if sub == from {
		w.Raw(cache[i])
		return
	}
	sub.Push(cache[i])
}

// appendMessage appends a pub/sub message: "message" (pattern nil) or "pmessage".
func appendMessage(b []byte, proto int, pattern, ch, msg []byte) []byte {
	n := 3
	if pattern != nil {
		n = 4
	}
	b = appendPushHeader(b, proto, n)
	if pattern != nil {
		b = resp.AppendBulkString(b, "pmessage")
		b = resp.AppendBulk(b, pattern)
	} else {
		b = resp.AppendBulkString(b, "message")
	}
	b = resp.AppendBulk(b, ch)
	return resp.AppendBulk(b, msg)
}

// appendPushHeader appends the header of an out-of-band message of n elements: a RESP3
// push, a RESP2 array.
func appendPushHeader(b []byte, proto, n int) []byte { return appendAggregate(b, proto, '>', n) }

// appendAggregate appends the header of an aggregate of n elements: of RESP3 type c
// ('>' push, '~' set) in RESP3, an array in RESP2.
func appendAggregate(b []byte, proto int, c byte, n int) []byte {
	if proto != 3 {
		c = '*'
	}
	b = append(b, c)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// cmdPubsub serves PUBSUB CHANNELS [pattern], NUMSUB [channel ...], NUMPAT and HELP, over
// the connection's workspace.
func cmdPubsub(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "channels" && len(args) <= 3, sub == "numsub", sub == "numpat" && len(args) == 2:
	case sub == "help" && len(args) == 2:
		lines := []string{"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CHANNELS [<pattern>]", "    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT", "    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]", "    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).",
			"HELP", "    Prints this help."}
		w.Array(len(lines))
		for _, l := range lines {
			w.Simple(l)
		}
		return
	case sub == "channels" || sub == "numpat" || sub == "help":
		w.Error("ERR wrong number of arguments for 'pubsub|" + sub + "' command")
		return
	default:
		w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try PUBSUB HELP.")
		return
	}
	if d.kv() == nil {
		w.Error(errPubSubOnEdge("pubsub"))
		return
	}
	p := &d.pubsub
	p.mu.RLock()
	defer p.mu.RUnlock()
	sp := p.spaces[s.Workspace]
	if sp == nil {
		sp = &psSpace{}
	}
	switch sub {
	case "channels":
		var out []string
		for ch := range sp.channels {
			if len(args) == 2 || globMatch(args[2], []byte(ch)) {
				out = append(out, ch)
			}
		}
		sort.Strings(out)
		w.Array(len(out))
		for _, ch := range out {
			w.BulkString(ch)
		}
	case "numsub":
		w.Array(2 * (len(args) - 2)) // an array in RESP3 too, as Redis answers
		for _, ch := range args[2:] {
			w.Bulk(ch)
			w.Int(int64(len(sp.channels[string(ch)])))
		}
	case "numpat":
		w.Int(int64(len(sp.patterns)))
	}
}

// subscribedRefused answers Redis's error to a command a RESP2 connection with
// subscriptions may not run, and reports whether it did.
func subscribedRefused(s *Session, w *resp.Writer, cmd *Command, args [][]byte) bool {
	if w.Proto() != 2 || !s.subscribed() {
		return false
	}
	switch cmd.Name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ping", "quit", "reset":
		return false
	}
	name := cmd.Name
	if cmd.aclSubs != nil && len(args) > 1 { // a container: Redis names the subcommand
		sub := strings.ToLower(string(args[1]))
		if _, ok := cmd.aclSubs[sub]; !ok {
			return false // unknown: its handler answers that first, as Redis's lookup does
		}
		name += "|" + sub
	}
	w.Error("ERR Can't execute '" + name + errSubContext)
	return true
}

// channelsAllowed reports whether u may use the channels of a request to cmd, as Redis 7's
// ACL checks them: PUBLISH's channel and SUBSCRIBE's must match one of u's &patterns,
// PSUBSCRIBE's patterns must be one of them literally; unsubscribing is always allowed.
func (u *aclUser) channelsAllowed(cmd *Command, args [][]byte) bool {
	if u.allChans {
		return true
	}
	var chans [][]byte
	literal := false
	switch cmd.Name {
	case "publish":
		chans = args[1:2]
	case "subscribe":
		chans = args[1:]
	case "psubscribe":
		chans, literal = args[1:], true
	}
	for _, ch := range chans {
		ok := false
		for _, p := range u.chans {
			if literal && p == string(ch) || !literal && globMatch([]byte(p), ch) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// psCounts are INFO's pub/sub figures: channels and patterns with a subscriber.
type psCounts struct{ channels, patterns int }

func (p *pubsub) counts() psCounts {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var c psCounts
	for _, sp := range p.spaces {
		c.channels += len(sp.channels)
		c.patterns += len(sp.patterns)
	}
	return c
}
