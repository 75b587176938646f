package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/metrics"
	"github.com/ratchet/ratchet/persist"
	"github.com/ratchet/ratchet/server"
)

func TestScrape(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
	for range 3 {
		if _, err := eng.Limit(engine.Tuple{Workspace: "default", Namespace: "ns-secret", Key: []byte("key-secret"), WindowMs: 1000}, 2, 1); err != nil {
			t.Fatal(err)
		}
	}
	m := metrics.New()
	m.Register(metrics.Sources{Engine: eng.Stats,
		Conns: func() server.ConnStats {
			return server.ConnStats{Connected: 4, ReadTimeouts: 5, IdleTimeouts: 6, WriteTimeouts: 7, HandshakeTimeouts: 8,
				QueryEvictions: 9, ProtocolErrors: 10, QueryBufferBytes: 4096, MaxQueryBuffer: 64 << 20}
		},
		Auth: func() metrics.AuthStats { return metrics.AuthStats{Failures: 11, Throttled: 12} },
		Snapshots: func() persist.Stats {
			return persist.Stats{LastCells: 9, BaseBytes: 1000, LogBytes: 250, Compactions: 3, CompactionFailures: 1}
		}})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`ratchet_decisions_total{result="allowed",source="local"} 2`,
		`ratchet_decisions_total{result="denied",source="local"} 1`,
		"ratchet_cells 1", "ratchet_connected_clients 4", "ratchet_snapshot_cells 9",
		`ratchet_connections_closed_total{reason="read_timeout"} 5`,
		`ratchet_connections_closed_total{reason="idle_timeout"} 6`,
		`ratchet_connections_closed_total{reason="write_timeout"} 7`,
		`ratchet_connections_closed_total{reason="handshake_timeout"} 8`,
		`ratchet_connections_closed_total{reason="query_buffer"} 9`,
		`ratchet_connections_closed_total{reason="protocol_error"} 10`,
		"ratchet_query_buffer_bytes 4096", "ratchet_query_buffer_limit_bytes 6.7108864e+07",
		"ratchet_auth_failures_total 11", "ratchet_auth_throttled_total 12",
		`ratchet_snapshot_bytes{kind="base"} 1000`, `ratchet_snapshot_bytes{kind="log"} 250`,
		`ratchet_snapshot_compactions_total{outcome="ok"} 3`, `ratchet_snapshot_compactions_total{outcome="failed"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "secret") {
		t.Error("/metrics exposes a key or namespace")
	}
	if got := get(t, srv.URL+"/healthz"); got != "ok\n" {
		t.Errorf("/healthz = %q", got)
	}
	if got := get(t, srv.URL+"/readyz"); got != "ok\n" {
		t.Errorf("/readyz without a Ready source = %q", got)
	}
}

// TestReadyz: /readyz follows Sources.Ready, with the reason in a 503; /healthz stays 200.
func TestReadyz(t *testing.T) {
	var reason error
	m := metrics.New()
	m.Register(metrics.Sources{Ready: func() error { return reason }})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if code, body := fetch(t, srv.URL+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("ready: /readyz = %d %q", code, body)
	}
	reason = errors.New("4 snapshots in a row failed")
	if code, body := fetch(t, srv.URL+"/readyz"); code != 503 || body != "not ready: 4 snapshots in a row failed\n" {
		t.Errorf("not ready: /readyz = %d %q", code, body)
	}
	if code, _ := fetch(t, srv.URL+"/healthz"); code != 200 {
		t.Errorf("not ready: /healthz = %d", code)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	code, body := fetch(t, url)
	if code != 200 {
		t.Fatalf("%s: %d", url, code)
	}
	return body
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestCommandMetrics: per-command counts and sampled durations, labelled by the command
// table's names only; build info as a gauge of 1.
func TestCommandMetrics(t *testing.T) {
	m := metrics.New()
	m.SetBuildInfo("1.2.3", "abc123", "edge")
	bounds := []float64{1e-6, 1e-3}
	m.Register(metrics.Sources{DurationBounds: bounds, Commands: func() []metrics.CommandStat {
		b := make([]uint64, len(bounds)+1) // one count past the bounds: not exported, no panic
		for i := range b {
			b[i] = 3 // all three timed calls under the first bound
		}
		return []metrics.CommandStat{{Name: "unknown", Rejected: 4},
			{Name: "rl.limit", Calls: 40, Rejected: 2, Timed: 3, TimedSeconds: 0.0000015, Buckets: b}}
	}})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`ratchet_commands_total{command="unknown"} 4`,
		`ratchet_commands_total{command="rl.limit"} 42`,
		`ratchet_command_duration_seconds_bucket{command="rl.limit",le="1e-06"} 3`,
		`ratchet_command_duration_seconds_bucket{command="rl.limit",le="+Inf"} 3`,
		`ratchet_command_duration_seconds_count{command="rl.limit"} 3`,
		`ratchet_build_info{goversion="go`, `",revision="abc123",role="edge",version="1.2.3"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `ratchet_command_duration_seconds_count{command="unknown"}`) {
		t.Error("a histogram for a command never timed")
	}
}
