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
// The bucket is optional: a file of format 9 written before overrides existed has none,
// and loads with no overrides; a binary from before them ignores it.
const (
	overridesBucket    = "overrides"
	metaOverridesCount = "overrides_count"
	metaOverridesCRC   = "overrides_crc32c"
	overridePrefixFlag = 1
)

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
