package wire

import (
	"fmt"
	"strings"

	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.HELLO secret node-run: the first request of every node-to-node connection.
// The reply is +OK, or an error (-WRONGPASS for a wrong secret).

// PeerPrefix starts the node-run another region's origin sends in RL.INTERNAL.HELLO:
// "peer:<region>". It tells the receiver the connection is not one of its edges.
const PeerPrefix = "peer:"

// Hello is an RL.INTERNAL.HELLO request.
type Hello struct {
	Secret  []byte // the cluster secret; aliases the request
	NodeRun string // "node-id/boot-nonce" of an edge run, or PeerRun(region)
}

// AppendHello appends RL.INTERNAL.HELLO secret nodeRun to dst.
func AppendHello(dst []byte, secret, nodeRun string) []byte {
	dst = resp.AppendArray(dst, 3)
	dst = resp.AppendBulkString(dst, CmdHello)
	dst = resp.AppendBulkString(dst, secret)
	return resp.AppendBulkString(dst, nodeRun)
}

// ParseHello decodes an RL.INTERNAL.HELLO request.
func ParseHello(args [][]byte) (Hello, error) {
	if len(args) != 3 {
		return Hello{}, fmt.Errorf("%w: %d arguments to HELLO", ErrSyntax, len(args))
	}
	return Hello{Secret: args[1], NodeRun: string(args[2])}, nil
}

// PeerRun is the node-run an origin of region sends to another region's origin.
func PeerRun(region string) string { return PeerPrefix + region }

// PeerRegion returns the region of a node-run made by PeerRun; ok is false for an edge's.
func PeerRegion(nodeRun string) (region string, ok bool) {
	return strings.CutPrefix(nodeRun, PeerPrefix)
}
