package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/metrics"
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
		Conns:     func() commands.ConnStats { return commands.ConnStats{Connected: 4} },
		Snapshots: func() commands.SnapshotStats { return commands.SnapshotStats{LastCells: 9} }})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`ratchet_decisions_total{result="allowed",source="local"} 2`,
		`ratchet_decisions_total{result="denied",source="local"} 1`,
		"ratchet_cells 1", "ratchet_connected_clients 4", "ratchet_snapshot_cells 9",
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
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("%s: %d", url, res.StatusCode)
	}
	return string(b)
}
