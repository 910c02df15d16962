// Package e2edocs runs every command the READMEs and docs give for the local stack, as a user
// would: against `make run` (weighstation-localstack, started here on free ports, its
// environment set as a user's shell would have it), each command as written but for the ports
// and the shortenings below. A command that fails, or whose output contradicts its prose — a
// benchmark the harness calls invalid (exit 3) or limited by policy (exit 4) — fails the test.
//
// Which commands: the lines of every fenced block whose info string says `local-stack`
// (```sh local-stack); in a block written as a transcript, the lines after `$ `.
package e2edocs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// documents are the files whose local-stack commands are run, each at least one, in this order:
// operations.md's impact example replays the traffic the stack has seen and fails a proposal
// that refuses, so it runs before the examples refused by design (nats.md's burst, the load
// harness as tenant anonymous).
var documents = []string{"README.md", "docs/operations.md", "docs/kafka.md", "docs/nats.md", "load-tests/README.md"}

// shortenings make long runs short: each documented duration becomes a few seconds (the
// harness's comparison phases and warm-up with it; a k6 scenario's too, 30 s by default), and a
// live view runs once.
var shortenings = []struct {
	pattern *regexp.Regexp
	with    string
}{
	{regexp.MustCompile(`--duration \S+`), "--duration 4s --warmup 1s --phase 1s"},
	{regexp.MustCompile(`-e DURATION=\S+ ?`), ""},
	{regexp.MustCompile(`\bk6 run `), "k6 run -e DURATION=5s "},
	{regexp.MustCompile(`\bweighstation top\b`), "weighstation top --once"},
}

// exits is a command's trailing comment saying which exit status it ends with, where that is
// not 0 (a client refused by design).
var exits = regexp.MustCompile(`#.*\bexits (\d+)\b`)

// following commands print until interrupted: they pass if they run for followWindow without
// failing.
var following = regexp.MustCompile(`--follow\b`)

const followWindow = 3 * time.Second

type command struct {
	file string
	line int
	text string
}

var fence = regexp.MustCompile("^```(\\S*)(.*)$")

// commands are a document's local-stack commands.
func commands(t *testing.T, root, file string) []command {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out, block []command
	in, marked := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fence.FindStringSubmatch(strings.TrimSpace(line))
		switch {
		case m != nil && !in:
			in, marked, block = true, strings.Contains(m[2], "local-stack"), nil
		case m != nil:
			in = false
			if marked {
				out = append(out, transcript(block)...)
			}
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			block = append(block, command{file, n, line})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// transcript keeps a transcript's commands (the lines after `$ `), or every line of a block
// that is none.
func transcript(block []command) []command {
	var cmds []command
	for _, c := range block {
		if rest, ok := strings.CutPrefix(c.text, "$ "); ok {
			cmds = append(cmds, command{c.file, c.line, rest})
		}
	}
	if cmds == nil {
		return block
	}
	return cmds
}

var loopback = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(\d+)\b`)

// asRun is the command as this test runs it: the stack's ports for the defaults it names, and
// shortened.
func asRun(text string, moved map[int]int) string {
	text = loopback.ReplaceAllStringFunc(text, func(hp string) string {
		m := loopback.FindStringSubmatch(hp)
		port, _ := strconv.Atoi(m[2])
		if to, ok := moved[port]; ok {
			return fmt.Sprintf("%s:%d", m[1], to)
		}
		return hp
	})
	for _, s := range shortenings {
		text = s.pattern.ReplaceAllString(text, s.with)
	}
	return strings.Join(strings.Fields(text), " ")
}

// workspace is where the commands run: the repository's files as a user's checkout has them
// (linked, so nothing the commands write lands in the repository: run/ and load-tests/out/ are
// the workspace's own), and proposed/, the policy directory docs/operations.md's impact example
// compares against the trace it records.
func workspace(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	link(t, root, dir, "run", ".git", "load-tests")
	if err := os.Mkdir(filepath.Join(dir, "load-tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	link(t, filepath.Join(root, "load-tests"), filepath.Join(dir, "load-tests"), "out")
	if err := os.CopyFS(filepath.Join(dir, "proposed"), os.DirFS(filepath.Join(root, "policies"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// link links every entry of from into to, but those named in except.
func link(t *testing.T, from, to string, except ...string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if slices.Contains(except, e.Name()) {
			continue
		}
		if err := os.Symlink(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// startLocalStack runs `make run`'s command in dir on the given ports and waits until it says
// it is up.
func startLocalStack(t *testing.T, dir string, env []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, ".tools/bin/weighstation-localstack"), "-root", dir)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "localstack.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "weighstation is up") {
				close(up)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-up:
	case <-done:
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("make run exited:\n%s", log)
	case <-time.After(4 * time.Minute):
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("make run did not come up in 4 minutes:\n%s", log)
	}
}

// Every command the docs give for the local stack runs against `make run` and succeeds.
func TestDocumentedCommandsRunAgainstTheLocalStack(t *testing.T) {
	root := os.Getenv("WEIGHSTATION_ROOT")
	if root == "" {
		root, _ = filepath.Abs("../..")
	}
	var cmds []command
	for _, file := range documents {
		found := commands(t, root, file)
		if len(found) == 0 {
			t.Errorf("%s gives no local-stack command (a ```sh local-stack block)", file)
		}
		cmds = append(cmds, found...)
	}
	ports, err := localstack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	dir := workspace(t, root)
	stackEnv := append(os.Environ(), ports.Env()...)
	startLocalStack(t, dir, stackEnv)
	env := append(stackEnv,
		"PATH="+filepath.Join(dir, ".tools/bin")+":"+os.Getenv("PATH"),
		fmt.Sprintf("WEIGHSTATION_CONTROL_PLANE=http://127.0.0.1:%d", ports.ControlPlane),
		// The k6 scenarios' defaults are make run's addresses (KAFKA_BROKERS is a count to make
		// run, a list to k6).
		fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", ports.NATS),
		fmt.Sprintf("KAFKA_BROKERS=127.0.0.1:%d", ports.Kafka),
	)
	moved := ports.Moved()
	for _, c := range cmds {
		run := asRun(c.text, moved)
		t.Run(fmt.Sprintf("%s:%d", c.file, c.line), func(t *testing.T) {
			t.Logf("$ %s", run)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			follows := following.MatchString(run)
			if follows {
				ctx, cancel = context.WithTimeout(ctx, followWindow)
				defer cancel()
			}
			cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", run)
			cmd.Dir, cmd.Env = dir, env
			started := time.Now()
			out, err := cmd.CombinedOutput()
			tail := string(out)
			if len(tail) > 4000 {
				tail = "…" + tail[len(tail)-4000:]
			}
			if follows && ctx.Err() != nil && time.Since(started) >= followWindow {
				t.Logf("ran %v until interrupted:\n%s", followWindow, tail)
				return
			}
			if cmd.ProcessState == nil {
				t.Fatalf("%s:%d `%s` did not run: %v", c.file, c.line, run, err)
			}
			want := 0
			if m := exits.FindStringSubmatch(c.text); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Fatalf("%s:%d `%s` exited %d (%v), want %d:\n%s", c.file, c.line, run, code, err, want, tail)
			}
			t.Logf("%s", tail)
		})
	}
}
