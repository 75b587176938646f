package wire

import (
	"fmt"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.PUBLISH key seq region count [...]: G-Counter components another region's
// origin pushes. The reply is [changed]: how many rows raised a count. A row whose region
// is written with a leading zero byte (ResetMark; no region name has one: names come
// from flags and the environment, which cannot hold a zero byte) is a reset row
// (engine.Component.Reset): count is what a reset cancelled of that region's component.

// ResetMark prefixes the region of a reset row.
const ResetMark = "\x00"

// AppendPublish appends RL.INTERNAL.PUBLISH of comps to dst. The caller keeps len(comps)
// from 1 to MaxPublishItems.
func AppendPublish(dst []byte, comps []engine.Component) []byte {
	dst = resp.AppendArray(dst, 1+4*len(comps))
	dst = resp.AppendBulkString(dst, CmdPublish)
	for _, c := range comps {
		dst = resp.AppendBulk(dst, c.Key)
		dst = resp.AppendBulkInt(dst, c.Seq)
		if c.Reset {
			dst = resp.AppendBulkString(dst, ResetMark+c.Region)
		} else {
			dst = resp.AppendBulkString(dst, c.Region)
		}
		dst = resp.AppendBulkUint(dst, c.Count)
	}
	return dst
}

// ParsePublish decodes an RL.INTERNAL.PUBLISH request of at least one component. Keys
// alias args. Region names are 1 to MaxRegionLen bytes (else ErrInt).
func ParsePublish(args [][]byte) ([]engine.Component, error) {
	if len(args) < 5 || (len(args)-1)%4 != 0 {
		return nil, fmt.Errorf("%w: %d arguments to PUBLISH", ErrSyntax, len(args))
	}
	rest := args[1:]
	comps := make([]engine.Component, 0, len(rest)/4)
	for i := 0; i < len(rest); i += 4 {
		if !validKey(rest[i]) {
			return nil, fmt.Errorf("%w: component %d", ErrKey, i/4)
		}
		seq, ok1 := parseInt(rest[i+1])
		count, ok2 := parseInt(rest[i+3])
		region := rest[i+2]
		reset := len(region) > 0 && region[0] == ResetMark[0]
		if reset {
			region = region[1:]
		}
		if !ok1 || !ok2 || len(region) == 0 || len(region) > MaxRegionLen {
			return nil, fmt.Errorf("%w: component %d", ErrInt, i/4)
		}
		comps = append(comps, engine.Component{Key: rest[i], Seq: seq, Region: string(region), Count: uint64(count), Reset: reset})
	}
	return comps, nil
}

// WritePublishReply writes the reply to RL.INTERNAL.PUBLISH.
func WritePublishReply(w *resp.Writer, changed int) {
	w.Array(1)
	w.Int(int64(changed))
}

// ParsePublishReply decodes the integers of a reply to RL.INTERNAL.PUBLISH.
func ParsePublishReply(v []int64) (changed int, err error) {
	if len(v) != 1 || v[0] < 0 {
		return 0, fmt.Errorf("%w: publish reply %v", ErrReply, v)
	}
	return int(v[0]), nil
}
