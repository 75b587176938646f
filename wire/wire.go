// Package wire is Ratchet's internal protocol (docs/internal-protocol.md): every
// RL.INTERNAL.* message an edge or another region's origin sends to an origin. For each
// message it has the request encoder the sender uses (Append*), the decoder of the
// request as the origin receives it (Parse*), and for replies of integers the encoder the
// origin writes with (Write*Reply) and the decoder the sender reads with (Parse*Reply).
// Both ends use the same pair, and the pairs are tested as round trips.
//
// Requests are RESP arrays of bulk strings, integers in decimal. Replies are flat arrays
// of integers, or one bulk string for RL.INTERNAL.FORWARD. Request decoders take the
// arguments as resp.Parse returns them, command name first (not checked: the dispatcher
// matched it). They never panic; a malformed request is an error wrapping ErrSyntax,
// ErrKey, ErrInt, ErrLimit or ErrCost, which the origin turns into its error reply. Reply
// decoders return errors wrapping ErrReply: the reply does not fit its request.
package wire

import (
	"errors"
	"math"

	"github.com/ratchet/ratchet/resp"
)

// Command names, as senders spell them.
const (
	CmdHello   = "RL.INTERNAL.HELLO"
	CmdRead    = "RL.INTERNAL.READ"
	CmdReplay  = "RL.INTERNAL.REPLAY"
	CmdDecide  = "RL.INTERNAL.DECIDE"
	CmdPublish = "RL.INTERNAL.PUBLISH"
	CmdForward = "RL.INTERNAL.FORWARD"
)

// MaxArgs is the most arguments of one request an origin accepts: the MaxArgs of
// resp.DefaultLimits, with which origins parse requests (a test holds them equal). A
// request beyond it is a protocol error that closes the connection under every pipelined
// call, so senders stay within the bounds below.
const MaxArgs = 8192

// Bounds of one request, derived from MaxArgs.
const (
	// MaxReadItems is the most items of one RL.INTERNAL.READ: 1+4n arguments.
	MaxReadItems = (MaxArgs - 1) / readArgs
	// MaxReplayItems is the most items of one RL.INTERNAL.REPLAY: 4+6n arguments.
	MaxReplayItems = (MaxArgs - replayHeadArgs) / replayArgs
	// MaxPublishItems is the most components of one RL.INTERNAL.PUBLISH: 1+4n arguments.
	MaxPublishItems = (MaxArgs - 1) / 4
	// MaxForwardArgs is the most payload arguments (argc groups included) of one
	// RL.INTERNAL.FORWARD: 3+n arguments.
	MaxForwardArgs = MaxArgs - 3
	// MaxReplyInts bounds the integers of one reply a sender reads: the header and up to
	// MaxArgs counts groups, more than any request within MaxArgs can ask for.
	MaxReplyInts = metaInts + countsInts*MaxArgs
	// MaxRegionLen is the longest region name in a component.
	MaxRegionLen = 255
)

// Arguments of one item of RL.INTERNAL.READ and RL.INTERNAL.REPLAY, and of a whole
// RL.INTERNAL.DECIDE (its name included).
const (
	readArgs   = 4
	replayArgs = 6
	decideArgs = 10
	// replayHeadArgs: RL.INTERNAL.REPLAY batch-id boot changes, before the items.
	replayHeadArgs = 4
)

// Errors of request decoders, wrapped with the field at fault.
var (
	// ErrSyntax: the wrong number of arguments, or a field outside its domain that is not
	// one of the cases below.
	ErrSyntax = errors.New("wire: malformed request")
	// ErrKey: an item whose tuple key does not parse (engine.ParseKey). RL.INTERNAL.READ
	// reports a malformed seq with it too, as origins always have.
	ErrKey = errors.New("wire: malformed tuple key")
	// ErrInt: an integer field of an item that is not a strict non-negative decimal in
	// range, or a region name of the wrong length.
	ErrInt = errors.New("wire: malformed integer")
	// ErrLimit: RL.INTERNAL.DECIDE's limit is not an integer from 1 to engine.MaxLimit.
	ErrLimit = errors.New("wire: limit out of range")
	// ErrCost: one of RL.INTERNAL.DECIDE's other integers is out of range.
	ErrCost = errors.New("wire: cost out of range")
)

// ErrReply marks a reply that does not fit its request; the connection is out of step.
var ErrReply = errors.New("wire: reply does not fit its request")

// parseUint is resp.ParseUint: a strict non-negative decimal integer of at most max.
func parseUint(b []byte, max uint64) (uint64, bool) { return resp.ParseUint(b, max) }

// parseInt reads a strict non-negative decimal integer up to math.MaxInt64.
func parseInt(b []byte) (int64, bool) {
	v, ok := parseUint(b, math.MaxInt64)
	return int64(v), ok
}

// clampInt is n as a reply integer: replies are signed, counts saturate at MaxInt64.
func clampInt(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
