package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock is one ```sh block of README.md.
type readmeBlock struct {
	line    int      // line of the opening fence
	section string   // the heading above it
	script  string   // the block's text
	skip    string   // the reason of a preceding <!-- not run: reason -->, or ""
	want    []string // the lines of the ```text block that follows it; nil: not checked
}

var notRunRe = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// fenced is one fenced block of a Markdown file.
type fenced struct {
	info       string // what follows the opening ```: "sh", "text", "go", ...
	start, end int    // indexes of the opening and closing lines
	body       []string
	section    string // the heading above it
}

// fencedBlocks returns the fenced blocks of lines.
func fencedBlocks(lines []string) ([]fenced, error) {
	var (
		out     []fenced
		section string
	)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("line %d: fenced block is never closed", i+1)
		}
		out = append(out, fenced{info: strings.TrimSpace(strings.TrimPrefix(l, "```")), start: i, end: end,
			body: lines[i+1 : end], section: section})
		i = end
	}
	return out, nil
}

// parseReadme returns README.md's ```sh blocks with their markers and expected output.
func parseReadme(text string) ([]readmeBlock, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, l := range lines {
		if notRunRe.MatchString(l) && (i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh") {
			return nil, fmt.Errorf("line %d: %q is not directly followed by a ```sh block", i+1, l)
		}
	}
	fences, err := fencedBlocks(lines)
	if err != nil {
		return nil, err
	}
	var blocks []readmeBlock
	for n, f := range fences {
		if f.info != "sh" {
			continue
		}
		b := readmeBlock{line: f.start + 1, section: f.section, script: strings.Join(f.body, "\n") + "\n"}
		if f.start > 0 {
			if m := notRunRe.FindStringSubmatch(lines[f.start-1]); m != nil {
				b.skip = m[1]
			}
		}
		// A ```text block after only blank lines is this block's output.
		if n+1 < len(fences) && fences[n+1].info == "text" &&
			strings.TrimSpace(strings.Join(lines[f.end+1:fences[n+1].start], "")) == "" {
			b.want = append([]string{}, fences[n+1].body...)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// matchOutput compares printed output with the expected lines, in which `*` stands for any
// text. It returns "" when they match, else a description of the first difference.
func matchOutput(got string, want []string) string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(got, "\r\n", "\n"), "\n") {
		lines = append(lines, strings.TrimRight(l, " \t\r"))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, w := range want {
		if i >= len(lines) {
			return fmt.Sprintf("output ends after %d lines; line %d should be %q", len(lines), i+1, w)
		}
		parts := strings.Split(w, "*")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(lines[i]) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, lines[i], w)
		}
	}
	if len(lines) > len(want) {
		return fmt.Sprintf("%d more lines than expected, from line %d: %q", len(lines)-len(want), len(want)+1, lines[len(want)])
	}
	return ""
}

func TestMatchOutput(t *testing.T) {
	want := []string{"1) (integer) 1", "5) (integer) *"}
	if d := matchOutput("1) (integer) 1\r\n5) (integer) 4680070\r\n\r\n", want); d != "" {
		t.Errorf("matching output: %s", d)
	}
	for _, got := range []string{"1) (integer) 0\n5) (integer) 7\n", "1) (integer) 1\n", "1) (integer) 1\n5) (integer) 7\nmore\n"} {
		if d := matchOutput(got, want); d == "" {
			t.Errorf("output %q matched %q", got, want)
		}
	}
}

// portRe finds the ports a block uses: 127.0.0.1:PORT and redis-cli's -p PORT.
var portRe = regexp.MustCompile(`127\.0\.0\.1:(\d+)|-p (\d+)`)

// TestREADME runs README.md's ```sh blocks as written, one after the other: with bash in a
// terminal (script(1), so redis-cli prints as it does for a user), in a temporary directory
// holding a copy of the built binary as ./ratchet. A block must exit 0, print what the
// ```text block after it says, and leave no ratchet process running.
func TestREADME(t *testing.T) {
	requireTool(t, "redis-cli", installRedisTools)
	requireTool(t, "script", "apt-get install -y bsdutils")
	requireTool(t, "setsid", "apt-get install -y util-linux")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	blocks, err := parseReadme(string(text))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	runnable := 0
	for _, b := range blocks {
		if b.skip == "" {
			runnable++
		}
	}
	if runnable == 0 {
		t.Fatalf("README.md has no runnable ```sh block (%d blocks, all marked not run)", len(blocks))
	}

	// The README's ports are fixed: another run of this test on the machine (another
	// `go test` in the same tree) waits for this one.
	unlock := lockMachineWide(t, filepath.Join(os.TempDir(), "ratchet-readme-test.lock"))
	defer unlock()

	dir := t.TempDir()
	bin := filepath.Join(dir, "ratchet")
	// A copy, not a link: /proc/PID/exe then names only the processes the README started.
	copyFile(t, binPath, bin)

	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d_%s", b.line, b.section), func(t *testing.T) {
			if b.skip != "" {
				t.Skipf("marked not run: %s", b.skip)
			}
			for _, m := range portRe.FindAllStringSubmatch(b.script, -1) {
				port := m[1] + m[2]
				if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
					_ = c.Close()
					t.Fatalf("port %s, which this README block uses, is already taken by another process", port)
				}
			}
			out, err := runReadmeBlock(t, dir, b.script)
			if left := processesOf(bin); len(left) > 0 {
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("the block left %d ratchet processes running (%v); killed them", len(left), left)
			}
			if err != nil {
				t.Fatalf("block at README.md line %d: %v\n--- script ---\n%s--- output ---\n%s", b.line, err, b.script, out)
			}
			if b.want == nil {
				t.Logf("output (not checked: no ```text block follows):\n%s", out)
				return
			}
			if d := matchOutput(out, b.want); d != "" {
				t.Errorf("block at README.md line %d printed other than its ```text block: %s\n--- output ---\n%s", b.line, d, out)
			}
		})
	}
}

// runReadmeBlock runs script with bash -e in a terminal, in dir, for at most 90 s. The
// block's bash runs in a session of its own (setsid), so that processes it leaves behind are
// not ended by the terminal's hangup and the caller can find them.
func runReadmeBlock(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	path := filepath.Join(dir, "block.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "script", "-qec", "setsid -w bash -e block.sh", "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "TERM=dumb")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after 90 s: %w", err)
	}
	return out.String(), err
}

// processesOf returns the ids of running processes whose executable is bin.
func processesOf(bin string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}

// lockMachineWide takes an exclusive flock on path, waiting up to 5 minutes for another
// holder; the returned function releases it.
func lockMachineWide(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("open lock %s: %v", path, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			t.Fatalf("lock %s still held by another run after 5 minutes: %v", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		t.Fatalf("copy %s: %v", src, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeClientSnippets checks that the README's "Clients" section quotes the examples
// that the tests run: each ```go block is a part of integration/clients_test.go, each
// ```python and ```js block (there, or in another section: the two-limit example is under
// "Several limits in one call") is the whole file of clients/ its first line names, and
// every example file of clients/ is quoted.
func TestReadmeClientSnippets(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("read %s: %v", rel, err)
		}
		return string(b)
	}
	goSource := read("integration/clients_test.go")
	fences, err := fencedBlocks(strings.Split(read("README.md"), "\n"))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	fileRe := regexp.MustCompile(`^(?:#|//) (clients/[\w.-]+)`)
	quoted := map[string]bool{}
	goBlocks := 0
	for _, f := range fences {
		text := strings.Join(f.body, "\n") + "\n"
		switch f.info {
		case "go":
			if f.section != "Clients" {
				continue
			}
			goBlocks++
			if !strings.Contains(goSource, text) {
				t.Errorf("the go block at README.md line %d is not in integration/clients_test.go as it is:\n%s", f.start+1, text)
			}
		case "python", "js":
			m := fileRe.FindStringSubmatch(f.body[0])
			if m == nil {
				t.Errorf("the %s block at README.md line %d does not begin with a comment naming its file in clients/", f.info, f.start+1)
				continue
			}
			quoted[m[1]] = true
			if file := read(m[1]); file != text {
				t.Errorf("the %s block at README.md line %d differs from %s", f.info, f.start+1, m[1])
			}
		}
	}
	if goBlocks != 2 {
		t.Errorf("the Clients section has %d go blocks, want 2 (go-redis and rueidis)", goBlocks)
	}
	examples, _ := filepath.Glob(filepath.Join(root, "clients", "*.[jp][sy]"))
	if len(examples) == 0 {
		t.Fatal("clients/ has no example files")
	}
	for _, e := range examples {
		if rel := "clients/" + filepath.Base(e); !quoted[rel] {
			t.Errorf("%s is not quoted in the README", rel)
		}
	}
}
