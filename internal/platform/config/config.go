// Package config holds signalbox's bootstrap settings: listener addresses,
// the store DSN, TLS files, Kafka connection. Each setting is a flag, also
// settable by env SIGNALBOX_<FLAG_NAME> and by a YAML file given with
// -config; flags win over env, env over file. Everything else (policies,
// rules, feeds) lives in the store and is changed through the API.
package config

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Serve is the configuration of `signalbox serve`.
type Serve struct {
	ConfigFile string

	DataDir    string
	HTTPAddr   string
	Store      string
	AdminToken string
	LogFormat  string
	LogLevel   string

	CURRIAddr     string
	CURRITLSCert  string
	CURRITLSKey   string
	CURRIClientCA string
	CURRIAliases  string
	// Who may ask: source networks, client-certificate names, connections
	// per client address (curri.Access).
	CURRIAllowFrom         string
	CURRIClientNames       string
	CURRIMaxConnsPerClient int

	CallLogMaxAge  time.Duration
	CallLogMaxRows int64
	// MaskNumbers hides all but the last this many digits of the call
	// numbers that leave the node (CALLS, webhooks) and, but for the roles
	// in MaskNumbersReveal, of the call log's answers; 0: off.
	MaskNumbers       int
	MaskNumbersReveal string

	// Console sign-in through an OpenID Connect provider (package signin).
	OIDCIssuer        string
	OIDCClientID      string
	OIDCClientSecret  string
	OIDCRedirectURL   string
	OIDCScopes        string
	OIDCRolesClaim    string
	OIDCAdminGroups   string
	OIDCTracerGroups  string
	OIDCViewerGroups  string
	OIDCSessionMaxAge time.Duration
	OIDCProviderName  string
	OIDCCA            string

	RateLimitSync time.Duration
	NodeName      string
	AuditMaxAge   time.Duration

	Director             bool
	KafkaAddr            string
	KafkaAdvertisedAddr  string
	KafkaBrokers         string
	KafkaCreateTopics    bool
	KafkaTopics          string
	KafkaRetention       time.Duration
	KafkaRetentionBytes  int64
	KafkaMaxMessageBytes int
	KafkaMaxRequestBytes int
	KafkaAllowAnonymous  bool
	KafkaLocalAnonymous  bool
	KafkaSASLMechanism   string
	KafkaUsername        string
	KafkaPassword        string
	KafkaTLS             bool
	KafkaTLSCert         string
	KafkaTLSKey          string
	KafkaTLSCA           string
	KafkaTLSInsecure     bool

	FeedSoloReads       bool
	CallsTopic          string
	TraceMax            int
	TraceMaxMinutes     int
	TraceMaxBytes       int64
	TraceRetention      time.Duration
	CaptureMax          int
	XDRStoreMaxAge      time.Duration
	XDRStoreMaxBytes    int64
	XDRStoreCodec       string
	KafkaSessionTimeout time.Duration

	IngestAddr    string
	IngestTLSCert string
	IngestTLSKey  string

	// Two-site redundancy (internal/datadirector/site): this site's name, the peer
	// site's API and Kafka, and how long the peer may be silent before this
	// site runs its feeds.
	Site             string
	PeerSite         string
	PeerURL          string
	PeerToken        string
	PeerKafkaBrokers string
	SiteTakeover     time.Duration

	ShutdownTimeout time.Duration
	PprofAddr       string

	AlarmFeedDisconnect   time.Duration
	AlarmFeedLag          int64
	AlarmFeedLatency      time.Duration
	AlarmCURRIErrorRatio  float64
	AlarmCURRILatency     time.Duration
	AlarmKeepaliveTimeout time.Duration
	AlarmXDRFailureRatio  float64
	AlarmXDRLatency       time.Duration
	AlarmKPIWindow        time.Duration

	SNMPManagers     string
	SNMPVersion      string
	SNMPCommunity    string
	SNMPUser         string
	SNMPAuthProtocol string
	SNMPAuthPassword string
	SNMPPrivProtocol string
	SNMPPrivPassword string
	SNMPEngineID     string
}

// NewServeFlags registers every serve flag on fs, bound to cfg, with its
// default.
func NewServeFlags(fs *flag.FlagSet, c *Serve) {
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file of settings (keys are flag names); flags and SIGNALBOX_* env win over it")
	fs.StringVar(&c.DataDir, "data-dir", "./signalbox-data", "directory for the SQLite store, the embedded Kafka log and the admin token (created if missing)")
	fs.StringVar(&c.HTTPAddr, "http-addr", ":8080", "listen address of the REST API, console, /metrics, /healthz and /readyz")
	fs.StringVar(&c.Store, "store", "sqlite", "config store: 'sqlite' (a file in the data dir) or a postgres:// DSN")
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token of the API's admin; if unset, one is generated on first start and kept in the data dir")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")

	fs.StringVar(&c.CURRIAddr, "curri-addr", ":4080", "listen address of the CURRI (External Call Control) server")
	fs.StringVar(&c.CURRITLSCert, "curri-tls-cert", "", "PEM certificate: serve CURRI over HTTPS (with -curri-tls-key)")
	fs.StringVar(&c.CURRITLSKey, "curri-tls-key", "", "PEM private key for -curri-tls-cert")
	fs.StringVar(&c.CURRIClientCA, "curri-client-ca", "", "PEM CA bundle: require CUCM client certificates signed by it (HTTPS only)")
	fs.StringVar(&c.CURRIAllowFrom, "curri-allow-from", "", "CURRI clients' source networks, comma-separated (10.1.0.0/24,192.0.2.7); others are refused at connect (403, or closed on HTTPS); empty: any")
	fs.StringVar(&c.CURRIClientNames, "curri-client-names", "", "client-certificate names accepted, comma-separated (a CN, DNS or IP SAN, URI SAN; case ignored): others get a TLS bad_certificate alert; needs -curri-client-ca; empty: any the CA signed")
	fs.IntVar(&c.CURRIMaxConnsPerClient, "curri-max-conns-per-client", 0, "connections one client address may hold at once (CUCM opens at most 20 per node: its ECC profile's maximum); past it a connection is refused (503, or closed on HTTPS); 0: no bound")
	fs.StringVar(&c.CURRIAliases, "curri-aliases", "", "extra CURRI paths for profiles written for other servers: PATH=POLICY,... (e.g. /pdp/AuthorizationEndPoint=default); case and a trailing slash are ignored")

	fs.DurationVar(&c.RateLimitSync, "rate-limit-sync", 100*time.Millisecond, "with a PostgreSQL store: how often the nodes exchange their rate-limit counts through it, so that a limit holds for the cluster (0: each node limits on its own)")
	fs.StringVar(&c.NodeName, "node-name", "", "this node's name among the nodes sharing a store, in call records, traces and alarms (default: the host name)")
	fs.DurationVar(&c.AuditMaxAge, "audit-max-age", 365*24*time.Hour, "audit log retention: changes made through the API are kept this long")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "OpenID Connect provider's issuer URL: people sign in to the console through it (with -oidc-client-id, -oidc-redirect-url and a group mapped to a role); empty: API tokens only")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", "", "client id of signalbox as registered at the OpenID Connect provider")
	fs.StringVar(&c.OIDCClientSecret, "oidc-client-secret", "", "client secret at the provider (better in SIGNALBOX_OIDC_CLIENT_SECRET); empty for a public client, which PKCE protects")
	fs.StringVar(&c.OIDCRedirectURL, "oidc-redirect-url", "", "this console's callback as registered at the provider: https://<the console's host>/auth/callback (https makes the session cookie Secure)")
	fs.StringVar(&c.OIDCScopes, "oidc-scopes", "openid,profile,email", "scopes asked of the provider, comma-separated (add groups where the provider needs it for the groups claim)")
	fs.StringVar(&c.OIDCRolesClaim, "oidc-roles-claim", "groups", "the ID-token or userinfo claim holding a person's groups (a string or a list; a dotted path reaches into objects: realm_access.roles)")
	fs.StringVar(&c.OIDCAdminGroups, "oidc-admin-groups", "", "groups whose members sign in as admin, comma-separated")
	fs.StringVar(&c.OIDCTracerGroups, "oidc-tracer-groups", "", "groups whose members sign in as tracer, comma-separated")
	fs.StringVar(&c.OIDCViewerGroups, "oidc-viewer-groups", "", "groups whose members sign in as viewer, comma-separated (a person in several groups gets the widest role)")
	fs.DurationVar(&c.OIDCSessionMaxAge, "oidc-session-max-age", 8*time.Hour, "how long a console sign-in lasts before the person signs in again")
	fs.StringVar(&c.OIDCProviderName, "oidc-provider-name", "single sign-on", "the provider's name on the console's sign-in button")
	fs.StringVar(&c.OIDCCA, "oidc-ca", "", "PEM CA bundle for the provider's TLS certificate (a private CA); empty: the system's roots")
	fs.IntVar(&c.MaskNumbers, "mask-numbers", 0, "hide all but the last N digits of calling and called numbers in what leaves the node (the CALLS stream and what feeds take from it, webhook payloads), in the call log's API and console answers (9725550101 -> xxxxxx0101), and of the GPSI in the xdr feeds' records; 0: off")
	fs.StringVar(&c.MaskNumbersReveal, "mask-numbers-reveal", "admin", "with -mask-numbers: the API roles that see the call log's numbers whole, comma-separated (admin, viewer, tracer; empty: none)")
	fs.DurationVar(&c.CallLogMaxAge, "calllog-max-age", 7*24*time.Hour, "call log retention by age")
	fs.Int64Var(&c.CallLogMaxRows, "calllog-max-rows", 10_000_000, "call log retention by record count (a logged call takes ~30 bytes on disk)")

	directorFlags(fs, c)

	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on finishing in-flight work at SIGINT/SIGTERM")
	fs.StringVar(&c.PprofAddr, "pprof-addr", "", "serve Go's net/http/pprof profiles on this address (e.g. 127.0.0.1:6060); off when empty")

	fs.DurationVar(&c.AlarmFeedDisconnect, "alarm-feed-disconnect", 30*time.Second, "alarm when a feed has been disconnected this long")
	fs.Int64Var(&c.AlarmFeedLag, "alarm-feed-lag", 100_000, "alarm when a feed's consumer lag exceeds this many copies")
	fs.DurationVar(&c.AlarmFeedLatency, "alarm-feed-latency", time.Second, "alarm when a feed's p99 end-to-end latency exceeds this")
	fs.Float64Var(&c.AlarmCURRIErrorRatio, "alarm-curri-error-ratio", 0.05, "alarm when this fraction of CURRI requests in a minute are answered Indeterminate")
	fs.DurationVar(&c.AlarmCURRILatency, "alarm-curri-latency", 50*time.Millisecond, "alarm when the slowest CURRI answers in a minute exceed this (Cisco: >50 ms costs CUCM 15% of its call rate)")
	fs.DurationVar(&c.AlarmKeepaliveTimeout, "alarm-keepalive-timeout", 5*time.Minute, "alarm when a policy with traffic has had no CUCM HEAD keepalive for this long")
	fs.Float64Var(&c.AlarmXDRFailureRatio, "alarm-xdr-failure-ratio", 0.1, "alarm when this fraction of a service's transactions (xdr feeds) fail (4xx, 5xx, no response) over -alarm-kpi-window, with at least 20 of them")
	fs.DurationVar(&c.AlarmXDRLatency, "alarm-xdr-latency", time.Second, "alarm when a service's p99 transaction latency (xdr feeds) passes this over -alarm-kpi-window")
	fs.DurationVar(&c.AlarmKPIWindow, "alarm-kpi-window", time.Minute, "window of the service KPI alarms (xdr failure ratio and latency)")

	fs.StringVar(&c.SNMPManagers, "snmp-managers", "", "send alarms raised and cleared as SNMP notifications (SIGNALBOX-MIB) to these managers: host[:port],... (port 162 by default); off when empty")
	fs.StringVar(&c.SNMPVersion, "snmp-version", "2c", "SNMP version of the notifications: 2c or 3")
	fs.StringVar(&c.SNMPCommunity, "snmp-community", "public", "SNMPv2c community")
	fs.StringVar(&c.SNMPUser, "snmp-user", "", "SNMPv3 USM user name")
	fs.StringVar(&c.SNMPAuthProtocol, "snmp-auth-protocol", "SHA-256", "SNMPv3 authentication: MD5, SHA, SHA-224, SHA-256, SHA-384 or SHA-512 (used when -snmp-auth-password is set)")
	fs.StringVar(&c.SNMPAuthPassword, "snmp-auth-password", "", "SNMPv3 authentication password (at least 8 characters); unset: noAuthNoPriv")
	fs.StringVar(&c.SNMPPrivProtocol, "snmp-priv-protocol", "AES", "SNMPv3 privacy: DES, AES, AES-192 or AES-256 (used when -snmp-priv-password is set)")
	fs.StringVar(&c.SNMPPrivPassword, "snmp-priv-password", "", "SNMPv3 privacy password (at least 8 characters); set: authPriv")
	fs.StringVar(&c.SNMPEngineID, "snmp-engine-id", "", "SNMPv3 engine ID of this node in hex, as the manager's createUser -e names it (default: 80007ed904 followed by the node name in hex)")
}

var (
	validTopic = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	validSite  = regexp.MustCompile(`^[A-Za-z0-9-]{1,32}$`)
)

// EnvName is the environment variable for a flag: SIGNALBOX_HTTP_ADDR for
// http-addr.
func EnvName(flagName string) string {
	return "SIGNALBOX_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Resolve applies env and file values to flags not given on the command line
// (flags > env > file > default), then validates. fs must already be parsed.
// getenv is os.Getenv in production.
func Resolve(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// The config file itself may come from env.
	if !set["config"] {
		if v := getenv(EnvName("config")); v != "" {
			if err := fs.Set("config", v); err != nil {
				return err
			}
		}
	}
	var file map[string]any
	if path := fs.Lookup("config").Value.String(); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return fmt.Errorf("config file %s: %w", path, err)
		}
		var unknown []string
		for k := range file {
			if fs.Lookup(normKey(k)) == nil || normKey(k) == "config" {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return fmt.Errorf("config file %s: unknown setting %s", path, strings.Join(unknown, ", "))
		}
	}
	fileVals := map[string]any{}
	for k, v := range file {
		fileVals[normKey(k)] = v
	}

	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "config" {
			return
		}
		if v, ok := lookupEnv(getenv, EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("env %s: %w", EnvName(f.Name), err))
			}
			return
		}
		if v, ok := fileVals[f.Name]; ok {
			if err := fs.Set(f.Name, yamlScalar(v)); err != nil {
				errs = append(errs, fmt.Errorf("config file: %s: %w", f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func normKey(k string) string { return strings.ReplaceAll(strings.ToLower(k), "_", "-") }

func yamlScalar(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + fmt.Sprint(x[k])
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(v)
	}
}

// Validate checks settings that flag parsing cannot.
func (c *Serve) Validate() error {
	var errs []error
	for name, addr := range map[string]string{"http-addr": c.HTTPAddr, "curri-addr": c.CURRIAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("-%s %q: %v", name, addr, err))
		}
	}
	if c.IngestAddr != "" {
		if _, _, err := net.SplitHostPort(c.IngestAddr); err != nil {
			errs = append(errs, fmt.Errorf("-ingest-addr %q: %v", c.IngestAddr, err))
		}
	}
	if c.Store != "sqlite" && !strings.HasPrefix(c.Store, "sqlite:") &&
		!strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		errs = append(errs, fmt.Errorf("-store %q: want sqlite, sqlite:/path/file.db or a postgres:// DSN", c.Store))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format %q: want text or json", c.LogFormat))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "warning", "error":
	default:
		errs = append(errs, fmt.Errorf("-log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if (c.CURRITLSCert == "") != (c.CURRITLSKey == "") {
		errs = append(errs, errors.New("-curri-tls-cert and -curri-tls-key go together"))
	}
	if c.CURRIClientCA != "" && c.CURRITLSCert == "" {
		errs = append(errs, errors.New("-curri-client-ca needs -curri-tls-cert and -curri-tls-key"))
	}
	if c.CURRIClientNames != "" && c.CURRIClientCA == "" {
		errs = append(errs, errors.New("-curri-client-names needs -curri-client-ca (and TLS): the names are read from verified client certificates"))
	}
	if _, err := ParseNetworks(c.CURRIAllowFrom); err != nil {
		errs = append(errs, fmt.Errorf("-curri-allow-from: %w", err))
	}
	if c.KafkaMaxMessageBytes < 1024 || c.KafkaMaxMessageBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("-kafka-max-message-bytes %d: want 1024 to %d", c.KafkaMaxMessageBytes, 1<<30))
	}
	if c.KafkaMaxRequestBytes < c.KafkaMaxMessageBytes || c.KafkaMaxRequestBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("-kafka-max-request-bytes %d: want from -kafka-max-message-bytes (%d: a request carries a record batch) to %d", c.KafkaMaxRequestBytes, c.KafkaMaxMessageBytes, 1<<30))
	}
	if c.CaptureMax < 0 {
		errs = append(errs, fmt.Errorf("-capture-max %d: want 0 (no live captures) or more", c.CaptureMax))
	}
	if c.MaskNumbers < 0 {
		errs = append(errs, fmt.Errorf("-mask-numbers %d: want 0 (off) or the digits to keep", c.MaskNumbers))
	}
	for _, r := range SplitList(c.MaskNumbersReveal) {
		if r != "admin" && r != "viewer" && r != "tracer" {
			errs = append(errs, fmt.Errorf("-mask-numbers-reveal: %q is not a role (admin, viewer, tracer)", r))
		}
	}
	errs = append(errs, c.validateOIDC()...)
	if c.CURRIMaxConnsPerClient < 0 {
		errs = append(errs, fmt.Errorf("-curri-max-conns-per-client %d: want 0 (no bound) or more", c.CURRIMaxConnsPerClient))
	}
	if (c.IngestTLSCert == "") != (c.IngestTLSKey == "") {
		errs = append(errs, errors.New("-ingest-tls-cert and -ingest-tls-key go together"))
	}
	if _, err := ParseAliases(c.CURRIAliases); err != nil {
		errs = append(errs, fmt.Errorf("-curri-aliases: %w", err))
	}
	if topics, err := ParseTopics(c.KafkaTopics); err != nil {
		errs = append(errs, fmt.Errorf("-kafka-topics: %w", err))
	} else if c.CallsTopic != "" {
		for _, t := range topics {
			if t.Name == c.CallsTopic {
				errs = append(errs, fmt.Errorf("-calls-topic %q is also an NF topic of -kafka-topics; call records need a topic of their own", c.CallsTopic))
			}
		}
		if c.CallsTopic == "signalbox.dlq" || !validTopic.MatchString(c.CallsTopic) {
			errs = append(errs, fmt.Errorf("-calls-topic %q: want a Kafka topic name (letters, digits, . _ -), not the dead-letter topic", c.CallsTopic))
		}
	}
	switch c.KafkaSASLMechanism {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		errs = append(errs, fmt.Errorf("-kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.KafkaSASLMechanism))
	}
	if c.KafkaSASLMechanism != "" && c.KafkaUsername == "" {
		errs = append(errs, errors.New("-kafka-sasl-mechanism needs -kafka-username and -kafka-password"))
	}
	if c.KafkaTLS && c.KafkaBrokers == "" && (c.KafkaTLSCert == "" || c.KafkaTLSKey == "") {
		errs = append(errs, errors.New("-kafka-tls on the embedded broker needs -kafka-tls-cert and -kafka-tls-key"))
	}
	if c.KafkaRetention <= 0 {
		errs = append(errs, errors.New("-kafka-retention must be positive"))
	}
	if c.KafkaSessionTimeout < time.Second || c.KafkaSessionTimeout > 30*time.Minute {
		errs = append(errs, fmt.Errorf("-kafka-session-timeout %s: want 1s to 30m (and within the cluster's group session limits)", c.KafkaSessionTimeout))
	}
	if c.RateLimitSync != 0 && (c.RateLimitSync < 10*time.Millisecond || c.RateLimitSync > time.Minute) {
		errs = append(errs, fmt.Errorf("-rate-limit-sync %s: want 0 (off) or 10ms to 1m", c.RateLimitSync))
	}
	if c.AuditMaxAge < 0 {
		errs = append(errs, fmt.Errorf("-audit-max-age %s: must not be negative (0 keeps the audit log forever)", c.AuditMaxAge))
	}
	errs = append(errs, c.validateSite()...)
	if c.CallLogMaxAge <= 0 || c.CallLogMaxRows <= 0 {
		errs = append(errs, errors.New("-calllog-max-age and -calllog-max-rows must be positive"))
	}
	return errors.Join(errs...)
}

func (c *Serve) validateOIDC() []error {
	if c.OIDCIssuer == "" {
		if c.OIDCClientID != "" || c.OIDCRedirectURL != "" || c.OIDCAdminGroups != "" || c.OIDCTracerGroups != "" || c.OIDCViewerGroups != "" {
			return []error{errors.New("-oidc-client-id, -oidc-redirect-url and -oidc-*-groups need -oidc-issuer")}
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.OIDCIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("-oidc-issuer %q: want the provider's https:// issuer URL", c.OIDCIssuer))
	}
	if c.OIDCClientID == "" {
		errs = append(errs, errors.New("-oidc-issuer needs -oidc-client-id"))
	}
	if u, err := url.Parse(c.OIDCRedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "/auth/callback" {
		errs = append(errs, fmt.Errorf("-oidc-redirect-url %q: want http(s)://<this console's host>/auth/callback, as registered at the provider", c.OIDCRedirectURL))
	}
	if c.OIDCAdminGroups == "" && c.OIDCTracerGroups == "" && c.OIDCViewerGroups == "" {
		errs = append(errs, errors.New("-oidc-issuer needs at least one of -oidc-admin-groups, -oidc-tracer-groups, -oidc-viewer-groups: otherwise nobody may sign in"))
	}
	if c.OIDCSessionMaxAge < time.Minute || c.OIDCSessionMaxAge > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("-oidc-session-max-age %s: want 1m to 720h", c.OIDCSessionMaxAge))
	}
	return errs
}

// CAPool reads a PEM bundle of CA certificates, the file a -*-ca setting
// names.
func CAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// ParseAliases parses "/pdp/AuthorizationEndPoint=default,/fw/ecc.ashx=ivr"
// into path → policy. Paths start with / and carry no query; the policy
// is checked when the CURRI handler is built.
func ParseAliases(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		path, policy, ok := strings.Cut(part, "=")
		path, policy = strings.TrimSpace(path), strings.TrimSpace(policy)
		if !ok || policy == "" {
			return nil, fmt.Errorf("%q: want PATH=POLICY", part)
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# ") {
			return nil, fmt.Errorf("%q: the path must start with / and have no query", part)
		}
		key := strings.ToLower(strings.TrimSuffix(path, "/"))
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("path %s given twice", path)
		}
		out[key] = policy
	}
	return out, nil
}

// ParseNetworks parses "10.1.0.0/24,192.0.2.7,2001:db8::/32": networks,
// or addresses standing for themselves alone.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q: want an address or a network (10.1.0.0/24)", part)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// ownListener names the listener of this serve (-http-addr, ...) that
// host:port would reach, "" for none: a peer address that is one of them
// is wiring that cannot work (the site would ask itself, or mirror into
// its own Kafka, forever). A listener reaches host:port when their ports
// are equal and host is one of its addresses: its own, or any address of
// this host when it listens on every interface.
func (c *Serve) ownListener(host, port string) string {
	if port == "" || port == "0" {
		return ""
	}
	local := localHost(host)
	for _, l := range []struct{ flag, addr string }{{"-http-addr", c.HTTPAddr}, {"-curri-addr", c.CURRIAddr},
		{"-kafka-addr", c.KafkaAddr}, {"-ingest-addr", c.IngestAddr}, {"-pprof-addr", c.PprofAddr}} {
		if l.flag == "-kafka-addr" && (!c.Director || c.KafkaBrokers != "") || l.flag == "-ingest-addr" && !c.Director {
			continue // not listening
		}
		lh, lp, err := net.SplitHostPort(l.addr)
		if err != nil || lp != port {
			continue
		}
		if lh == host || local && (lh == "" || lh == "0.0.0.0" || lh == "::" || localHost(lh) && sameIP(lh, host)) {
			return l.flag + " " + l.addr
		}
	}
	return ""
}

// localHost reports whether host names this host: localhost, a loopback
// address, or an address of one of its interfaces.
func localHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// sameIP reports whether a and b are the same address ("localhost" being
// 127.0.0.1).
func sameIP(a, b string) bool {
	ip := func(h string) net.IP {
		if h == "localhost" {
			return net.IPv4(127, 0, 0, 1)
		}
		return net.ParseIP(h)
	}
	x, y := ip(a), ip(b)
	return x != nil && y != nil && x.Equal(y)
}

// validateSite checks the two-site settings: all or none, on a director.
func (c *Serve) validateSite() []error {
	if c.Site == "" {
		if c.PeerSite != "" || c.PeerURL != "" || c.PeerKafkaBrokers != "" || c.PeerToken != "" {
			return []error{errors.New("-peer-site, -peer-url, -peer-token and -peer-kafka-brokers need -site")}
		}
		return nil
	}
	var errs []error
	if !validSite.MatchString(c.Site) {
		errs = append(errs, fmt.Errorf("-site %q: want 1 to 32 letters, digits or -", c.Site))
	}
	if !validSite.MatchString(c.PeerSite) || c.PeerSite == c.Site {
		errs = append(errs, fmt.Errorf("-peer-site %q: want the peer site's name (1 to 32 letters, digits or -), not this site's", c.PeerSite))
	}
	if !c.Director {
		errs = append(errs, errors.New("-site needs the director (-director)"))
	}
	if u, err := url.Parse(c.PeerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("-peer-url %q: want the peer site's API as http[s]://host:port", c.PeerURL))
	} else {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if own := c.ownListener(u.Hostname(), port); own != "" {
			errs = append(errs, fmt.Errorf("-peer-url %q names this serve's own %s: want the peer site's API", c.PeerURL, own))
		}
	}
	for _, b := range strings.Split(c.PeerKafkaBrokers, ",") {
		if host, port, err := net.SplitHostPort(strings.TrimSpace(b)); err == nil {
			if own := c.ownListener(host, port); own != "" {
				errs = append(errs, fmt.Errorf("-peer-kafka-brokers %q names this serve's own %s: want the peer site's Kafka", b, own))
			}
		}
	}
	if c.PeerToken == "" {
		errs = append(errs, errors.New("-site needs -peer-token, an admin token of the peer site"))
	}
	if c.PeerKafkaBrokers == "" {
		errs = append(errs, errors.New("-site needs -peer-kafka-brokers, the peer site's Kafka"))
	}
	if c.SiteTakeover < 2*time.Second || c.SiteTakeover > 10*time.Minute {
		errs = append(errs, fmt.Errorf("-site-takeover %s: want 2s to 10m", c.SiteTakeover))
	}
	return errs
}
