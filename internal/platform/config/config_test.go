package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args []string, env map[string]string, file string) (*Serve, error) {
	t.Helper()
	var c Serve
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	NewServeFlags(fs, &c)
	if file != "" {
		p := filepath.Join(t.TempDir(), "signalbox.yaml")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"-config", p}, args...)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := Resolve(fs, func(k string) string { return env[k] }); err != nil {
		return nil, err
	}
	return &c, c.Validate()
}

func TestPrecedence(t *testing.T) {
	file := "http-addr: ':7000'\ncurri_addr: ':7001'\nlog-level: debug\nkafka-retention: 10m\n"
	env := map[string]string{"SIGNALBOX_HTTP_ADDR": ":8000", "SIGNALBOX_DATA_DIR": "/tmp/x"}
	c, err := parse(t, []string{"-data-dir", "/tmp/flag"}, env, file)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, got, want string }{
		{"flag beats env", c.DataDir, "/tmp/flag"},
		{"env beats file", c.HTTPAddr, ":8000"},
		{"file beats default (underscore key)", c.CURRIAddr, ":7001"},
		{"file", c.LogLevel, "debug"},
		{"default", c.Store, "sqlite"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: got %q want %q", tc.name, tc.got, tc.want)
		}
	}
	if c.KafkaRetention != 10*time.Minute {
		t.Errorf("duration from file: %v", c.KafkaRetention)
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte("admin-token: s3cret\n"), 0o600)
	c, err := parse(t, nil, map[string]string{"SIGNALBOX_CONFIG": p}, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "s3cret" {
		t.Fatalf("admin token from env-named file: %q", c.AdminToken)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want string
	}{
		{"unknown file key", nil, nil, "htp-addr: ':1'\n", "unknown setting htp-addr"},
		{"bad addr", []string{"-http-addr", "8080"}, nil, "", "-http-addr"},
		{"bad store", []string{"-store", "mysql://x"}, nil, "", "-store"},
		{"bad env value", nil, map[string]string{"SIGNALBOX_KAFKA_RETENTION": "soon"}, "", "SIGNALBOX_KAFKA_RETENTION"},
		{"bad topics", []string{"-kafka-topics", "SCP=0"}, nil, "", "-kafka-topics"},
		{"tls half", []string{"-curri-tls-cert", "a.pem"}, nil, "", "go together"},
		{"bad yaml", nil, nil, "http-addr: [\n", "config file"},
		{"bad log format", []string{"-log-format", "xml"}, nil, "", "-log-format"},
		{"oidc without issuer", []string{"-oidc-client-id", "sbx"}, nil, "", "need -oidc-issuer"},
		{"oidc without client", []string{"-oidc-issuer", "https://id.example.net", "-oidc-redirect-url", "https://sbx/auth/callback",
			"-oidc-admin-groups", "a"}, nil, "", "-oidc-client-id"},
		{"oidc redirect path", []string{"-oidc-issuer", "https://id.example.net", "-oidc-client-id", "sbx",
			"-oidc-redirect-url", "https://sbx/callback", "-oidc-admin-groups", "a"}, nil, "", "-oidc-redirect-url"},
		{"oidc no group", []string{"-oidc-issuer", "https://id.example.net", "-oidc-client-id", "sbx",
			"-oidc-redirect-url", "https://sbx/auth/callback"}, nil, "", "otherwise nobody may sign in"},
		{"oidc issuer not a URL", []string{"-oidc-issuer", "id.example.net", "-oidc-client-id", "sbx",
			"-oidc-redirect-url", "https://sbx/auth/callback", "-oidc-viewer-groups", "noc"}, nil, "", "-oidc-issuer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.args, tc.env, tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseTopics(t *testing.T) {
	ts, err := ParseTopics("SCP=12, NRF=6")
	if err != nil || len(ts) != 2 || ts[0] != (Topic{"SCP", 12}) || ts[1] != (Topic{"NRF", 6}) {
		t.Fatalf("%v %v", ts, err)
	}
	for _, bad := range []string{"", "SCP", "SCP=x", "SCP=1,SCP=2", "=3"} {
		if _, err := ParseTopics(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSiteFlags: the two-site settings go together, and each is checked.
func TestSiteFlags(t *testing.T) {
	ok := []string{"-site", "east", "-peer-site", "west", "-peer-url", "http://west:8080", "-peer-token", "t", "-peer-kafka-brokers", "west:9092"}
	if _, err := parse(t, ok, nil, ""); err != nil {
		t.Fatalf("a full site pair: %v", err)
	}
	// Two sites on one host, on other ports, or on another loopback
	// address: fine.
	for _, args := range [][]string{
		slicesWith(slicesWith(ok, "-http-addr", "127.0.0.1:8081"), "-peer-url", "http://127.0.0.1:8082"),
		slicesWith(slicesWith(ok, "-http-addr", "127.0.0.2:8081"), "-peer-url", "http://127.0.0.1:8081"),
	} {
		if _, err := parse(t, args, nil, ""); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-peer-url", "http://west:8080"}, "need -site"},
		{[]string{"-site", "east"}, "-peer-site"},
		{[]string{"-site", "east", "-peer-site", "east"}, "not this site's"},
		{[]string{"-site", "east side", "-peer-site", "west"}, `-site "east side"`},
		{slicesWith(ok, "-peer-url", "west:8080"), "-peer-url"},
		{slicesWith(ok, "-site-takeover", "1s"), "-site-takeover 1s"},
		{slicesWith(ok, "-director=false", ""), "needs the director"},
		{[]string{"-site", "east", "-peer-site", "west", "-peer-url", "http://west:8080", "-peer-kafka-brokers", "w:9092"}, "-peer-token"},
		// Wiring that cannot work: the peer is one of this serve's own
		// listeners (the site would ask itself, forever).
		{slicesWith(slicesWith(ok, "-kafka-addr", "127.0.0.1:44443"), "-peer-url", "http://127.0.0.1:44443"),
			`-peer-url "http://127.0.0.1:44443" names this serve's own -kafka-addr 127.0.0.1:44443`},
		{slicesWith(slicesWith(ok, "-kafka-addr", ":44443"), "-peer-url", "http://localhost:44443"), "own -kafka-addr :44443"},
		{slicesWith(slicesWith(ok, "-http-addr", "127.0.0.1:8081"), "-peer-kafka-brokers", "127.0.0.1:8081"),
			`-peer-kafka-brokers "127.0.0.1:8081" names this serve's own -http-addr`},
		{slicesWith(ok, "-peer-url", "http://127.0.0.1:8080"), "own -http-addr :8080"},
	} {
		_, err := parse(t, c.args, nil, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// slicesWith is args with flag set to v (appended; v "" for a bool flag).
func slicesWith(args []string, flag, v string) []string {
	out := append([]string(nil), args...)
	if v == "" {
		return append(out, flag)
	}
	return append(out, flag, v)
}
