package wire

import (
	"fmt"
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.OVERRIDES key flags limit stamp region [...]: override records
// (engine.OverrideRecord; flags 1: a prefix; limit 0: a tombstone) that another region's
// origin pushes. The reply is [changed]: how many records were taken (as PUBLISH's).

// CmdOverrides is RL.INTERNAL.OVERRIDES's name.
const CmdOverrides = "RL.INTERNAL.OVERRIDES"

// overrideArgs are the arguments of one record.
const overrideArgs = 5

// MaxOverrideItems is the most records of one RL.INTERNAL.OVERRIDES: 1+5n arguments.
const MaxOverrideItems = (MaxArgs - 1) / overrideArgs

// AppendOverrides appends RL.INTERNAL.OVERRIDES of recs to dst. The caller keeps
// len(recs) from 1 to MaxOverrideItems.
func AppendOverrides(dst []byte, recs []engine.OverrideRecord) []byte {
	dst = resp.AppendArray(dst, 1+overrideArgs*len(recs))
	dst = resp.AppendBulkString(dst, CmdOverrides)
	for _, r := range recs {
		flags := uint64(0)
		if r.Prefix {
			flags = 1
		}
		dst = resp.AppendBulk(dst, r.Key)
		dst = resp.AppendBulkUint(dst, flags)
		dst = resp.AppendBulkUint(dst, r.Limit)
		dst = resp.AppendBulkUint(dst, r.Stamp)
		dst = resp.AppendBulkString(dst, r.Region)
	}
	return dst
}

// ParseOverrides decodes an RL.INTERNAL.OVERRIDES request of at least one record. Keys
// alias args. Region names are 1 to MaxRegionLen bytes, limits at most engine.MaxLimit,
// stamps at most engine.MaxOverrideStamp (a greater one would wrap the receiver's next).
func ParseOverrides(args [][]byte) ([]engine.OverrideRecord, error) {
	if len(args) < 1+overrideArgs || (len(args)-1)%overrideArgs != 0 {
		return nil, fmt.Errorf("%w: %d arguments to OVERRIDES", ErrSyntax, len(args))
	}
	rest := args[1:]
	recs := make([]engine.OverrideRecord, 0, len(rest)/overrideArgs)
	for i := 0; i < len(rest); i += overrideArgs {
		if !validKey(rest[i]) {
			return nil, fmt.Errorf("%w: override %d", ErrKey, i/overrideArgs)
		}
		flags, ok1 := parseUint(rest[i+1], 1)
		limit, ok2 := parseUint(rest[i+2], engine.MaxLimit)
		stamp, ok3 := parseUint(rest[i+3], engine.MaxOverrideStamp)
		region := rest[i+4]
		if !ok1 || !ok2 || !ok3 || len(region) == 0 || len(region) > MaxRegionLen {
			return nil, fmt.Errorf("%w: override %d", ErrInt, i/overrideArgs)
		}
		recs = append(recs, engine.OverrideRecord{Key: rest[i], Prefix: flags == 1, Limit: limit, Stamp: stamp, Region: string(region)})
	}
	return recs, nil
}

// RL.INTERNAL.OVERRIDELIST after: an edge reads its origin's overrides whose sequence is
// above after (engine.Engine.OverrideList). The reply is CHANGES's bulk string
// (AppendChangesPayload): changes of kind engine.ChangeOverride, versioned by sequence.

// CmdOverrideList is RL.INTERNAL.OVERRIDELIST's name.
const CmdOverrideList = "RL.INTERNAL.OVERRIDELIST"

// AppendOverrideList appends RL.INTERNAL.OVERRIDELIST after to dst.
func AppendOverrideList(dst []byte, after uint64) []byte {
	dst = resp.AppendArray(dst, 2)
	dst = resp.AppendBulkString(dst, CmdOverrideList)
	return resp.AppendBulkUint(dst, min(after, math.MaxInt64))
}

// ParseOverrideList decodes an RL.INTERNAL.OVERRIDELIST request (as ParseChanges).
func ParseOverrideList(args [][]byte) (after uint64, err error) { return ParseChanges(args) }
