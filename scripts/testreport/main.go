// Command testreport reads `go test -json` on its standard input and writes
// what a person reads of a test run: each package's result line as it
// comes, the whole output of every failed test, lines that are not JSON
// (build errors) as they are, and at the end the slowest tests. make test
// (scripts/test.sh) runs both of its passes through it.
//
//	go test -json ./... | testreport [-slowest N] [label]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	name    string
	elapsed float64
}

func main() {
	slowest := flag.Int("slowest", 12, "how many of the slowest tests to list")
	flag.Parse()
	label := strings.Join(flag.Args(), " ")
	os.Exit(report(os.Stdin, os.Stdout, label, *slowest))
}

// report copies the run to w and returns 1 when anything failed.
func report(r io.Reader, w io.Writer, label string, slowest int) int {
	outputs := map[string][]string{} // package + test → its output so far
	var done []result
	failed := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				// The package's own lines: its result, a panic, a timeout.
				if o := strings.TrimRight(e.Output, "\n"); o != "PASS" && !strings.HasPrefix(o, "=== ") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case "pass", "skip":
			// Every test and subtest: a parent of parallel subtests
			// ends before they run, in no time.
			if e.Test != "" && e.Action == "pass" {
				done = append(done, result{e.Package + " " + e.Test, e.Elapsed})
			}
			delete(outputs, key)
		case "fail":
			if e.Test == "" {
				failed++
				continue
			}
			fmt.Fprintf(w, "--- %s: %s %s (%.2fs)\n", strings.ToUpper(e.Action), e.Package, e.Test, e.Elapsed)
			fmt.Fprint(w, strings.Join(outputs[key], ""))
			delete(outputs, key)
			failed++
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testreport: %v\n", err)
		failed++
	}
	// Tests that never ended (a timeout or a crash killed the binary).
	var open []string
	for key := range outputs {
		open = append(open, key)
	}
	sort.Strings(open)
	for _, key := range open {
		if strings.HasSuffix(key, " ") {
			continue
		}
		fmt.Fprintf(w, "--- NOT ENDED: %s\n%s", key, strings.Join(outputs[key], ""))
	}
	sort.Slice(done, func(i, j int) bool { return done[i].elapsed > done[j].elapsed })
	if len(done) > slowest {
		done = done[:slowest]
	}
	if len(done) > 0 {
		fmt.Fprintf(w, "slowest tests%s:\n", map[bool]string{true: " (" + label + ")", false: ""}[label != ""])
		for _, d := range done {
			fmt.Fprintf(w, "  %8s  %s\n", time.Duration(d.elapsed*float64(time.Second)).Round(100*time.Millisecond), d.name)
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}
