package engine

// PartOf returns the load part (TupleRecord.Part) of the tuple of key (a CellRecord's or a
// LeaseRecord's Key) in a store of hash seed seed (ShardSeed).
func PartOf(seed uint64, key string) int { return partOf(hashKey(seed, key)) }

// KeyHash returns the hash of key (a CellRecord's Key) in a store of hash seed seed: the
// keyHash that LoadLazily's load is given for a keyed restore is this, under the seed the
// store adopted (AdoptShardSeed).
func KeyHash(seed uint64, key string) uint64 { return hashKey(seed, key) }

// PartOfHash returns the load part of a key of hash h (KeyHash): PartOf without hashing
// the key again.
func PartOfHash(h uint64) int { return partOf(h) }
