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

// parseReadme returns README.md's ```sh blocks with their markers and expected output.
func parseReadme(text string) ([]readmeBlock, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var (
		blocks  []readmeBlock
		section string
	)
	// fence reads the fenced block whose opening line is i; it returns the body and the
	// index of the closing line.
	fence := func(i int) ([]string, int, error) {
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return lines[i+1 : j], j, nil
			}
		}
		return nil, 0, fmt.Errorf("line %d: fenced block is never closed", i+1)
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if m := notRunRe.FindStringSubmatch(l); m != nil {
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
				return nil, fmt.Errorf("line %d: %q is not directly followed by a ```sh block", i+1, l)
			}
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		body, end, err := fence(i)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(l) == "```sh" {
			b := readmeBlock{line: i + 1, section: section, script: strings.Join(body, "\n") + "\n"}
			if i > 0 {
				if m := notRunRe.FindStringSubmatch(lines[i-1]); m != nil {
					b.skip = m[1]
				}
			}
			// A ```text block after only blank lines is this block's output.
			k := end + 1
			for k < len(lines) && strings.TrimSpace(lines[k]) == "" {
				k++
			}
			if k < len(lines) && strings.TrimSpace(lines[k]) == "```text" {
				want, tEnd, err := fence(k)
				if err != nil {
					return nil, err
				}
				b.want = append([]string{}, want...)
				end = tEnd
			}
			blocks = append(blocks, b)
		}
		i = end
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
