package commands

import (
	"crypto/sha256"
	"errors"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// The RL.INTERNAL.* commands serve edges and other regions' origins
// (docs/internal-protocol.md; the messages are package wire's). They are refused
// until the connection has sent RL.INTERNAL.HELLO with the cluster secret, and on a node
// that is not an origin.

var (
	errClusterAuth = errors.New("NOAUTH cluster authentication required")
	errClusterCert = errors.New("NOPERM node links need a TLS client certificate verified against --cluster-client-ca")
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
		{Name: "rl.internal.replay", Arity: -10, Flags: flagWrite, Group: "ratchet",
			Summary: "Applies a batch of an edge's accepted cost, once.", Handler: cmdInternalReplay},
		{Name: "rl.internal.publish", Arity: -5, Flags: flagWrite, Group: "ratchet",
			Summary: "Merges G-Counter components from another region's origin.", Handler: cmdInternalPublish},
		{Name: "rl.internal.decide", Arity: 10, Flags: flagWrite, Group: "ratchet",
			Summary: "Decides a request handed over by an edge.", Handler: cmdInternalDecide},
		{Name: "rl.internal.decidemulti", Arity: -10, Flags: flagWrite, Group: "ratchet",
			Summary: "Decides a multi-limit request handed over by an edge, all limits or none.", Handler: cmdInternalDecideMulti},
		{Name: "rl.internal.changes", Arity: 2, Flags: flagReadonly | flagFast, Group: "ratchet",
			Summary: "Lists the origin's changes (resets) since a version, for an edge.", Handler: cmdInternalChanges},
		{Name: "rl.internal.reset", Arity: -2, Flags: flagWrite, Group: "ratchet",
			Summary: "Resets tuples for an edge's client (RL.RESET).", Handler: cmdInternalReset},
		{Name: "rl.internal.forward", Arity: -5, Flags: flagWrite, Group: "ratchet",
			Summary: "Runs counter, CL.THROTTLE and script commands for an edge's client.", Handler: cmdInternalForward},
		{Name: "rl.internal.overrides", Arity: -6, Flags: flagWrite, Group: "ratchet",
			Summary: "Merges override records from another region's origin.", Handler: cmdInternalOverrides},
		{Name: "rl.internal.overridelist", Arity: 2, Flags: flagReadonly, Group: "ratchet",
			Summary: "Lists the origin's overrides for an edge.", Handler: cmdInternalOverrideList},
	}
}

func cmdInternalHello(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	secret := d.opt.ClusterSecret
	if d.opt.ClusterClientCert && !s.CertVerified {
		w.Error(errClusterCert.Error())
		return
	}
	h, err := wire.ParseHello(args)
	if err != nil {
		w.Error(errSyntax.Error())
		return
	}
	if secret == "" || !secretEqual(h.Secret, secret) {
		d.authFailed(s, d.clusterAuth)
		w.Error("WRONGPASS invalid cluster secret")
		return
	}
	d.authSucceeded(s)
	s.cluster, s.Authed = true, true
	s.user, s.aclState = nil, nil // the cluster secret governs a node's connection, never an ACL user
	s.nodeRun = h.NodeRun
	if region, ok := wire.PeerRegion(s.nodeRun); ok {
		s.peerRegion = region // another region's origin, not an edge of ours
	} else if d.opt.Origin != nil {
		d.opt.Origin.Heard(s.nodeRun)
	}
	w.OK()
}

// secretEqual reports whether given is the cluster secret. It compares SHA-256 digests,
// as aclState.login compares passwords: equal lengths, so the compare's time tells
// nothing of the secret's length (subtle.ConstantTimeCompare returns at once on a length
// mismatch).
func secretEqual(given []byte, secret string) bool {
	g, s := sha256.Sum256(given), sha256.Sum256([]byte(secret))
	return ctCompare(g[:], s[:]) == 1
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

// internalError is the error reply to a request package wire could not decode.
func internalError(err error) string {
	switch {
	case errors.Is(err, wire.ErrKey):
		return errBadKey.Error()
	case errors.Is(err, wire.ErrInt):
		return errBadInt.Error()
	case errors.Is(err, wire.ErrLimit):
		return errLimit.Error()
	case errors.Is(err, wire.ErrCost):
		return errCost.Error()
	}
	return errSyntax.Error()
}

// cmdInternalRead serves RL.INTERNAL.READ key seq limit want [...].
func cmdInternalRead(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	items, err := wire.ParseRead(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	counts, meta := d.opt.Origin.ServeRead(s.nodeRun, items)
	wire.WriteCountsReply(w, meta, counts)
}

// cmdInternalReplay serves RL.INTERNAL.REPLAY batch-id boot changes key seq cost limit want return [...].
func cmdInternalReplay(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	b, err := wire.ParseReplay(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	b.Node = s.nodeRun
	counts, meta := d.opt.Origin.ServeReplay(b)
	wire.WriteCountsReply(w, meta, counts)
}

// cmdInternalPublish serves RL.INTERNAL.PUBLISH key seq region count [...]: components
// pushed by another region's origin. The reply is [changed].
func cmdInternalPublish(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	comps, err := wire.ParsePublish(args)
	if err != nil {
		w.Error(internalError(err))
		return
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
	wire.WritePublishReply(w, changed)
}

// cmdInternalDecide serves RL.INTERNAL.DECIDE key limit cost pending inflight batch-id want
// return deadline.
func cmdInternalDecide(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	r, err := wire.ParseDecide(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	dec, cc, meta, err := d.opt.Origin.ServeDecide(s.nodeRun, r)
	if err != nil {
		w.Error(errReply(err))
		return
	}
	wire.WriteDecideReply(w, dec, cc, meta)
}

// cmdInternalDecideMulti serves RL.INTERNAL.DECIDEMULTI cost batch-id deadline key limit
// pending inflight want return [key limit pending inflight want return ...].
func cmdInternalDecideMulti(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	r, err := wire.ParseDecideMulti(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	ds, ccs, meta, err := d.opt.Origin.ServeDecideMulti(s.nodeRun, r)
	switch {
	case errors.Is(err, engine.ErrFull):
		w.Error(errReply(err))
		return
	case err != nil:
		w.Error("ERR internal: " + err.Error())
		return
	}
	wire.WriteDecideMultiReply(w, ds, ccs, meta)
}

// cmdInternalChanges serves RL.INTERNAL.CHANGES since.
func cmdInternalChanges(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	since, err := wire.ParseChanges(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	wire.WriteChangesReply(w, d.opt.Origin.ChangesSince(s.nodeRun, since))
}

// cmdInternalReset serves RL.INTERNAL.RESET key [key ...].
func cmdInternalReset(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	keys, err := wire.ParseReset(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	n, err := d.opt.Origin.ResetKeys(keys)
	if err != nil {
		w.Error(errReply(err))
		return
	}
	wire.WriteResetReply(w, n)
}
