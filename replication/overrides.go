package replication

import (
	"context"
	"fmt"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/upstream"
)

// Overrides (RL.OVERRIDE) travel with the publications: each peer's sender pushes the
// override changes its peer has not had in this session (all of them after the session's
// anti-entropy) after every publication it delivers and at every heartbeat, with
// RL.INTERNAL.OVERRIDES. Records merge by (stamp, region) (engine/override.go), so a
// record sent twice, or relayed back by the peer, changes nothing.

// overrideStore is a Store with a table of overrides (an *engine.Engine).
type overrideStore interface {
	Overrides() *engine.Overrides
}

// pushOverrides sends p the override changes since p.overridesSeq, and advances it.
func (r *Replicator) pushOverrides(c *upstream.Client, same func(error) error, p *peer) error {
	if r.overrides == nil {
		return nil
	}
	recs, next := r.overrides.Since(p.overridesSeq, 0)
	if len(recs) > 0 {
		if err := same(c.PushOverrides(context.Background(), recs)); err != nil {
			return fmt.Errorf("peer %s: overrides: %w", p.Region, err)
		}
	}
	p.overridesSeq = next
	return nil
}
