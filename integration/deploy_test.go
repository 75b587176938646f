package integration

// The deployment definitions in deploy/, checked as far as this machine can: the systemd
// unit by systemd-analyze and by running its command line, the container image by running
// its build command and reading the binary and the image's user, the Kubernetes probes
// against the real binary started with the manifest's settings.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
)

// deployFile reads deploy/name.
func deployFile(t *testing.T, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unitSettings returns the Key=Value lines of a systemd unit, values of repeated keys in
// order.
func unitSettings(unit string) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestDeploySystemdUnit: deploy/ratchet.service passes systemd-analyze verify without a
// warning (its ExecStart pointed at the binary under test, since verify requires it to
// exist), keeps its state in its StateDirectory, stops with SIGTERM and time for the
// final snapshot, restarts on failure, runs unprivileged; and its command line starts a
// server.
func TestDeploySystemdUnit(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "apt-get install -y systemd")
	unit := deployFile(t, "ratchet.service")
	set := unitSettings(unit)
	one := func(k string) string {
		if len(set[k]) != 1 {
			t.Fatalf("%s: want one setting, have %q", k, set[k])
		}
		return set[k][0]
	}
	const installed = "/usr/local/bin/ratchet"
	exec0 := strings.Fields(one("ExecStart"))
	if exec0[0] != installed {
		t.Fatalf("ExecStart runs %s, want %s", exec0[0], installed)
	}
	dir, ok := "", false
	for i, a := range exec0 {
		if a == "--data-dir" && i+1 < len(exec0) {
			dir, ok = exec0[i+1], true
		}
	}
	if want := "/var/lib/" + one("StateDirectory"); !ok || dir != want {
		t.Errorf("--data-dir %q, want the StateDirectory %s", dir, want)
	}
	if one("DynamicUser") != "yes" && one("User") == "" {
		t.Error("runs as root: want DynamicUser=yes or User=")
	}
	for k, want := range map[string]string{"Restart": "on-failure", "KillSignal": "SIGTERM", "NoNewPrivileges": "yes",
		"ProtectSystem": "strict", "CapabilityBoundingSet": ""} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	if d, err := time.ParseDuration(one("TimeoutStopSec")); err != nil || d < time.Minute {
		t.Errorf("TimeoutStopSec=%s: want a minute at least for the final snapshot (%v)", one("TimeoutStopSec"), err)
	}

	path := filepath.Join(t.TempDir(), "ratchet.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart="+installed, "ExecStart="+binPath, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The unit's command line, its data directory a temporary one.
	args := append([]string(nil), exec0[1:]...)
	for i := range args {
		if args[i] == dir {
			args[i] = t.TempDir()
		}
	}
	p := start(t, args...)
	c := p.client(t, nil)
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the unit's command line: PING: %v", err)
	}
}

// dockerfileBuild returns the build command of the Dockerfile's RUN line with
// CGO_ENABLED=0 go build, and the path it writes (-o).
func dockerfileBuild(t *testing.T, dockerfile string) (cmd, out string) {
	t.Helper()
	for _, line := range strings.Split(dockerfile, "\n") {
		if c, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(c, "CGO_ENABLED=0 go build") {
			m := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(c)
			if m == nil {
				t.Fatalf("no -o in %q", c)
			}
			return c, m[1]
		}
	}
	t.Fatal("the Dockerfile has no RUN CGO_ENABLED=0 go build")
	return "", ""
}

// dockerfileEnv returns the variables the Dockerfile's ENV lines set (KEY=VALUE forms,
// continued lines joined).
func dockerfileEnv(dockerfile string) map[string]string {
	env := map[string]string{}
	joined := strings.ReplaceAll(dockerfile, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		}
	}
	return env
}

// TestDeployDockerfile: the image's build command, run as written, makes a static binary
// (no program interpreter, no shared library: it runs on distroless/static); the final
// stage is distroless/static or scratch; the user is numeric and not root; both ports are
// exposed, and the listeners bind every interface of the container.
func TestDeployDockerfile(t *testing.T) {
	df := deployFile(t, "Dockerfile")
	cmd, out := dockerfileBuild(t, df)
	bin := filepath.Join(t.TempDir(), "ratchet")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("sh", "-c", strings.Replace(cmd, "-o "+out, "-o "+bin, 1))
	build.Dir = root
	build.Env = append(os.Environ(), "REVISION=deploytest")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a program interpreter: it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if v, err := exec.Command(bin, "--version").Output(); err != nil || !strings.Contains(string(v), "revision deploytest") {
		t.Errorf("--version of the image's binary: %q (%v)", v, err)
	}

	var from, user string
	var exposed []string
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "FROM":
			from = f[1]
		case len(f) == 2 && f[0] == "USER":
			user = f[1]
		case len(f) >= 2 && f[0] == "EXPOSE":
			exposed = append(exposed, f[1:]...)
		}
	}
	if !strings.Contains(from, "distroless/static") && from != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch", from)
	}
	uid, gid, _ := strings.Cut(user, ":")
	for _, id := range []string{uid, gid} {
		if n, err := strconv.Atoi(id); err != nil || n == 0 {
			t.Errorf("USER %q: want a numeric non-root uid:gid", user)
		}
	}
	if strings.Join(exposed, " ") != "6380 9380" {
		t.Errorf("EXPOSE %v, want 6380 9380", exposed)
	}
	env := dockerfileEnv(df)
	for k, want := range map[string]string{"RATCHET_LISTEN": "0.0.0.0:6380", "RATCHET_METRICS_LISTEN": "0.0.0.0:9380"} {
		if env[k] != want {
			t.Errorf("ENV %s=%q, want %s", k, env[k], want)
		}
	}
}

// k8sContainer is what the test reads of the manifest's container.
type k8sContainer struct {
	Env []struct {
		Name      string
		Value     string
		ValueFrom any `yaml:"valueFrom"`
	}
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string
		Port int
	} `yaml:"httpGet"`
}

type k8sObject struct {
	Kind string
	Spec struct {
		Template struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []k8sContainer
			}
		}
	}
}

// TestDeployKubernetesProbes: the manifest's probes are HTTP GETs of /healthz and /readyz
// on the port its RATCHET_METRICS_LISTEN binds on every interface, as a non-root user;
// and the binary started with the manifest's settings (addresses moved to loopback ports,
// the data directory to a temporary one) answers both with 200.
func TestDeployKubernetesProbes(t *testing.T) {
	dec := yaml.NewDecoder(strings.NewReader(deployFile(t, "kubernetes.yaml")))
	var pod *k8sObject
	for {
		var o k8sObject
		if err := dec.Decode(&o); err != nil {
			break
		}
		if o.Kind == "StatefulSet" || o.Kind == "Deployment" {
			pod = &o
		}
	}
	if pod == nil || len(pod.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("kubernetes.yaml: want a StatefulSet or Deployment of one container")
	}
	if sc := pod.Spec.Template.Spec.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser == 0 {
		t.Errorf("securityContext %+v: want runAsNonRoot and a non-root runAsUser", sc)
	}
	c := pod.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "from-a-secret"
		}
		env[e.Name] = v
	}
	host, port, err := net.SplitHostPort(env["RATCHET_METRICS_LISTEN"])
	if err != nil || host != "0.0.0.0" {
		t.Fatalf("RATCHET_METRICS_LISTEN=%q: the kubelet probes the pod's address, want 0.0.0.0:PORT", env["RATCHET_METRICS_LISTEN"])
	}
	probes := map[string]k8sProbe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
	for name, want := range map[string]string{"liveness": "/healthz", "readiness": "/readyz"} {
		if got := probes[name].HTTPGet; got.Path != want || strconv.Itoa(got.Port) != port {
			t.Errorf("%s probe GET %s on port %d, want %s on %s", name, got.Path, got.Port, want, port)
		}
	}

	var vars []string
	metricsPort := freePort(t)
	for k, v := range env {
		switch k {
		case "RATCHET_LISTEN":
			v = loopback(freePort(t))
		case "RATCHET_METRICS_LISTEN":
			v = loopback(metricsPort)
		case "RATCHET_DATA_DIR":
			v = t.TempDir()
		}
		vars = append(vars, k+"="+v)
	}
	startEnv(t, vars)
	for name, p := range probes {
		url := fmt.Sprintf("http://%s%s", loopback(metricsPort), p.HTTPGet.Path)
		res, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s probe: %v", name, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s probe GET %s: %d", name, url, res.StatusCode)
		}
	}
}
