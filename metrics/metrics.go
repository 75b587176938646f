// Package metrics exposes Ratchet's counters to Prometheus and serves /metrics, /healthz
// (liveness) and /readyz (readiness). It reads the same Stats that INFO reads, so the two
// never disagree; no key or namespace is ever a label.
package metrics

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/persist"
	"github.com/ratchet/ratchet/replication"
	"github.com/ratchet/ratchet/server"
)

// Sources are the readings the collector takes at each scrape. Nil fields are skipped.
type Sources struct {
	Engine    func() engine.Stats // an origin's
	Edge      func() edge.Stats   // an edge's
	Conns     func() server.ConnStats
	Commands  func() []CommandStat // per-command counts and sampled durations
	Snapshots func() persist.Stats
	Peers     func() []replication.PeerStats
	Auth      func() AuthStats
	// DurationBounds are the upper bounds, in seconds, of the buckets of
	// CommandStat.Buckets; counts past its length are not exported.
	DurationBounds []float64
	// Ready reports why the node should not take traffic now, or nil when it should; it
	// answers /readyz. Nil: always ready.
	Ready func() error
}

// CommandStat is one command's counts since the start, as the command table keeps them.
type CommandStat struct {
	Name     string // lower case, or "unknown"
	Calls    uint64 // requests that ran
	Rejected uint64 // requests refused before running
	// Timed is the number of timed calls, TimedSeconds their total duration, and Buckets
	// their cumulative counts at each of Sources.DurationBounds.
	Timed        uint64
	TimedSeconds float64
	Buckets      []uint64
}

// AuthStats count failed authentication.
type AuthStats struct {
	Failures  uint64 // wrong passwords and secrets, within the throttle's budget
	Throttled uint64 // wrong ones over the budget
}

type collector struct {
	src Sources

	decisions, refused, cells, tuples, memBytes, memMax                                *prometheus.Desc
	clients, connections, rejected, commands, cmdDuration                              *prometheus.Desc
	closed, queryBytes, queryLimit, authFailures, authThrottled                        *prometheus.Desc
	snapDuration, snapLastSuccess, snapCells, snapFailures, snapBytes, snapCompactions *prometheus.Desc
	replayPending, replayRetried, replayExpired, strict, originUp                      *prometheus.Desc
	replayUnsaved, replayUnsavedDropped, replayResent, coldAdmitted                    *prometheus.Desc
	resetsRefused                                                                      *prometheus.Desc
	published, imported, peerUp, peerLag, peerLastOK, peerPublished, peerImported      *prometheus.Desc
}

func newCollector(src Sources) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("ratchet_"+name, help, labels, nil)
	}
	return &collector{
		src:         src,
		decisions:   d("decisions_total", "Decisions made, by result and by where the counts came from.", "result", "source"),
		refused:     d("cells_refused_total", "Requests refused because the cell store was full (--max-memory)."),
		cells:       d("cells", "Cells held in memory."),
		tuples:      d("local_entries", "Tuples (entries of up to two cells) held in memory."),
		memBytes:    d("memory_bytes", "Estimated bytes of the cell store."),
		memMax:      d("memory_max_bytes", "The --max-memory bound of the cell store."),
		clients:     d("connected_clients", "Open client connections."),
		connections: d("connections_total", "Connections accepted."),
		rejected:    d("connections_rejected_total", "Connections refused at --max-clients."),
		commands:    d("commands_total", "Requests by command (those of names not in the command table as \"unknown\"), run or refused.", "command"),
		cmdDuration: d("command_duration_seconds", "Time to run a command, from a sample: each connection's first request and 1 in 16 after.", "command"),
		closed: d("connections_closed_total", "Connections the server closed, by reason: read_timeout (an incomplete request made no progress for --read-timeout), "+
			"idle_timeout (--timeout), write_timeout (replies not read for --write-timeout), handshake_timeout (TLS), "+
			"query_buffer (held the most request bytes when --max-query-buffer was full), protocol_error.", "reason"),
		queryBytes:      d("query_buffer_bytes", "Request bytes buffered across all connections."),
		queryLimit:      d("query_buffer_limit_bytes", "The --max-query-buffer bound of buffered request bytes."),
		authFailures:    d("auth_failures_total", "Wrong passwords: AUTH, HELLO AUTH, and the node-to-node password of RL.INTERNAL.HELLO."),
		authThrottled:   d("auth_throttled_total", "Wrong authentication attempts over the budget of repeated failures (their connection is closed; the right password is always accepted)."),
		snapDuration:    d("snapshot_duration_seconds", "Duration of the last successful snapshot."),
		snapLastSuccess: d("snapshot_last_success_timestamp_seconds", "Unix time of the last successful snapshot."),
		snapCells:       d("snapshot_cells", "Cells written by the last successful snapshot."),
		snapFailures:    d("snapshot_failures_total", "Snapshots that failed."),
		snapBytes:       d("snapshot_bytes", "Bytes on disk of the snapshot: the file (kind=\"base\") and the delta logs a restart reads with it (kind=\"log\").", "kind"),
		snapCompactions: d("snapshot_compactions_total", "Rewrites of the snapshot file from its delta logs, by outcome (ok, failed).", "outcome"),
		replayPending:   d("replay_pending", "Edge: local entries holding cost the origin has not acknowledged."),
		replayRetried:   d("replay_retried_total", "Edge: replay batches sent again after a failure."),
		replayExpired:   d("replay_expired_total", "Edge: accepted cost dropped because its cell ended before the origin could take it."),
		strict:          d("strict_activations_total", "Edge: tuples put in strict mode by a denial."),
		coldAdmitted:    d("cold_admitted_total", "Edge: requests of tuples without a lease admitted under the origin's cold allowance, without a round trip."),
		originUp:        d("origin_up", "Edge: 1 when the origin answered the last call.", "origin"),
		published:       d("global_published_total", "Origin: own components handed to the publisher."),
		imported:        d("global_imported_total", "Origin: components received from peers that changed a count."),
		peerUp:          d("peer_up", "1 while the connection to the peer region is established.", "peer"),
		peerLag:         d("peer_lag_seconds", "Age of the oldest publication not yet delivered to the peer.", "peer"),
		peerLastOK:      d("peer_last_exchange_timestamp_seconds", "Unix time of the last successful exchange with the peer.", "peer"),
		peerPublished:   d("peer_published_total", "Components delivered to the peer by publication.", "peer"),
		peerImported:    d("peer_imported_total", "Components received from the peer.", "peer"),

		replayUnsaved:        d("replay_unsaved", "Edge: cost the origins acknowledged and have not saved yet, kept to re-send should one restart from its snapshot."),
		replayUnsavedDropped: d("replay_unsaved_dropped_total", "Edge: acknowledged cost dropped from what is kept for re-sending, by its bound (a kill -9 of the origin would lose it)."),
		replayResent:         d("replay_resent_total", "Edge: acknowledged cost re-sent to an origin restarted from a snapshot that lacked it."),

		resetsRefused: d("resets_refused_total", "Origin: resets, and peers' reset rows, refused because the table of recent resets was full."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, t, v, labels...)
	}
	if c.src.Engine != nil {
		s := c.src.Engine()
		c.collectStore(m, storeReading{allowed: s.Allowed, denied: s.Denied, refused: s.RefusedFull,
			cells: s.Cells, tuples: s.Tuples, memBytes: s.MemoryBytes, memMax: s.MaxMemoryBytes})
		m(c.published, prometheus.CounterValue, float64(s.Published))
		m(c.imported, prometheus.CounterValue, float64(s.Imported))
		m(c.resetsRefused, prometheus.CounterValue, float64(s.ResetsRefused))
	}
	if c.src.Edge != nil {
		s := c.src.Edge()
		m(c.replayPending, prometheus.GaugeValue, float64(s.ReplayPending))
		m(c.replayRetried, prometheus.CounterValue, float64(s.ReplayRetried))
		m(c.replayExpired, prometheus.CounterValue, float64(s.ReplayExpired))
		m(c.replayUnsaved, prometheus.GaugeValue, float64(s.ReplayUnsaved))
		m(c.replayUnsavedDropped, prometheus.CounterValue, float64(s.ReplayUnsavedDropped))
		m(c.replayResent, prometheus.CounterValue, float64(s.ReplayResent))
		m(c.strict, prometheus.CounterValue, float64(s.Strict))
		m(c.coldAdmitted, prometheus.CounterValue, float64(s.ColdAdmitted))
		for _, o := range s.Origins {
			up := 0.0
			if o.Reachable {
				up = 1
			}
			m(c.originUp, prometheus.GaugeValue, up, o.ID)
		}
		// An edge's cells and tuples are its local entries; it reports no memory estimate.
		c.collectStore(m, storeReading{allowed: s.Allowed, denied: s.Denied, originAllowed: s.OriginAllowed,
			originDenied: s.OriginDenied, refused: s.RefusedFull, cells: s.Entries, tuples: s.Entries, memMax: s.MaxMemoryBytes})
	}
	if c.src.Peers != nil {
		for _, p := range c.src.Peers() {
			up := 0.0
			if p.Up {
				up = 1
			}
			m(c.peerUp, prometheus.GaugeValue, up, p.Region)
			m(c.peerLag, prometheus.GaugeValue, float64(p.LagMs)/1000, p.Region)
			m(c.peerLastOK, prometheus.GaugeValue, float64(p.LastOKMs)/1000, p.Region)
			m(c.peerPublished, prometheus.CounterValue, float64(p.Published), p.Region)
			m(c.peerImported, prometheus.CounterValue, float64(p.Imported), p.Region)
		}
	}
	if c.src.Conns != nil {
		s := c.src.Conns()
		m(c.clients, prometheus.GaugeValue, float64(s.Connected))
		m(c.connections, prometheus.CounterValue, float64(s.Total))
		m(c.rejected, prometheus.CounterValue, float64(s.Rejected))
		for _, r := range []struct {
			reason string
			n      uint64
		}{{"read_timeout", s.ReadTimeouts}, {"idle_timeout", s.IdleTimeouts}, {"write_timeout", s.WriteTimeouts},
			{"handshake_timeout", s.HandshakeTimeouts}, {"query_buffer", s.QueryEvictions}, {"protocol_error", s.ProtocolErrors}} {
			m(c.closed, prometheus.CounterValue, float64(r.n), r.reason)
		}
		m(c.queryBytes, prometheus.GaugeValue, float64(s.QueryBufferBytes))
		m(c.queryLimit, prometheus.GaugeValue, float64(s.MaxQueryBuffer))
	}
	if c.src.Auth != nil {
		s := c.src.Auth()
		m(c.authFailures, prometheus.CounterValue, float64(s.Failures))
		m(c.authThrottled, prometheus.CounterValue, float64(s.Throttled))
	}
	if c.src.Commands != nil {
		for _, st := range c.src.Commands() {
			m(c.commands, prometheus.CounterValue, float64(st.Calls+st.Rejected), st.Name)
			if st.Timed == 0 {
				continue
			}
			buckets := make(map[float64]uint64, len(st.Buckets))
			for i, n := range st.Buckets[:min(len(st.Buckets), len(c.src.DurationBounds))] {
				buckets[c.src.DurationBounds[i]] = n
			}
			ch <- prometheus.MustNewConstHistogram(c.cmdDuration, st.Timed, st.TimedSeconds, buckets, st.Name)
		}
	}
	if c.src.Snapshots != nil {
		s := c.src.Snapshots()
		m(c.snapDuration, prometheus.GaugeValue, s.LastDuration.Seconds())
		m(c.snapLastSuccess, prometheus.GaugeValue, float64(s.LastSuccessMs)/1000)
		m(c.snapCells, prometheus.GaugeValue, float64(s.LastCells))
		m(c.snapFailures, prometheus.CounterValue, float64(s.Failures))
		m(c.snapBytes, prometheus.GaugeValue, float64(s.BaseBytes), "base")
		m(c.snapBytes, prometheus.GaugeValue, float64(s.LogBytes), "log")
		m(c.snapCompactions, prometheus.CounterValue, float64(s.Compactions), "ok")
		m(c.snapCompactions, prometheus.CounterValue, float64(s.CompactionFailures), "failed")
	}
}

// storeReading is what both roles report alike: decisions, refusals, what is held.
type storeReading struct {
	allowed, denied, originAllowed, originDenied, refused uint64
	cells, tuples, memBytes, memMax                       int64
}

// collectStore sends r. Decisions handed to the origin by an edge have source "origin";
// the rest were made from this process's memory.
func (c *collector) collectStore(m func(*prometheus.Desc, prometheus.ValueType, float64, ...string), r storeReading) {
	// The counters are read one by one: keep the difference from wrapping.
	m(c.decisions, prometheus.CounterValue, float64(r.allowed-min(r.originAllowed, r.allowed)), "allowed", "local")
	m(c.decisions, prometheus.CounterValue, float64(r.denied-min(r.originDenied, r.denied)), "denied", "local")
	m(c.decisions, prometheus.CounterValue, float64(r.originAllowed), "allowed", "origin")
	m(c.decisions, prometheus.CounterValue, float64(r.originDenied), "denied", "origin")
	m(c.refused, prometheus.CounterValue, float64(r.refused))
	m(c.cells, prometheus.GaugeValue, float64(r.cells))
	m(c.tuples, prometheus.GaugeValue, float64(r.tuples))
	m(c.memBytes, prometheus.GaugeValue, float64(r.memBytes))
	m(c.memMax, prometheus.GaugeValue, float64(r.memMax))
}

// Metrics is Ratchet's Prometheus registry.
type Metrics struct {
	reg       *prometheus.Registry
	originOps *prometheus.HistogramVec
	ready     atomic.Pointer[func() error] // Sources.Ready of the last Register
}

// New returns a registry holding the Go and process collectors and the histogram of an
// edge's origin calls; Register adds the readings of the running node.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		originOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratchet_origin_op_duration_seconds",
			Help:    "An edge's calls to its origins, by kind (read, replay, decide, forward) and outcome (ok, error).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"kind", "outcome"}),
	}
	m.reg.MustRegister(m.originOps, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetBuildInfo exports ratchet_build_info{version, revision, goversion, role} 1: what runs
// where, to join with the other series.
func (m *Metrics) SetBuildInfo(version, revision, role string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratchet_build_info",
		Help: "Always 1; the labels say which build runs, and in which role."},
		[]string{"version", "revision", "goversion", "role"})
	g.WithLabelValues(version, revision, runtime.Version(), role).Set(1)
	m.reg.MustRegister(g)
}

// Register adds the collector over src; src.Ready answers /readyz from then on.
func (m *Metrics) Register(src Sources) {
	m.reg.MustRegister(newCollector(src))
	if src.Ready != nil {
		m.ready.Store(&src.Ready)
	}
}

// ObserveOrigin records one origin call; it matches edge.Config.Observe.
func (m *Metrics) ObserveOrigin(kind string, err error, d time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.originOps.WithLabelValues(kind, outcome).Observe(d.Seconds())
}

// Handler serves /metrics, /healthz (liveness: "ok" while the process serves) and
// /readyz (readiness: 200 "ok", or 503 with the reason Sources.Ready gives).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if f := m.ready.Load(); f != nil {
			if err := (*f)(); err != nil {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
