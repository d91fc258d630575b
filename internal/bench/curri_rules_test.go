package bench

import (
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// patternRegexp is the obvious translation of the bench's CUCM patterns
// (digits, X, [a-b], and the '.' discard marker, which matches nothing).
func patternRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '.':
		case 'X':
			b.WriteString("[0-9]")
		case '[':
			j := strings.IndexByte(p[i:], ']')
			b.WriteString(p[i : i+j+1])
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// kindsMatching evaluates a call against the rule set the slow, obvious
// way and names every kind of rule or list entry it matches.
func kindsMatching(rules []ruleJSON, res []*regexp.Regexp, block, allow map[string]bool, c call) map[string]int {
	hit := map[string]int{}
	for i, r := range rules {
		switch {
		case r.Match.Calling != "":
			if r.Match.Calling == c.calling {
				if strings.HasPrefix(c.calling, canaryPrefix) {
					hit["canary"]++
				} else {
					hit["exact"]++
				}
			}
		case strings.HasPrefix(r.Match.Called, "regex:"):
			if res[i].MatchString(c.called) {
				hit["regex"]++
			}
		case strings.HasPrefix(r.Match.Called, "prefix:"):
			if strings.HasPrefix(c.called, strings.TrimPrefix(r.Match.Called, "prefix:")) {
				hit["prefix"]++
			}
		case strings.HasPrefix(r.Match.Called, "pattern:"):
			if res[i].MatchString(c.called) {
				hit["pattern"]++
			}
		}
	}
	if block[c.calling] {
		hit["block_list"]++
	}
	if allow[c.calling] {
		hit["allow_list"]++
	}
	return hit
}

// Every drawn call hits exactly the kind it was drawn for and no other,
// and no_rule calls hit nothing: the decision counts by class mean what
// they say.
func TestDrawnCallsHitTheirKindOnly(t *testing.T) {
	shapes := []RuleShape{
		{Exact: 800, Regex: 200, Allow: 100, Block: 100},
		{Exact: 50, Regex: 900, Prefix: 300, Pattern: 1700, Allow: 3, Block: 7},
		{Regex: 10},
		{},
	}
	for _, shape := range shapes {
		t.Run(shape.String(), func(t *testing.T) {
			rules := buildRules(shape, 3)
			if len(rules) != shape.Rules()+1 {
				t.Fatalf("%d rules, want %d plus the canary", len(rules), shape.Rules())
			}
			res := make([]*regexp.Regexp, len(rules))
			for i, r := range rules {
				switch {
				case strings.HasPrefix(r.Match.Called, "regex:"):
					res[i] = regexp.MustCompile(strings.TrimPrefix(r.Match.Called, "regex:"))
				case strings.HasPrefix(r.Match.Called, "pattern:"):
					res[i] = patternRegexp(strings.TrimPrefix(r.Match.Called, "pattern:"))
				}
			}
			block, allow := map[string]bool{}, map[string]bool{}
			for _, e := range buildEntries(shape.Block, blockNumber, "") {
				block[e.Calling] = true
			}
			for _, e := range buildEntries(shape.Allow, allowNumber, "") {
				allow[e.Calling] = true
			}
			if len(block) != shape.Block || len(allow) != shape.Allow {
				t.Fatalf("list entries not distinct: %d block, %d allow", len(block), len(allow))
			}
			calls := drawCalls(shape, 300, newRand(1), 0)
			seen := map[int]int{}
			for _, c := range calls {
				seen[c.class]++
				hits := kindsMatching(rules, res, block, allow, c)
				want := classNames[c.class]
				if c.class == classNone {
					if len(hits) != 0 {
						t.Errorf("no_rule call %+v hits %v", c, hits)
					}
					continue
				}
				if len(hits) != 1 || hits[want] == 0 {
					t.Errorf("%s call %+v hits %v, want %s only", want, c, hits, want)
				}
			}
			have := [numClasses]int{shape.Exact, shape.Regex, shape.Prefix, shape.Pattern, shape.Block, shape.Allow, 1}
			for cl := range numClasses {
				if have[cl] > 0 && seen[cl] == 0 {
					t.Errorf("no %s calls drawn", classNames[cl])
				}
				if have[cl] == 0 && seen[cl] != 0 {
					t.Errorf("%d %s calls drawn with no such rules", seen[cl], classNames[cl])
				}
			}
		})
	}
}

func TestRulesDistinctAndCanaryPerGeneration(t *testing.T) {
	shape := RuleShape{Exact: 2000, Regex: 2000, Prefix: 2000, Pattern: 2000}
	r0, r1 := buildRules(shape, 0), buildRules(shape, 1)
	seen := map[ruleMatch]bool{}
	for _, r := range r0 {
		if seen[r.Match] {
			t.Fatalf("duplicate rule %+v", r.Match)
		}
		seen[r.Match] = true
		if r.Match.Called != "" && strings.HasPrefix(r.Match.Called, "regex:") {
			if _, err := regexp.Compile(strings.TrimPrefix(r.Match.Called, "regex:")); err != nil {
				t.Fatalf("rule %+v: %v", r.Match, err)
			}
		}
	}
	if r0[0].Match.Calling == r1[0].Match.Calling || r0[0].Action.Decision != "deny" {
		t.Errorf("canaries %+v and %+v: want distinct deny rules", r0[0], r1[0])
	}
	for i := 1; i < len(r0); i++ {
		if r0[i].Priority <= r0[i-1].Priority {
			t.Fatalf("priorities not increasing at %d", i)
		}
	}
}

func TestParseCURRIFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c curriConfig)
	}{
		{name: "defaults", check: func(t *testing.T, c curriConfig) {
			want := RuleShape{Exact: 800, Regex: 200, Allow: 100, Block: 100}
			if c.shape != want || c.conns != 32 || c.rate != 1000 || c.duration != time.Minute || c.warmup != 5*time.Second {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "rules split", args: []string{"-rules", "200"}, check: func(t *testing.T, c curriConfig) {
			if c.shape.Exact != 160 || c.shape.Regex != 40 {
				t.Errorf("shape %+v", c.shape)
			}
		}},
		{name: "explicit kinds override rules", args: []string{"-rules", "5000", "-prefix", "10", "-pattern", "20"}, check: func(t *testing.T, c curriConfig) {
			if (c.shape != RuleShape{Prefix: 10, Pattern: 20, Allow: 100, Block: 100}) {
				t.Errorf("shape %+v", c.shape)
			}
		}},
		{name: "rate max", args: []string{"-rate", "max"}, check: func(t *testing.T, c curriConfig) {
			if c.rate != 0 {
				t.Errorf("rate %d", c.rate)
			}
		}},
		{name: "loopback target", args: []string{"-target", "http://localhost:4080/curri/tollfraud", "-api", "http://[::1]:8080", "-token", "x", "-reload-every", "1s"},
			check: func(t *testing.T, c curriConfig) {
				if c.policy != "tollfraud" {
					t.Errorf("policy %q, want the one in the target URL", c.policy)
				}
			}},
		{name: "bad rate", args: []string{"-rate", "fast"}, wantErr: `-rate "fast"`},
		{name: "zero rate", args: []string{"-rate", "0"}, wantErr: `-rate "0"`},
		{name: "negative regex", args: []string{"-regex", "-1"}, wantErr: "-regex -1"},
		{name: "no conns", args: []string{"-conns", "0"}, wantErr: "-conns 0"},
		{name: "short reload", args: []string{"-reload-every", "10ms"}, wantErr: "-reload-every"},
		{name: "remote target", args: []string{"-target", "http://10.1.2.3:4080/curri/default"}, wantErr: "not a loopback address"},
		{name: "remote api", args: []string{"-target", "http://127.0.0.1:4080/curri", "-api", "http://example.com"}, wantErr: "-api"},
		{name: "remote allowed", args: []string{"-target", "http://10.1.2.3:4080/curri/default", "-allow-remote"}},
		{name: "https without -tls-dir", args: []string{"-target", "https://127.0.0.1:4080/curri"}, wantErr: "needs -tls-dir"},
		{name: "https target", args: []string{"-target", "https://127.0.0.1:4080/curri", "-tls-dir", "/etc/x", "-client-cert"},
			check: func(t *testing.T, c curriConfig) {
				if !c.tls || !c.clientCert {
					t.Errorf("tls %v client cert %v", c.tls, c.clientCert)
				}
			}},
		{name: "client cert without tls", args: []string{"-client-cert"}, wantErr: "needs -tls"},
		{name: "tls-dir without target", args: []string{"-tls", "-tls-dir", "/tmp"}, wantErr: "goes with an https:// -target"},
		{name: "ftp target", args: []string{"-target", "ftp://127.0.0.1/curri"}, wantErr: "http:// URL"},
		{name: "https api", args: []string{"-target", "http://127.0.0.1:4080/curri", "-api", "https://127.0.0.1:8080"}, wantErr: "-api"},
		{name: "short reconnect", args: []string{"-reconnect-every", "1ms"}, wantErr: "-reconnect-every"},
		{name: "api without target", args: []string{"-api", "http://127.0.0.1:8080"}, wantErr: "go with -target"},
		{name: "reload without api", args: []string{"-target", "http://127.0.0.1:4080/curri", "-reload-every", "2s"}, wantErr: "needs -api"},
		{name: "server as serve runs by default", args: nil, check: func(t *testing.T, c curriConfig) {
			if !c.mode.director || !c.mode.calls {
				t.Errorf("mode %+v: want the director and call records, as serve runs", c.mode)
			}
		}},
		{name: "curri side alone", args: []string{"-director=false"}, check: func(t *testing.T, c curriConfig) {
			if c.mode.director || c.mode.calls {
				t.Errorf("mode %+v: want neither director nor call records", c.mode)
			}
		}},
		{name: "calls without director", args: []string{"-director=false", "-calls-stream"}, wantErr: "needs the director"},
		{name: "calls-kafka without calls", args: []string{"-calls-stream=false", "-calls-kafka", "127.0.0.1:9092"}, wantErr: "-calls-kafka goes with"},
		{name: "vegeta targets without target", args: []string{"-vegeta-targets", "/tmp/t.json"}, wantErr: "goes with -target"},
		{name: "storm too big", args: []string{"-storm", "6000"}, wantErr: "-storm 6000"},
		{name: "stray argument", args: []string{"now"}, wantErr: `unexpected argument "now"`},
		{name: "unknown flag", args: []string{"-speed", "9"}, wantErr: "flag provided but not defined"},
		{name: "bad pace", args: []string{"-pace", "fast"}, wantErr: `-pace "fast"`},
		{name: "bad pace, closed loop", args: []string{"-rate", "max", "-pace", "fast"}, wantErr: `-pace "fast"`},
		{name: "pace of a closed loop", args: []string{"-rate", "max"}, check: func(t *testing.T, c curriConfig) {
			if c.pace != "" {
				t.Errorf("closed loop with pace %q", c.pace)
			}
		}},
		{name: "pace auto at 15000", args: []string{"-rate", "15000"}, check: func(t *testing.T, c curriConfig) {
			if c.pace != paceRuntime {
				t.Errorf("pace %q at 15000/s, want runtime", c.pace)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseCURRIFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	var out strings.Builder
	_, err := parseCURRIFlags([]string{"-h"}, &out)
	if err == nil {
		t.Fatal("-h: want flag.ErrHelp")
	}
	for _, f := range []string{"-target", "-api", "-token", "-server-bin", "-rules", "-exact", "-prefix", "-pattern", "-regex",
		"-allow", "-block", "-conns", "-rate", "-duration", "-warmup", "-reload-every", "-json", "-allow-remote", "intended send time"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("-h output lacks %q", f)
		}
	}
}
