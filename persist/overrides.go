package persist

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// The overrides (RL.OVERRIDE, engine/override.go) have a bucket of their own, chunked as
// the cells are, with "overrides_count" and "overrides_crc32c" in the meta bucket. A
// record is:
//
//	uvarint len(key) | tuple key | uvarint flags (1: prefix) | uvarint limit (0: a
//	tombstone) | uvarint stamp | uvarint len(region) | region
//
// The table's horizon (engine.OverrideHorizon) is in meta: "overrides_horizon" its stamp
// (8 bytes, big endian) and "overrides_horizon_region" its region.
//
// The bucket is optional: a file of format 9 written before overrides existed has none,
// and loads with no overrides; a binary from before them ignores it. A file without the
// horizon (written before it) loads with the zero horizon.
const (
	overridesBucket      = "overrides"
	metaOverridesCount   = "overrides_count"
	metaOverridesCRC     = "overrides_crc32c"
	metaOverridesHorizon = "overrides_horizon"
	metaOverridesHRegion = "overrides_horizon_region"
	overridePrefixFlag   = 1
)

// metaValue is one value of the meta bucket beyond those every file has.
type metaValue struct {
	name  string
	value []byte
}

// horizonMeta is the meta values of the overrides' horizon.
func horizonMeta(h engine.OverrideHorizon) []metaValue {
	return []metaValue{{metaOverridesHorizon, binary.BigEndian.AppendUint64(nil, h.Stamp)},
		{metaOverridesHRegion, []byte(h.Region)}}
}

// readHorizon reads the overrides' horizon from meta: zero when the file has none.
func readHorizon(meta *bolt.Bucket) (engine.OverrideHorizon, error) {
	if meta.Get([]byte(metaOverridesHorizon)) == nil {
		return engine.OverrideHorizon{}, nil
	}
	stamp, err := metaUint(meta, metaOverridesHorizon, 8)
	if err != nil {
		return engine.OverrideHorizon{}, err
	}
	region := meta.Get([]byte(metaOverridesHRegion))
	if len(region) > 255 || (stamp != 0 && len(region) == 0) {
		return engine.OverrideHorizon{}, fmt.Errorf("%w: meta %q has %d bytes", ErrCorrupt, metaOverridesHRegion, len(region))
	}
	return engine.OverrideHorizon{Stamp: stamp, Region: string(region)}, nil
}

// overridesSection is the section the overrides are written to.
func overridesSection() section {
	return section{bucket: overridesBucket, countName: metaOverridesCount, crcName: metaOverridesCRC}
}

// appendOverride encodes one override record.
func appendOverride(buf []byte, r engine.OverrideRecord) ([]byte, error) {
	if len(r.Key) == 0 || len(r.Key) > maxKeyLen || len(r.Region) == 0 || len(r.Region) > 255 {
		return buf, fmt.Errorf("override record: key of %d bytes, region of %d", len(r.Key), len(r.Region))
	}
	buf = binary.AppendUvarint(buf, uint64(len(r.Key)))
	buf = append(buf, r.Key...)
	var flags uint64
	if r.Prefix {
		flags |= overridePrefixFlag
	}
	buf = binary.AppendUvarint(buf, flags)
	buf = binary.AppendUvarint(buf, r.Limit)
	buf = binary.AppendUvarint(buf, r.Stamp)
	return appendString(buf, r.Region), nil
}

// decodeOverride reads one override record (appendOverride's).
func decodeOverride(d *decoder, str string, _ []byte) (engine.OverrideRecord, error) {
	r := engine.OverrideRecord{Key: []byte(d.str("key", str))}
	flags := d.uvarint()
	if flags&^overridePrefixFlag != 0 {
		return r, fmt.Errorf("unknown override flags %#x", flags)
	}
	r.Prefix = flags&overridePrefixFlag != 0
	r.Limit, r.Stamp = d.uvarint(), d.uvarint()
	r.Region = d.str("region", str)
	if d.err == nil && (len(r.Key) == 0 || r.Region == "") {
		return r, errors.New("empty override key or region")
	}
	if r.Limit > engine.MaxLimit {
		return r, fmt.Errorf("override limit %d over %d", r.Limit, engine.MaxLimit)
	}
	return r, nil
}

// readOverrides reads the overrides bucket of tx, if the file has one.
func readOverrides(tx *bolt.Tx, meta *bolt.Bucket, size int64) ([]engine.OverrideRecord, error) {
	if tx.Bucket([]byte(overridesBucket)) == nil {
		return nil, nil
	}
	c := chunked[engine.OverrideRecord]{bucket: overridesBucket, countName: metaOverridesCount, crcName: metaOverridesCRC,
		minLen: 6, decode: decodeOverride}
	return c.read(tx, meta, size)
}
