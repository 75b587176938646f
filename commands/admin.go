package commands

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

func cmdCommand(d *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) {
	if len(args) == 1 {
		w.Array(len(d.ordered))
		for _, c := range d.ordered {
			c.writeInfo(w)
		}
		return
	}
	names := args[2:]
	switch strings.ToUpper(string(args[1])) {
	case "COUNT":
		w.Int(int64(len(d.ordered)))
	case "LIST":
		w.Array(len(d.ordered))
		for _, c := range d.ordered {
			w.BulkString(c.Name)
		}
	case "INFO":
		if len(names) == 0 {
			w.Array(len(d.ordered))
			for _, c := range d.ordered {
				c.writeInfo(w)
			}
			return
		}
		w.Array(len(names))
		for _, n := range names {
			if c := d.table[strings.ToLower(string(n))]; c != nil {
				c.writeInfo(w)
			} else {
				w.Null()
			}
		}
	case "DOCS":
		var cmds []*Command
		if len(names) == 0 {
			cmds = d.ordered
		}
		for _, n := range names {
			if c := d.table[strings.ToLower(string(n))]; c != nil {
				cmds = append(cmds, c)
			}
		}
		w.Map(len(cmds))
		for _, c := range cmds {
			w.BulkString(c.Name)
			c.writeDocs(w)
		}
	default:
		w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try COMMAND HELP.")
	}
}

func cmdDBSize(d *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	if l, ok := d.opt.Limiter.(interface {
		Loading() bool
		WaitLoaded()
	}); ok {
		if s.NoWait && l.Loading() {
			s.WouldBlock = true // waiting for the load would stall the event loop's connections
			return
		}
		l.WaitLoaded() // an origin that restarted counts the cells of its snapshot too
	}
	w.Int(d.limiterStats().cells)
}

// cmdConfig serves CONFIG GET pattern [pattern ...] over the known parameters (glob
// patterns as Redis). CONFIG SET and the rest are refused: flags configure Ratchet.
func cmdConfig(d *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) {
	if !strings.EqualFold(string(args[1]), "GET") {
		w.Error("ERR CONFIG " + strings.ToUpper(clip(args[1])) + " is not supported: Ratchet is configured by flags")
		return
	}
	if len(args) < 3 {
		w.Error("ERR wrong number of arguments for 'config|get' command")
		return
	}
	keys := make([]string, 0, len(d.opt.Config))
	for k := range d.opt.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var match []string
	for _, k := range keys {
		for _, p := range args[2:] {
			if ok, _ := path.Match(strings.ToLower(string(p)), k); ok {
				match = append(match, k)
				break
			}
		}
	}
	w.Map(len(match))
	for _, k := range match {
		w.BulkString(k)
		w.BulkString(d.opt.Config[k])
	}
}

// cmdInfo serves INFO [section ...] in Redis's text format.
func cmdInfo(d *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	for _, sec := range d.infoSections() {
		if !all && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", strings.ToUpper(sec.name[:1])+sec.name[1:])
		for _, f := range sec.fields {
			fmt.Fprintf(&b, "%s:%v\r\n", f.k, f.v)
		}
	}
	if want["commandstats"] || want["all"] || want["everything"] { // not in the default, as Redis
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		d.writeCommandStats(&b)
	}
	w.BulkString(b.String())
}

// writeCommandStats writes INFO commandstats as Redis 7 does: a line per command that
// was requested (unknown names are not listed; usec is estimated, see cmdstats.go).
func (d *Dispatcher) writeCommandStats(b *strings.Builder) {
	b.WriteString("# Commandstats\r\n")
	for _, st := range d.CommandStats() {
		if st.Name == unknownCommand {
			continue
		}
		perCall := 0.0
		if st.Calls > 0 {
			perCall = float64(st.Usec) / float64(st.Calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			st.Name, st.Calls, st.Usec, perCall, st.Rejected, st.Failed)
	}
}

type infoField struct {
	k string
	v any
}

type infoSection struct {
	name   string
	fields []infoField
}

func (d *Dispatcher) infoSections() []infoSection {
	now := time.Now().UnixMilli()
	cs := d.opt.Host.ConnStats()
	ls := d.limiterStats()
	ratchet := []infoField{
		{"role", d.opt.Role},
		{"region", d.opt.Region},
		{"node_id", d.opt.NodeID},
	}
	if es := ls.edge; es != nil {
		reachable := 0
		for _, o := range es.Origins {
			if o.Reachable {
				reachable++
			}
		}
		ratchet = append(ratchet, infoField{"origins", len(es.Origins)}, infoField{"origins_reachable", reachable})
		for i, o := range es.Origins {
			ratchet = append(ratchet, infoField{fmt.Sprintf("origin%d", i), fmt.Sprintf("addr=%s,reachable=%d,last_ok_ms=%d,pending=%d,edges=%d",
				o.ID, boolInt(o.Reachable), o.LastOKMs, o.Pinned, o.Edges)})
		}
		ratchet = append(ratchet,
			infoField{"origin_reachable", boolInt(reachable == len(es.Origins))},
			infoField{"replay_pending", es.ReplayPending},
			infoField{"replay_retried", es.ReplayRetried},
			infoField{"replay_expired_cost", es.ReplayExpired},
			infoField{"replay_unsaved_cost", es.ReplayUnsaved},
			infoField{"replay_unsaved_dropped_cost", es.ReplayUnsavedDropped},
			infoField{"replay_resent_cost", es.ReplayResent},
			infoField{"origin_reads", es.OriginReads},
			infoField{"decisions_handed_off", es.OriginAllowed + es.OriginDenied},
			infoField{"strict_activations", es.Strict},
			infoField{"cold_admitted", es.ColdAdmitted},
			infoField{"changes_applied", es.ChangesApplied},
			infoField{"reset_dropped_cost", es.ResetDropped},
			infoField{"changes_resyncs", es.Resyncs},
			infoField{"local_entries", es.Entries})
	} else {
		es := ls.origin
		ratchet = append(ratchet,
			infoField{"origin_reachable", 1}, // an origin is its own origin
			infoField{"replay_pending", 0},
			infoField{"replay_items_received", es.ReplayItems},
			infoField{"cells", es.Cells},
			infoField{"tuples", es.Tuples},
			infoField{"loading", boolInt(es.Loading)}, // Redis's field: the snapshot is still loading
			infoField{"memory_used_bytes", es.MemoryBytes})
	}
	var peers []PeerInfo
	if d.opt.Peers != nil {
		peers = d.opt.Peers()
	}
	ratchet = append(ratchet, infoField{"peers", len(peers)})
	for i, p := range peers {
		ratchet = append(ratchet, infoField{fmt.Sprintf("peer%d", i), fmt.Sprintf(
			"region=%s,addr=%s,up=%d,last_ok_ms=%d,lag_ms=%d,published=%d,imported=%d,last_import_ms=%d",
			p.Region, p.Addr, boolInt(p.Up), p.LastOKMs, p.LagMs, p.Published, p.Imported, p.ImportedMs)})
	}
	ratchet = append(ratchet,
		infoField{"max_memory_bytes", ls.maxMemory},
		infoField{"cells_refused_full", ls.refused},
		infoField{"decisions_allowed", ls.allowed},
		infoField{"decisions_denied", ls.denied})
	if d.opt.Snapshots != nil {
		ss := d.opt.Snapshots()
		ratchet = append(ratchet,
			infoField{"snapshot_last_success_ms", ss.LastSuccessMs},
			infoField{"snapshot_last_duration_ms", ss.LastDuration.Milliseconds()},
			infoField{"snapshot_last_cells", ss.LastCells},
			infoField{"snapshot_failures", ss.Failures},
			infoField{"snapshot_base_bytes", ss.BaseBytes},
			infoField{"snapshot_log_bytes", ss.LogBytes},
			infoField{"snapshot_compactions", ss.Compactions},
			infoField{"snapshot_compaction_failures", ss.CompactionFailures})
	}
	ps := d.pubsub.counts()
	tk, tp := d.track.counts()
	return []infoSection{
		{"server", []infoField{
			{"ratchet_version", d.opt.Version},
			{"redis_version", "7.2.0"},
			{"redis_mode", "standalone"},
			{"os", runtime.GOOS + " " + runtime.GOARCH},
			{"go_version", runtime.Version()},
			{"process_id", os.Getpid()},
			{"tcp_port", cs.Port},
			{"uptime_in_seconds", (now - d.startedMs) / 1000},
		}},
		{"clients", []infoField{
			{"connected_clients", cs.Connected},
			{"maxclients", d.opt.MaxClients},
			{"blocked_clients", 0},
			{"tracking_clients", d.track.clients.Load()},
			{"pubsub_output_cuts", cs.PushCuts},
		}},
		memorySection(ls.maxMemory),
		{"stats", []infoField{
			{"total_connections_received", cs.Total},
			{"total_commands_processed", d.Processed()},
			{"rejected_connections", cs.Rejected},
			{"auth_failures", d.authFailures.Load()},
			{"auth_throttled", d.authThrottled.Load()},
			{"pubsub_channels", ps.channels},
			{"pubsub_patterns", ps.patterns},
			{"tracking_total_keys", tk},
			{"tracking_total_prefixes", tp},
		}},
		keyspaceSection(ls.cells),
		{"ratchet", ratchet},
	}
}

// memorySection is INFO memory, with Redis's field names: used_memory is the Go runtime's
// memory in use (mapped, less the heap's free and released spans), used_memory_rss the
// process's resident set, maxmemory --max-memory (the cell store's bound).
func memorySection(maxMemory int64) infoSection {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	var v [3]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	used := v[0] - min(v[0], v[1]+v[2])
	rss := residentBytes()
	return infoSection{"memory", []infoField{
		{"used_memory", used},
		{"used_memory_human", humanBytes(used)},
		{"used_memory_rss", rss},
		{"used_memory_rss_human", humanBytes(rss)},
		{"maxmemory", maxMemory},
		{"maxmemory_human", humanBytes(uint64(max(maxMemory, 0)))},
		{"maxmemory_policy", "noeviction"},
		{"mem_allocator", "go-" + runtime.Version()},
	}}
}

// keyspaceSection is INFO keyspace: the cells held, as db0's keys (no line when there are
// none, as Redis omits empty databases). Cells are dropped by the sweep, not by a TTL.
func keyspaceSection(cells int64) infoSection {
	sec := infoSection{name: "keyspace"}
	if cells > 0 {
		sec.fields = []infoField{{"db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", cells)}}
	}
	return sec
}

// limiterStats are the limiter's counters for INFO and DBSIZE: what both roles report
// alike, and the role's own Stats (an edge's cells are its local entries).
type limiterStats struct {
	allowed, denied, refused uint64
	cells, maxMemory         int64
	origin                   engine.Stats
	edge                     *edge.Stats // nil on an origin
}

func (d *Dispatcher) limiterStats() limiterStats {
	switch l := d.opt.Limiter.(type) {
	case interface{ Stats() edge.Stats }:
		s := l.Stats()
		return limiterStats{allowed: s.Allowed, denied: s.Denied, refused: s.RefusedFull, cells: s.Entries,
			maxMemory: s.MaxMemoryBytes, edge: &s}
	case interface{ Stats() engine.Stats }:
		s := l.Stats()
		return limiterStats{allowed: s.Allowed, denied: s.Denied, refused: s.RefusedFull, cells: s.Cells,
			maxMemory: s.MaxMemoryBytes, origin: s}
	}
	return limiterStats{}
}

// residentBytes is the process's resident set size from /proc/self/statm; 0 where there
// is none.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	var size, pages uint64 // statm: total program size, then resident pages
	if err != nil {
		return 0
	}
	if _, err := fmt.Sscan(string(b), &size, &pages); err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// humanBytes formats n as Redis's *_human fields do: "512B", "1.50K", "12.00M", "1.00G".
func humanBytes(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n < 1<<40:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%.2fT", float64(n)/(1<<40))
	}
}
