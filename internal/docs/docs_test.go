package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// An example is a fenced ```sh block. An HTML comment right before it (blank
// lines between are fine) says how it runs:
//
//	<!-- example: skip REASON -->       not run (a real CUCM, another host, make test itself)
//	<!-- example: background -->        run in the background until the file is done (a probe, a server)
//	<!-- example: expect TEXT -->       its output must contain TEXT (one directive per text)
//	<!-- example: error-ok -->          an API error in its output is what it shows
//
// Every other block runs as it is, after the ones before it in the same
// shell (variables carry over), in a directory holding bin/signalbox and
// the repository's examples/, beside a serve started with its defaults and
// its data in ./signalbox-data. A block fails when a command in it fails,
// when its output holds an API error ({"error":...}) unless marked
// error-ok, or when an expected text is missing.
type example struct {
	file, text string
	line       int
	skip, bg   bool
	errorOK    bool
	expect     []string
}

var directive = regexp.MustCompile(`^<!--\s*example:\s*(skip|background|expect|error-ok)\b\s*(.*?)\s*-->$`)

// examples reads path's sh blocks with their directives.
func examples(t *testing.T, path string) []example {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []example
		pending example
		in      *example
		body    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case in != nil && strings.TrimSpace(line) == "```":
			in.text = body.String()
			out = append(out, *in)
			in, pending = nil, example{}
		case in != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(line, "```sh"):
			e := pending
			e.file, e.line = filepath.Base(path), n
			in = &e
			body.Reset()
		case strings.HasPrefix(line, "```"):
			// another language's block: skip to its end
			for sc.Scan() && strings.TrimSpace(sc.Text()) != "```" {
				n++
			}
			n++
			pending = example{}
		default:
			if m := directive.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				switch m[1] {
				case "skip":
					pending.skip = true
				case "background":
					pending.bg = true
				case "error-ok":
					pending.errorOK = true
				case "expect":
					pending.expect = append(pending.expect, strings.Trim(m[2], `'`))
				}
			} else if strings.TrimSpace(line) != "" {
				pending = example{}
			}
		}
	}
	return out
}

// TestExamples runs each document's examples against a serve of its own.
func TestExamples(t *testing.T) {
	testkit.Outside(t, "the examples use curl, kcat and tshark against a real serve")
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ex := examples(t, f)
			if len(ex) == 0 {
				t.Logf("%s has no shell examples", filepath.Base(f))
				return
			}
			runExamples(t, root, ex)
		})
	}
}

// runExamples starts a serve with its defaults and runs ex in order in one
// shell.
func runExamples(t *testing.T, root string, ex []example) {
	for _, tool := range []string{"curl", "kcat", "tshark"} {
		testkit.Tool(t, tool)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testkit.Binary(t), filepath.Join(dir, "bin", "signalbox")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	// The examples use serve's default ports and the probe's: another
	// process on one of them would answer in its place.
	for _, addr := range []string{":8080", ":4080", ":9092", ":8090", "127.0.0.1:9000"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %s, which the examples use, is taken by another process: %v", addr, err)
		}
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	serve := testkit.CommandContext(ctx, filepath.Join(dir, "bin", "signalbox"), "serve", "-data-dir", "signalbox-data")
	serve.Dir = dir
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(os.Interrupt)
		serve.Wait()
		if t.Failed() {
			t.Logf("serve's log (last 4000 bytes):\n%s", serveLog.Bytes()[max(0, serveLog.Len()-4000):])
		}
	}()
	testkit.WaitFor(t, 60*time.Second, "serve ready on its default ports", func() bool {
		r, err := http.Get("http://127.0.0.1:8080/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})

	var script strings.Builder
	script.WriteString("set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n")
	var run []example
	for _, e := range ex {
		if e.skip {
			continue
		}
		fmt.Fprintf(&script, "echo '@@example %d'\n", len(run))
		if e.bg {
			fmt.Fprintf(&script, "(\n%s) > background-%d.log 2>&1 &\nsleep 1\n", e.text, len(run))
		} else {
			script.WriteString(e.text)
		}
		run = append(run, e)
	}
	sh := testkit.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = dir
	out, err := sh.CombinedOutput()
	parts := strings.Split(string(out), "@@example ")
	outputs := make([]string, len(run))
	last := -1
	for _, p := range parts[1:] {
		var i int
		if _, serr := fmt.Sscanf(p, "%d", &i); serr == nil && i < len(run) {
			_, rest, _ := strings.Cut(p, "\n")
			outputs[i], last = rest, i
		}
	}
	if err != nil {
		e := example{file: "?"}
		if last >= 0 {
			e = run[last]
		}
		t.Fatalf("%s:%d: the example stopped: %v\n%s\noutput:\n%s", e.file, e.line, err, e.text, outputs[max(last, 0)])
	}
	for i, e := range run {
		o := outputs[i]
		if !e.errorOK && strings.Contains(o, `{"error":`) {
			t.Errorf("%s:%d: the API answered an error:\n%s\noutput:\n%s", e.file, e.line, e.text, o)
		}
		for _, want := range e.expect {
			if !strings.Contains(o, want) {
				t.Errorf("%s:%d: the output lacks %q:\n%s\noutput:\n%s", e.file, e.line, want, e.text, o)
			}
		}
	}
	t.Logf("%d examples run, %d not run (marked skip)", len(run), len(ex)-len(run))
}
