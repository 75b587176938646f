// Package prefetch asks the processor for a memory line ahead of its use, without waiting
// for it: a read that would miss the caches then overlaps others, where a load would stall
// the reads that follow it. A prefetch of an address that is not mapped does nothing.
package prefetch
