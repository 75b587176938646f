package engine

// PartOf returns the load part (TupleRecord.Part) of the tuple of key (a CellRecord's or a
// LeaseRecord's Key) in a store of hash seed seed (ShardSeed).
func PartOf(seed uint64, key string) int { return partOf(hashKey(seed, key)) }
