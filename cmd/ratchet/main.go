// Command ratchet is a rate-limit server that speaks the Redis protocol.
//
// main wires the packages: engine (decisions and counts; an origin's store or an edge's
// local memory), upstream (an edge's origin clients), persist (snapshots), commands (the
// command table), server (RESP connections) and metrics (Prometheus). See README.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/metrics"
	"github.com/ratchet/ratchet/persist"
	"github.com/ratchet/ratchet/replication"
	"github.com/ratchet/ratchet/scripting"
	"github.com/ratchet/ratchet/server"
	"github.com/ratchet/ratchet/upstream"
)

// version is the Ratchet release, reported by HELLO, INFO and --version.
const version = "0.1.0"

// revision identifies the build for --version. Release builds set it with
// -ldflags "-X main.revision=..."; otherwise it is the VCS revision Go stamped into the
// binary (with "-dirty" for a modified tree), or "dev".
var revision = ""

func main() {
	cfg, err := parseConfig(os.Args[1:], os.LookupEnv)
	switch {
	case errors.Is(err, errHelp):
		usage(os.Stdout)
		os.Exit(0)
	case errors.Is(err, errVersion):
		fmt.Println(versionLine())
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "ratchet:", err)
		fmt.Fprintln(os.Stderr, "ratchet: see ratchet --help")
		os.Exit(2)
	}
	log := newLogger(cfg)
	// Lines of code without a logger of its own (the standard log package's included) go
	// through the configured handler too.
	slog.SetDefault(log)
	setMemoryLimit(cfg, log)
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
	}
	if err := run(cfg, log); err != nil {
		log.Error("ratchet stopped", "error", err)
		os.Exit(1)
	}
}

// versionLine is what --version prints: "ratchet 0.1.0 (revision 1a2b3c4d5e6f, go1.26.0)".
func versionLine() string {
	return fmt.Sprintf("ratchet %s (revision %s, %s)", version, buildRevision(), runtime.Version())
}

// buildRevision is revision, else the VCS revision in the build info, else "dev".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func newLogger(cfg Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(cfg.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// node is what a role contributes to the process: a Limiter for the commands, and the
// pieces only one role has.
type node struct {
	limiter commands.Limiter
	origin  *engine.Engine // origin role: serves RL.INTERNAL.* and snapshots
	store   *persist.Store // origin role with --data-dir
	edge    *edge.Edge     // edge role
	clients []*upstream.Client
	repl    *replication.Replicator // origin role with --peer
	// stopping is set at SIGTERM/SIGINT: /readyz then says "shutting down".
	stopping atomic.Bool
}

// maxFailedSnapshots is how many snapshots in a row may fail before /readyz fails.
const maxFailedSnapshots = 3

// ready answers /readyz: why this node should not take traffic now, or nil. An origin is
// not ready while more than maxFailedSnapshots snapshots in a row failed (a kill would lose
// more than that many intervals); an edge while none of its origins answers or all refuse
// its cluster secret (it decides alone, at the degraded share).
func (n *node) ready() error {
	if n.stopping.Load() {
		return errors.New("shutting down")
	}
	if n.store != nil {
		if f := n.store.Stats().ConsecutiveFailures; f > maxFailedSnapshots {
			return fmt.Errorf("the last %d snapshots failed (see the log)", f)
		}
	}
	if n.edge == nil {
		return nil
	}
	for _, o := range n.edge.Stats().Origins {
		if o.Reachable {
			return nil
		}
	}
	var why []string
	for _, c := range n.clients {
		if c.AuthRefused() {
			why = append(why, c.Addr()+" refuses the cluster secret")
		} else {
			why = append(why, c.Addr()+" unreachable")
		}
	}
	return fmt.Errorf("no origin answers: %s", strings.Join(why, ", "))
}

func newOrigin(cfg Config, log *slog.Logger, started time.Time, sig <-chan os.Signal) (*node, error) {
	peers, err := cfg.PeerList()
	if err != nil {
		return nil, err
	}
	eng := engine.New(engine.SystemClock{}, engine.Config{MaxMemoryBytes: cfg.MaxMemory, Logger: log, Region: cfg.Region,
		Snapshots: cfg.DataDir != "", ColdShare: cfg.ColdShare, Standalone: len(peers) == 0})
	n := &node{limiter: commands.Local(eng), origin: eng}
	linkTLS, err := clusterTLS(cfg)
	if err != nil {
		return nil, err
	}
	if len(peers) > 0 {
		if n.repl, err = replication.New(replication.Config{Peers: peers, Secret: cfg.ClusterSecret, TLS: linkTLS,
			Interval: cfg.PublishInterval, Threshold: cfg.PublishThreshold, Logger: log}, eng); err != nil {
			return nil, err
		}
	}
	if cfg.DataDir == "" {
		return n, nil
	}
	store, err := persist.Open(cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	// A snapshot that does not load is moved aside (and logged) so that no save destroys
	// it, and the limiter starts empty rather than staying down.
	snap, err := store.OpenOrSetAside()
	if err == nil && snap.Lazy() {
		err = eng.AdoptShardSeed(snap.Seed) // before anything is restored
	}
	if err != nil {
		_ = snap.Close()
		_ = store.Close()
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	// The reset records before any cell (a lazy load's too): a cell is restored minus what
	// was cancelled, and what peers send back is taken minus what was cancelled.
	eng.RestoreResets(snap.Resets)
	eng.RestoreChanges(snap.Changes)
	loaded, dropped, rerr := eng.Restore(snap.Cells) // all of them: a file without a shard table
	if rerr != nil {
		log.Warn("snapshot had unreadable cells", "error", rerr)
	}
	// Counter keys expired since the save are dropped; the others are restored even
	// beyond --max-memory (new keys are then refused until room is made).
	kvLoaded, kvDropped := eng.KV().Restore(snap.KV)
	// The edge runs' replay marks, then the leases granted to them: a batch applied before
	// the restart is not applied again, and a lease a cut-off edge may still spend is
	// still counted.
	runsLoaded, runsDropped := eng.RestoreRuns(snap.Runs)
	leasesLoaded, leasesDropped, lerr := eng.RestoreLeases(snap.Leases)
	if lerr != nil {
		log.Warn("snapshot had unreadable leases", "error", lerr)
	}
	log.Info("snapshot loaded", "dir", cfg.DataDir, "cells", loaded, "dropped", dropped, "cells_in_background", snap.Lazy(),
		"counter_keys", kvLoaded, "counter_keys_dropped", kvDropped, "edge_runs", runsLoaded,
		"edge_runs_dropped", runsDropped, "leases", leasesLoaded, "leases_dropped", leasesDropped)
	log.Info("overrides loaded", "records", eng.RestoreOverrides(snap.Overrides)) // RL.OVERRIDE's, tombstones included
	eng.Overrides().Forget(snap.OverridesHorizon)                                 // after the records: see engine.OverrideHorizon
	if snap.Lazy() {
		loadCells(eng, snap, store.KeepAside, log) // in the background; the origin serves meanwhile
		// Before the listener opens, nothing asks for the threads: load on all of them
		// until --load-wait after start (a snapshot of a few million cells is then whole
		// before the first request, which would otherwise restore its own tuple from the
		// file at several times the cost: README, Scale).
		if d := cfg.LoadWait - time.Since(started); d > 0 {
			whole, s := loadAhead(eng, d, sig)
			if s != nil {
				return nil, &stoppedError{s}
			}
			log.Info("snapshot loaded before listening", "whole", whole, "after", time.Since(started).Round(time.Millisecond))
		}
	} else {
		// The decoded snapshot (not used past here) is garbage now: give its memory back
		// at once rather than as the scavenger gets to it, so that RSS after a restart is
		// the store's.
		debug.FreeOSMemory()
	}
	n.store = store
	return n, nil
}

func newEdge(cfg Config, log *slog.Logger, observe func(string, error, time.Duration)) (*node, error) {
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("boot nonce: %w", err)
	}
	run := cfg.NodeID + "/" + hex.EncodeToString(nonce[:])
	linkTLS, err := clusterTLS(cfg)
	if err != nil {
		return nil, err
	}
	n := &node{}
	ec := edge.Config{NodeRun: run, Freshness: cfg.Freshness, ReplayInterval: cfg.ReplayInterval,
		OriginTimeout: cfg.OriginTimeout, DegradedShare: cfg.DegradedShare, MaxMemoryBytes: cfg.MaxMemory,
		Logger: log, Observe: observe}
	for _, addr := range cfg.OriginList() {
		c := upstream.New(upstream.Config{Addr: addr, Secret: cfg.ClusterSecret, NodeRun: run, TLS: linkTLS, Logger: log})
		n.clients = append(n.clients, c)
		ec.Origins = append(ec.Origins, c)
		ec.OriginIDs = append(ec.OriginIDs, addr)
	}
	e, err := edge.New(engine.SystemClock{}, ec)
	if err != nil {
		return nil, err
	}
	n.limiter, n.edge = e, e
	return n, nil
}

func run(cfg Config, log *slog.Logger) error {
	started := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ignoreHangups(ctx, log)
	// From the start: a signal while the origin loads before it listens stops it there.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	met := metrics.New()
	met.SetBuildInfo(version, buildRevision(), cfg.Role)

	var n *node
	var err error
	if cfg.Role == "edge" {
		n, err = newEdge(cfg, log, met.ObserveOrigin)
	} else {
		n, err = newOrigin(cfg, log, started, sig)
	}
	var stopped *stoppedError
	if errors.As(err, &stopped) {
		// Nothing was served and the snapshot is as it was: no save to make.
		log.Info("stopped before listening, while the snapshot loaded", "signal", stopped.sig.String())
		return nil
	}
	if err != nil {
		return err
	}

	tlsCfg, err := listenerTLS(cfg)
	if err != nil {
		return err
	}
	srv := server.New(server.Config{Addr: cfg.Listen, MaxClients: cfg.MaxClients, WriteTimeout: cfg.WriteTimeout, TLS: tlsCfg, Logger: log,
		EventLoops: eventLoops(cfg), ReadTimeout: cfg.ReadTimeout, IdleTimeout: cfg.IdleTimeout,
		HandshakeTimeout: cfg.HandshakeTimeout, MaxQueryBuffer: cfg.MaxQueryBuffer,
		PushLimit: cfg.PubsubOutputLimit.Hard, PushSoftLimit: cfg.PubsubOutputLimit.Soft, PushSoftFor: cfg.PubsubOutputLimit.SoftFor})
	if err := srv.Listen(); err != nil {
		return err
	}

	var snapStats func() commands.SnapshotStats
	if n.store != nil {
		store := n.store
		snapStats = func() commands.SnapshotStats {
			s := store.Stats()
			return commands.SnapshotStats{Enabled: true, LastSuccessMs: int64(s.LastSuccessMs), LastDuration: s.LastDuration,
				LastCells: int(s.LastCells), Failures: s.Failures, BaseBytes: s.BaseBytes, LogBytes: s.LogBytes,
				Compactions: s.Compactions, CompactionFailures: s.CompactionFailures}
		}
	}
	var peerInfo func() []commands.PeerInfo
	var onImport func(string, int, int)
	if n.repl != nil {
		repl := n.repl
		onImport = func(region string, rows, _ int) { repl.Received(region, rows) }
		peerInfo = func() []commands.PeerInfo {
			var out []commands.PeerInfo
			for _, s := range repl.Stats() {
				out = append(out, commands.PeerInfo{Region: s.Region, Addr: s.Addr, Up: s.Up, LastOKMs: s.LastOKMs,
					LagMs: s.LagMs, Published: s.Published, Imported: s.Imported, ImportedMs: s.ImportedMs})
			}
			return out
		}
	}
	peerRegions := map[string]bool{}
	if peers, err := cfg.PeerList(); err == nil {
		for _, p := range peers {
			peerRegions[p.Region] = true
		}
	}
	var forward commands.Forward // an edge has its origins run the regional commands
	if n.edge != nil {
		forward = n.edge.Forward
	}
	disp := commands.New(commands.Options{
		// Decide a batch of requests at the instant it was read, where nothing waits.
		BatchTime: true, Forward: forward,
		OnImport: onImport, Peers: peerInfo, PeerRegions: peerRegions,
		Limiter: n.limiter, Origin: n.origin, ClusterSecret: cfg.ClusterSecret, Host: srv, ClusterClientCert: cfg.ClusterClientCA != "",
		RequirePass: cfg.RequirePass, ACLFile: cfg.ACLFile, Role: cfg.Role, Region: cfg.Region,
		NodeID: cfg.NodeID, MaxClients: cfg.MaxClients, Version: version, Snapshots: snapStats, Logger: log,
		Config: map[string]string{
			"save": "", "appendonly": "no", "databases": "1", "timeout": redisSeconds(cfg.IdleTimeout),
			"maxclients": fmt.Sprint(cfg.MaxClients), "port": portOf(cfg.Listen),
			"ratchet-role": cfg.Role, "ratchet-region": cfg.Region,
			"ratchet-max-memory":        fmt.Sprint(cfg.MaxMemory),
			"ratchet-snapshot-interval": cfg.SnapshotInterval.String(),
			"ratchet-read-timeout":      cfg.ReadTimeout.String(),
			"ratchet-max-query-buffer":  fmt.Sprint(cfg.MaxQueryBuffer),
			"busy-reply-threshold":      fmt.Sprint(cfg.BusyReplyThreshold.Milliseconds()),
			"lua-time-limit":            fmt.Sprint(cfg.BusyReplyThreshold.Milliseconds()),
		},
		Scripting:       scripting.Config{TimeLimit: cfg.BusyReplyThreshold},
		TrackingMaxKeys: cfg.TrackingMaxKeys,
	})

	if err := disp.LoadACL(); err != nil {
		return fmt.Errorf("--aclfile: %w", err)
	}

	var metricsSrv *http.Server
	if cfg.MetricsListen != "" {
		src := metrics.Sources{Conns: srv.ConnStats, Commands: func() []metrics.CommandStat {
			var out []metrics.CommandStat
			for _, s := range disp.CommandStats() {
				out = append(out, metrics.CommandStat{Name: s.Name, Calls: s.Calls, Rejected: s.Rejected,
					Timed: s.Timed, TimedSeconds: s.TimedSeconds, Buckets: s.Buckets})
			}
			return out
		}, DurationBounds: commands.DurationBounds, Auth: func() metrics.AuthStats { return metrics.AuthStats(disp.AuthStats()) },
			Ready: n.ready}
		if n.origin != nil {
			src.Engine = n.origin.Stats
		}
		if n.edge != nil {
			src.Edge = n.edge.Stats
		}
		if n.store != nil {
			src.Snapshots = n.store.Stats
		}
		if n.repl != nil {
			src.Peers = n.repl.Stats
		}
		met.Register(src)
		ln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("listen metrics %s: %w", cfg.MetricsListen, err)
		}
		metricsSrv = &http.Server{Handler: met.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "error", err)
			}
		}()
	}

	if cfg.PprofListen != "" {
		if err := servePprof(ctx, cfg.PprofListen, log); err != nil {
			return err
		}
	}

	background := make(chan struct{})
	// The periodic snapshots stop at SIGTERM/SIGINT, when the shutdown saves itself.
	snapCtx, stopSnapshots := context.WithCancel(ctx)
	defer stopSnapshots()
	switch {
	case n.edge != nil:
		go func() { n.edge.Run(ctx); close(background) }()
	default:
		go n.origin.RunSweeper(ctx, time.Second)
		if n.store != nil {
			go persist.Run(snapCtx, n.store, snapshotSource(n.origin, disp.Processed), n.origin.Changed, cfg.SnapshotInterval)
		}
		if n.repl != nil {
			go func() { n.repl.Run(ctx); close(background) }()
		} else {
			close(background)
		}
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(disp) }()
	log.Info("ratchet serving", "listen", srv.Addr().String(), "role", cfg.Role, "region", cfg.Region,
		"node_id", cfg.NodeID, "origins", cfg.Origins, "data_dir", cfg.DataDir, "metrics", cfg.MetricsListen, "version", version)

	var runErr error
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case runErr = <-serveErr:
	}
	n.stopping.Store(true)
	stopSnapshots()
	// An origin first saves while it still serves: if that fails (a full disk) it keeps
	// serving and retries every second, so that nothing it counts is lost, until a save
	// succeeds or a second signal exits at once (README, "Stopping").
	if n.store != nil && runErr == nil {
		if err := n.saveUntilDone(sig, "snapshot before shutdown failed; still serving, retrying (a second SIGTERM or SIGINT exits without it)", log); err != nil {
			return err
		}
	}

	// Stop accepting and close clients, then flush replays (edge) or write the final
	// snapshot (origin), which holds what was counted since the save above.
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("shutdown", "error", err)
	}
	cancel()
	<-background
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(shutCtx)
	}
	if n.edge != nil {
		if units, cells := n.edge.Undelivered(); units > 0 {
			log.Warn("accepted cost not delivered to the origin at exit; the origin will not count it",
				"units", units, "cells", cells, "entries", n.edge.Stats().ReplayPending, "origins", cfg.Origins)
		}
		n.edge.Close()
		for _, c := range n.clients {
			_ = c.Close()
		}
	}
	if n.store != nil {
		if err := n.saveUntilDone(sig, "final snapshot failed; retrying (a second SIGTERM or SIGINT exits without it)", log); err != nil {
			return err
		}
		log.Info("final snapshot written", "dir", cfg.DataDir)
		if err := n.store.Close(); err != nil {
			log.Warn("release data dir", "error", err)
		}
	}
	return runErr
}

// snapshotSource is what an origin's snapshots hold: its cells and lease grants (read in
// one pass over the tuples), counter keys and edge runs' replay marks; once one is on
// disk, edges learn which of their replay batches it holds (RunsSaved). served counts
// the commands served, which a compaction gives way to (persist.Source.Served; nil: a
// compaction is always paced).
func snapshotSource(e *engine.Engine, served func() uint64) persist.Source {
	return persist.Source{Tuples: e.Tuples, KV: e.KV().Records, Runs: e.Runs, Saved: e.RunsSaved,
		Overrides: e.Overrides().Records, OverridesHorizon: e.Overrides().Horizon, Resets: e.Resets, Changes: e.ChangeVersion,
		ShardSeed: e.ShardSeed(), Dirty: e.Dirty, DirtyCount: e.DirtyCount, Served: served, RunMarks: e.RunMarks, Loading: e.Loading} // incremental: persist/log.go
}

// redisSeconds writes a duration as Redis's CONFIG GET timeout does: whole seconds, a
// fraction rounded up so that a set timeout never reads as 0 (never).
func redisSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// eventLoops is the number of epoll loops clients are served from: --event-loops, or one
// per GOMAXPROCS. On an edge, a request that must wait on the origin is served, with the
// rest of its batch, by a goroutine, and the connection goes back to its loop.
func eventLoops(cfg Config) int {
	switch {
	case cfg.EventLoops < 0:
		return 0
	case cfg.EventLoops == 0:
		return runtime.GOMAXPROCS(0)
	}
	return cfg.EventLoops
}

// servePprof serves net/http/pprof on addr until ctx ends. It is off by default: profiles
// expose internals and cost CPU while they are taken.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen pprof %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("pprof serving", "listen", ln.Addr().String())
	return nil
}
