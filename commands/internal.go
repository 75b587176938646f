package commands

import (
	"crypto/subtle"
	"errors"
	"math"
	"strings"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// The RL.INTERNAL.* commands serve edges (docs/internal-protocol.md). They are refused
// until the connection has sent RL.INTERNAL.HELLO with the cluster secret, and on a node
// that is not an origin.

var (
	errClusterAuth = errors.New("NOAUTH cluster authentication required")
	errNotOrigin   = errors.New("ERR this node is not an origin")
	errBadKey      = errors.New("ERR internal: malformed tuple key")
	errBadInt      = errors.New("ERR internal: malformed integer")
)

func internalCommands() []*Command {
	return []*Command{
		{Name: "rl.internal.hello", Arity: 3, Flags: flagNoAuth | flagFast, Group: "ratchet",
			Summary: "Authenticates a node-to-node connection with the cluster secret.", Handler: cmdInternalHello},
		{Name: "rl.internal.read", Arity: -1, Flags: flagReadonly, Group: "ratchet",
			Summary: "Reads cells for an edge.", Handler: cmdInternalRead},
		{Name: "rl.internal.replay", Arity: -6, Flags: flagWrite, Group: "ratchet",
			Summary: "Applies a batch of an edge's accepted cost, once.", Handler: cmdInternalReplay},
		{Name: "rl.internal.publish", Arity: -5, Flags: flagWrite, Group: "ratchet",
			Summary: "Merges G-Counter components from another region's origin.", Handler: cmdInternalPublish},
		{Name: "rl.internal.decide", Arity: 7, Flags: flagWrite, Group: "ratchet",
			Summary: "Decides a request handed over by an edge.", Handler: cmdInternalDecide},
		{Name: "rl.internal.forward", Arity: -5, Flags: flagWrite, Group: "ratchet",
			Summary: "Runs counter, CL.THROTTLE and script commands for an edge's client.", Handler: cmdInternalForward},
	}
}

func cmdInternalHello(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	secret := d.opt.ClusterSecret
	if d.authRefused(s, d.clusterAuth) {
		w.Error("WRONGPASS invalid cluster secret")
		return
	}
	if secret == "" || subtle.ConstantTimeCompare(args[1], []byte(secret)) != 1 {
		d.authFailed(s, d.clusterAuth)
		w.Error("WRONGPASS invalid cluster secret")
		return
	}
	d.authSucceeded(s)
	s.cluster, s.Authed = true, true
	s.nodeRun = string(args[2])
	if region, ok := strings.CutPrefix(s.nodeRun, "peer:"); ok {
		s.peerRegion = region // another region's origin, not an edge of ours
	} else if d.opt.Origin != nil {
		d.opt.Origin.Heard(s.nodeRun)
	}
	w.OK()
}

// internalReady reports whether the connection may use internal commands, answering the
// error when not.
func internalReady(d *Dispatcher, s *Session, w *resp.Writer) bool {
	switch {
	case !s.cluster:
		w.Error(errClusterAuth.Error())
	case d.opt.Origin == nil:
		w.Error(errNotOrigin.Error())
	default:
		return true
	}
	return false
}

func parseKey(b []byte) ([]byte, bool) {
	_, err := engine.ParseKey(b)
	return b, err == nil
}

// parseInt reads a strict non-negative integer, as client arguments are read.
func parseInt(b []byte) (int64, bool) {
	n, ok := parseUint(b, math.MaxInt64)
	return int64(n), ok
}

func writeCounts(w *resp.Writer, meta engine.OriginMeta, counts []engine.CellCounts) {
	w.Array(2 + 5*len(counts))
	writeMeta(w, meta)
	for _, c := range counts {
		writeCellCounts(w, c)
	}
}

func writeMeta(w *resp.Writer, meta engine.OriginMeta) {
	w.Int(int64(meta.Edges))
	w.Int(clampInt(meta.Applied))
}

func writeCellCounts(w *resp.Writer, c engine.CellCounts) {
	w.Int(c.Seq)
	w.Int(clampInt(c.CurRegional))
	w.Int(clampInt(c.CurImported))
	w.Int(clampInt(c.PrevRegional))
	w.Int(clampInt(c.PrevImported))
}

func clampInt(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// cmdInternalRead serves RL.INTERNAL.READ key seq [key seq ...].
func cmdInternalRead(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	rest := args[1:]
	if len(rest)%2 != 0 {
		w.Error(errSyntax.Error())
		return
	}
	items := make([]engine.ReadItem, 0, len(rest)/2)
	for i := 0; i < len(rest); i += 2 {
		key, ok1 := parseKey(rest[i])
		seq, ok2 := parseInt(rest[i+1])
		if !ok1 || !ok2 {
			w.Error(errBadKey.Error())
			return
		}
		items = append(items, engine.ReadItem{Key: key, Seq: seq})
	}
	counts, meta := d.opt.Origin.ServeRead(s.nodeRun, items)
	writeCounts(w, meta, counts)
}

// cmdInternalReplay serves RL.INTERNAL.REPLAY batch-id key seq cost limit [...].
func cmdInternalReplay(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	id, ok := parseInt(args[1])
	rest := args[2:]
	if !ok || len(rest)%4 != 0 {
		w.Error(errSyntax.Error())
		return
	}
	b := engine.ReplayBatch{Node: s.nodeRun, ID: uint64(id), Items: make([]engine.ReplayItem, 0, len(rest)/4)}
	for i := 0; i < len(rest); i += 4 {
		key, ok1 := parseKey(rest[i])
		seq, ok2 := parseInt(rest[i+1])
		cost, ok3 := parseInt(rest[i+2])
		limit, ok4 := parseInt(rest[i+3])
		if !ok1 {
			w.Error(errBadKey.Error())
			return
		}
		if !ok2 || !ok3 || !ok4 {
			w.Error(errBadInt.Error())
			return
		}
		b.Items = append(b.Items, engine.ReplayItem{Key: key, Seq: seq, Cost: uint64(cost), Limit: uint64(limit)})
	}
	counts, meta := d.opt.Origin.ServeReplay(b)
	writeCounts(w, meta, counts)
}

// cmdInternalPublish serves RL.INTERNAL.PUBLISH key seq region count [...]: components
// pushed by another region's origin. The reply is [changed].
func cmdInternalPublish(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	rest := args[1:]
	if len(rest)%4 != 0 {
		w.Error(errSyntax.Error())
		return
	}
	comps := make([]engine.Component, 0, len(rest)/4)
	for i := 0; i < len(rest); i += 4 {
		key, ok1 := parseKey(rest[i])
		seq, ok2 := parseInt(rest[i+1])
		count, ok3 := parseInt(rest[i+3])
		region := rest[i+2]
		if !ok1 {
			w.Error(errBadKey.Error())
			return
		}
		if !ok2 || !ok3 || len(region) == 0 || len(region) > 255 {
			w.Error(errBadInt.Error())
			return
		}
		comps = append(comps, engine.Component{Key: key, Seq: seq, Region: string(region), Count: uint64(count)})
	}
	if s.peerRegion == "" {
		w.Error("ERR internal: RL.INTERNAL.PUBLISH is for other regions' origins")
		return
	}
	// Only regions this origin knows (its own and its peers') are taken: a peer cannot fill
	// the region table with names.
	known := comps[:0]
	for _, c := range comps {
		if c.Region == d.opt.Region || d.opt.PeerRegions[c.Region] {
			known = append(known, c)
		}
	}
	comps = known
	changed := d.opt.Origin.MergeComponents(comps)
	if d.opt.OnImport != nil {
		d.opt.OnImport(s.peerRegion, len(comps), changed)
	}
	w.Array(1)
	w.Int(int64(changed))
}

// cmdInternalDecide serves RL.INTERNAL.DECIDE key limit cost pending inflight batch-id.
func cmdInternalDecide(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	key, ok := parseKey(args[1])
	if !ok {
		w.Error(errBadKey.Error())
		return
	}
	limit, ok1 := parseUint(args[2], engine.MaxLimit)
	cost, ok2 := parseUint(args[3], engine.MaxLimit)
	pending, ok3 := parseUint(args[4], math.MaxInt64)
	inflight, ok4 := parseUint(args[5], math.MaxInt64)
	batch, ok5 := parseUint(args[6], math.MaxInt64)
	if !ok1 || limit == 0 {
		w.Error(errLimit.Error())
		return
	}
	if !ok2 || !ok3 || !ok4 || !ok5 {
		w.Error(errCost.Error())
		return
	}
	dec, cc, meta, err := d.opt.Origin.ServeDecide(s.nodeRun, engine.DecideRequest{Key: key, Limit: limit, Cost: cost,
		Pending: pending, Inflight: inflight, InflightBatch: batch})
	if err != nil {
		w.Error(err.Error())
		return
	}
	w.Array(12)
	writeMeta(w, meta)
	w.Int(boolInt(dec.Allowed))
	w.Int(int64(dec.Limit))
	w.Int(int64(dec.Remaining))
	w.Int(dec.RetryAfterMs)
	w.Int(dec.ResetAfterMs)
	writeCellCounts(w, cc)
}
