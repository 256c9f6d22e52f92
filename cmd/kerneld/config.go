package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/quota"
)

// Config is kerneld's configuration: defaults, then configs/kerneld.yaml,
// then KERNELD_* environment variables, then flags.
type Config struct {
	HTTP      HTTPConfig      `yaml:"http"`
	Store     StoreConfig     `yaml:"store"`
	AgentsDir string          `yaml:"agents_dir"`
	Log       LogConfig       `yaml:"log"`
	Auth      AuthConfig      `yaml:"auth"`
	Sessions  SessionsConfig  `yaml:"sessions"`
	Quotas    QuotasConfig    `yaml:"quotas"`
	Telemetry TelemetryConfig `yaml:"telemetry"`
	Webhooks  WebhooksConfig  `yaml:"webhooks"`
	Images    ImagesConfig    `yaml:"images"`
	Schedules SchedulesConfig `yaml:"schedules"`
	MCP       MCPConfig       `yaml:"mcp"`
}

// TelemetryConfig configures tracing beyond the standard OTEL_* variables,
// which say whether and where spans are exported.
type TelemetryConfig struct {
	// RecordContent puts prompts, answers, tool arguments and results on
	// spans; off, spans carry sizes and names only.
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true sets it too.
	RecordContent bool `yaml:"record_content"`
}

// QuotasConfig are the quotas and rate limits of every tenant (operator
// keys are no tenant); 0 is no limit. With the redis store the counters
// are in Redis, so the limits hold across replicas.
type QuotasConfig struct {
	RequestsPerSecond float64 `yaml:"requests_per_second"` // token bucket refill rate
	RequestBurst      int     `yaml:"request_burst"`       // the bucket's size
	MaxSessions       int     `yaml:"max_sessions"`        // sessions stored, closed ones included
	RunsPerMinute     int     `yaml:"runs_per_minute"`     // runs started
	MaxConcurrentRuns int     `yaml:"max_concurrent_runs"` // runs executing or starting
	TokensPerDay      int64   `yaml:"tokens_per_day"`      // model tokens, per UTC day
}

// HTTPConfig configures the listener and the API.
type HTTPConfig struct {
	Addr            string        `yaml:"addr"`
	MetricsAddr     string        `yaml:"metrics_addr"` // serve /metrics here, not on Addr
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	RequestTimeout  time.Duration `yaml:"request_timeout"`
	MaxBodyBytes    int64         `yaml:"max_body_bytes"`
	Heartbeat       time.Duration `yaml:"heartbeat"`

	// Connection hygiene: what a client may hold, and for how long.
	ReadHeaderTimeout   time.Duration `yaml:"read_header_timeout"`    // the request line and headers
	ReadTimeout         time.Duration `yaml:"read_timeout"`           // the whole request, body included
	IdleTimeout         time.Duration `yaml:"idle_timeout"`           // a keep-alive connection between requests
	MinBodyRate         int64         `yaml:"min_body_rate"`          // bytes/s a body must keep up after the grace; 0: none
	BodyRateGrace       time.Duration `yaml:"body_rate_grace"`        // before min_body_rate applies
	MaxConnections      int           `yaml:"max_connections"`        // 0: the descriptor limit less headroom
	MaxStreams          int           `yaml:"max_streams"`            // open event streams in all; 0: half of max_connections
	MaxStreamsPerTenant int           `yaml:"max_streams_per_tenant"` // open event streams of one tenant; 0: no cap
	// MaxConnectionsPerAddress caps one client address's connections (an
	// IPv6 client's /64), or the requests a trusted proxy forwards for it
	// at once; 0: no cap.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// FirstRequestTimeout is how long a new connection may take to send
	// its first request line and headers; 0: read_header_timeout alone.
	FirstRequestTimeout time.Duration `yaml:"first_request_timeout"`
	// TrustedProxies are the reverse proxies (addresses or networks)
	// whose X-Forwarded-For names the client for the per-address cap.
	// KERNELD_TRUSTED_PROXIES, comma-separated, replaces the list.
	TrustedProxies []string `yaml:"trusted_proxies"`

	// CORSOrigins are the origins whose pages may call the API from a
	// browser; none by default. KERNELD_CORS_ORIGINS, comma-separated,
	// replaces the list.
	CORSOrigins []string `yaml:"cors_origins"`
}

// StoreConfig picks the storage backend.
type StoreConfig struct {
	Kind     string         `yaml:"kind"`
	DataDir  string         `yaml:"data_dir"`
	Redis    RedisConfig    `yaml:"redis"`
	Postgres PostgresConfig `yaml:"postgres"`
}

// PostgresConfig configures the postgres store, which several replicas
// share as the redis store is shared. The replica's name is
// store.redis.replica (--replica), whichever store is shared.
type PostgresConfig struct {
	// URL is a libpq URL or key=value string; what it leaves out comes
	// from the PG* environment variables, as with psql.
	URL              string        `yaml:"url"`
	MaxConns         int           `yaml:"max_conns"`         // pool size per replica; 0: 16
	StatementTimeout time.Duration `yaml:"statement_timeout"` // Postgres' statement_timeout; 0: 30s
	LeaseTTL         time.Duration `yaml:"lease_ttl"`         // how long a dead replica's sessions wait to be taken over
}

// RedisConfig configures the redis store, which several replicas share.
type RedisConfig struct {
	URL      string        `yaml:"url"`       // redis://[user:password@]host:port/db
	Prefix   string        `yaml:"prefix"`    // starts every key; default "kerneld:"
	LeaseTTL time.Duration `yaml:"lease_ttl"` // how long a dead replica's sessions wait to be taken over
	Replica  string        `yaml:"replica"`   // this replica's name; default host-pid-random
}

// LogConfig configures the logger.
type LogConfig struct {
	Format string `yaml:"format"` // text | json
	Level  string `yaml:"level"`  // debug | info | warn | error
}

// AuthConfig lists the API keys; none means no authentication. Admin
// keys are the operators': they read /metrics and act as no tenant.
type AuthConfig struct {
	APIKeys   []APIKey `yaml:"api_keys"`
	AdminKeys []string `yaml:"admin_keys"`
	// UserHeader reads who reads a session (read cursors, unread counts)
	// from X-Kerneld-User, for a proxy that authenticates its users and
	// calls kerneld with one key; otherwise each key is one reader.
	UserHeader bool `yaml:"user_header"`
}

// APIKey is one bearer token and the tenant it acts as.
type APIKey struct {
	Key    string `yaml:"key"`
	Tenant string `yaml:"tenant"`
}

// SessionsConfig bounds what sessions may hold and how long they live.
type SessionsConfig struct {
	TTL                 time.Duration `yaml:"ttl"`            // idle time before a session is closed; 0: never
	DeleteAfter         time.Duration `yaml:"delete_after"`   // a closed session is deleted this much later
	SweepInterval       time.Duration `yaml:"sweep_interval"` // how often retention runs
	MaxMemoryEntries    int           `yaml:"max_memory_entries"`
	MaxMemoryValueBytes int           `yaml:"max_memory_value_bytes"`
	MaxInputBytes       int           `yaml:"max_input_bytes"`
	ToolTimeout         time.Duration `yaml:"tool_timeout"`
	MaxQueued           int           `yaml:"max_queued"` // inputs waiting behind a session's active run
	// StallAfter is how long a running run may log nothing before its
	// status is stalled and its stream says so.
	StallAfter time.Duration `yaml:"stall_after"`
	// Titles says how sessions without a title are titled.
	Titles TitlesConfig `yaml:"titles"`
}

// TitlesConfig: enabled titles sessions that have none; generate asks the agent's model (or its title_model) for
// a title when a session's first run starts; off, titles are the input's
// first words. Timeout bounds that call.
type TitlesConfig struct {
	Enabled  bool          `yaml:"enabled"`
	Generate bool          `yaml:"generate"`
	Timeout  time.Duration `yaml:"timeout"`
}

// DefaultConfig returns the configuration used where nothing else is set.
func DefaultConfig() Config {
	l := kernel.DefaultLimits()
	return Config{
		HTTP: HTTPConfig{
			Addr: "127.0.0.1:8080", ShutdownTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second,
			MaxBodyBytes: 1 << 20, Heartbeat: 15 * time.Second,
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
			MinBodyRate: 1024, BodyRateGrace: 5 * time.Second, MaxStreamsPerTenant: 1000,
			MaxConnectionsPerAddress: 2048, FirstRequestTimeout: 5 * time.Second,
		},
		Quotas:    QuotasConfig(quota.DefaultLimits()),
		Webhooks:  defaultWebhooks(),
		Images:    defaultImagesConfig(),
		Schedules: defaultSchedulesConfig(),
		MCP:       defaultMCPConfig(),
		Store: StoreConfig{Kind: "sqlite", DataDir: "./data", Redis: RedisConfig{LeaseTTL: 10 * time.Second},
			Postgres: PostgresConfig{LeaseTTL: 10 * time.Second}},
		AgentsDir: "configs/agents",
		Log:       LogConfig{Format: "text", Level: "info"},
		Sessions: SessionsConfig{
			DeleteAfter: 24 * time.Hour, SweepInterval: time.Minute,
			MaxMemoryEntries: l.MaxMemoryEntries, MaxMemoryValueBytes: l.MaxMemoryValueBytes,
			MaxInputBytes: l.MaxInputBytes, ToolTimeout: l.ToolTimeout, MaxQueued: l.MaxQueued,
			StallAfter: kernel.DefaultStallAfter,
			Titles:     TitlesConfig{Enabled: true, Generate: true, Timeout: kernel.DefaultTitleTimeout},
		},
	}
}

// flagValues are the command-line flags; each has a KERNELD_* twin.
type flagValues struct {
	config, addr, metricsAddr, agentsDir, store, dataDir, logFormat string
	redisURL, replica, postgresURL                                  string
	version                                                         bool
}

// parseFlags parses args. A flag left unset falls back to its environment
// twin, which in turn falls back to the config file.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (flagValues, error) {
	var f flagValues
	fs := flag.NewFlagSet("kerneld", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { serverUsage(fs) }
	fs.StringVar(&f.config, "config", envOr(getenv, "KERNELD_CONFIG", "configs/kerneld.yaml"), "config file (KERNELD_CONFIG)")
	fs.StringVar(&f.addr, "addr", getenv("KERNELD_ADDR"), "listen address, default 127.0.0.1:8080 (KERNELD_ADDR)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", getenv("KERNELD_METRICS_ADDR"), "serve /metrics on this address instead of --addr (KERNELD_METRICS_ADDR)")
	fs.StringVar(&f.agentsDir, "agents-dir", getenv("KERNELD_AGENTS_DIR"), "agent definitions, default configs/agents (KERNELD_AGENTS_DIR)")
	fs.StringVar(&f.store, "store", getenv("KERNELD_STORE"), "storage backend: sqlite (default), memory, redis or postgres (KERNELD_STORE)")
	fs.StringVar(&f.redisURL, "redis-url", getenv("KERNELD_REDIS_URL"), "the Redis server of --store redis, redis://host:port/db (KERNELD_REDIS_URL)")
	fs.StringVar(&f.postgresURL, "postgres-url", getenv("KERNELD_POSTGRES_URL"), "the database of --store postgres, postgres://user@host:5432/db; PG* variables fill in the rest (KERNELD_POSTGRES_URL)")
	fs.StringVar(&f.replica, "replica", getenv("KERNELD_REPLICA"), "this replica's name with --store redis or postgres, default host-pid-random (KERNELD_REPLICA)")
	fs.StringVar(&f.dataDir, "data-dir", getenv("KERNELD_DATA_DIR"), "data directory, default ./data (KERNELD_DATA_DIR)")
	fs.StringVar(&f.logFormat, "log-format", getenv("KERNELD_LOG_FORMAT"), "log format: text or json (KERNELD_LOG_FORMAT)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, unexpectedArgument(fs.Arg(0))
	}
	return f, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// loadConfig reads the config file over the defaults, expanding ${VAR}
// from getenv, then applies the flags (which carry the env twins).
func loadConfig(f flagValues, getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	if err := readConfigFile(f.config, getenv, &cfg); err != nil {
		return cfg, err
	}
	override(&cfg.HTTP.Addr, f.addr)
	override(&cfg.HTTP.MetricsAddr, f.metricsAddr)
	override(&cfg.AgentsDir, f.agentsDir)
	override(&cfg.Store.Kind, f.store)
	override(&cfg.Store.DataDir, f.dataDir)
	override(&cfg.Store.Redis.URL, f.redisURL)
	override(&cfg.Store.Redis.Replica, f.replica)
	override(&cfg.Store.Postgres.URL, f.postgresURL)
	override(&cfg.Log.Format, f.logFormat)
	if err := cfg.applyEnvTwins(getenv); err != nil {
		return cfg, err
	}
	if v := getenv("KERNELD_API_KEYS"); v != "" {
		cfg.Auth.APIKeys = append(cfg.Auth.APIKeys, parseAPIKeys(v)...)
	}
	if v := getenv("KERNELD_ADMIN_KEYS"); v != "" {
		cfg.Auth.AdminKeys = append(cfg.Auth.AdminKeys, splitList(v)...)
	}
	if v := getenv("KERNELD_CORS_ORIGINS"); v != "" {
		cfg.HTTP.CORSOrigins = splitList(v)
	}
	if v := getenv("KERNELD_TRUSTED_PROXIES"); v != "" {
		cfg.HTTP.TrustedProxies = splitList(v)
	}
	return cfg, cfg.Validate()
}

// envTwin is a config key that a KERNELD_* variable sets, with no flag.
type envTwin struct {
	env, key string
	dst      any // *time.Duration, *int, *int64, *float64 or *string
}

// envTwins lists the keys set from the environment alone.
func (c *Config) envTwins() []envTwin {
	h := &c.HTTP
	return []envTwin{
		{"KERNELD_READ_HEADER_TIMEOUT", "http.read_header_timeout", &h.ReadHeaderTimeout},
		{"KERNELD_READ_TIMEOUT", "http.read_timeout", &h.ReadTimeout},
		{"KERNELD_IDLE_TIMEOUT", "http.idle_timeout", &h.IdleTimeout},
		{"KERNELD_MIN_BODY_RATE", "http.min_body_rate", &h.MinBodyRate},
		{"KERNELD_BODY_RATE_GRACE", "http.body_rate_grace", &h.BodyRateGrace},
		{"KERNELD_MAX_CONNECTIONS", "http.max_connections", &h.MaxConnections},
		{"KERNELD_MAX_STREAMS", "http.max_streams", &h.MaxStreams},
		{"KERNELD_MAX_STREAMS_PER_TENANT", "http.max_streams_per_tenant", &h.MaxStreamsPerTenant},
		{"KERNELD_MAX_CONNECTIONS_PER_ADDRESS", "http.max_connections_per_address", &h.MaxConnectionsPerAddress},
		{"KERNELD_FIRST_REQUEST_TIMEOUT", "http.first_request_timeout", &h.FirstRequestTimeout},
		{"KERNELD_REQUESTS_PER_SECOND", "quotas.requests_per_second", &c.Quotas.RequestsPerSecond},
		{"KERNELD_REQUEST_BURST", "quotas.request_burst", &c.Quotas.RequestBurst},
		{"KERNELD_MAX_SESSIONS", "quotas.max_sessions", &c.Quotas.MaxSessions},
		{"KERNELD_RUNS_PER_MINUTE", "quotas.runs_per_minute", &c.Quotas.RunsPerMinute},
		{"KERNELD_MAX_CONCURRENT_RUNS", "quotas.max_concurrent_runs", &c.Quotas.MaxConcurrentRuns},
		{"KERNELD_TOKENS_PER_DAY", "quotas.tokens_per_day", &c.Quotas.TokensPerDay},
		{"KERNELD_REDIS_PREFIX", "store.redis.prefix", &c.Store.Redis.Prefix},
		{"KERNELD_LEASE_TTL", "store.redis.lease_ttl", &c.Store.Redis.LeaseTTL},
		{"KERNELD_LEASE_TTL", "store.postgres.lease_ttl", &c.Store.Postgres.LeaseTTL},
		{"KERNELD_POSTGRES_MAX_CONNS", "store.postgres.max_conns", &c.Store.Postgres.MaxConns},
		{"KERNELD_POSTGRES_STATEMENT_TIMEOUT", "store.postgres.statement_timeout", &c.Store.Postgres.StatementTimeout},
		{"KERNELD_WEBHOOK_SECRET", "webhooks.secret", &c.Webhooks.Secret},
	}
}

// applyEnvTwins sets every key whose variable is set, over the file.
func (c *Config) applyEnvTwins(getenv func(string) string) error {
	var errs []error
	for _, tw := range c.envTwins() {
		if v := getenv(tw.env); v != "" {
			if err := setFromString(tw.dst, v); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", tw.env, tw.key, err))
			}
		}
	}
	return errors.Join(errs...)
}

// setFromString parses v into *dst.
func setFromString(dst any, v string) error {
	var err error
	switch p := dst.(type) {
	case *time.Duration:
		*p, err = time.ParseDuration(v)
	case *int:
		*p, err = strconv.Atoi(v)
	case *int64:
		*p, err = strconv.ParseInt(v, 10, 64)
	case *float64:
		*p, err = strconv.ParseFloat(v, 64)
	case *string:
		*p = v
	default:
		err = fmt.Errorf("unsupported type %T", dst)
	}
	if ne, ok := errors.AsType[*strconv.NumError](err); ok {
		err = fmt.Errorf("%q is not a number", ne.Num)
	}
	return err
}

// parseAPIKeys reads KERNELD_API_KEYS: comma-separated "key" or
// "key:tenant" entries; a key without a tenant acts as tenant "default".
func parseAPIKeys(v string) []APIKey {
	var keys []APIKey
	for _, entry := range splitList(v) {
		key, tenant, ok := strings.Cut(entry, ":")
		if !ok {
			tenant = "default"
		}
		keys = append(keys, APIKey{Key: key, Tenant: tenant})
	}
	return keys
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, entry := range strings.Split(v, ",") {
		if entry = strings.TrimSpace(entry); entry != "" {
			out = append(out, entry)
		}
	}
	return out
}

func override(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// readConfigFile decodes path into cfg strictly: an unknown key is an
// error, so a typo does not silently fall back to a default. A missing
// file is fine only at the default path.
func readConfigFile(path string, getenv func(string) string, cfg *Config) error {
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && path == "configs/kerneld.yaml" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(expandEnv(buf, getenv)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} with its value; a bare $ is left alone.
func expandEnv(b []byte, getenv func(string) string) []byte {
	return envRef.ReplaceAllFunc(b, func(m []byte) []byte { return []byte(getenv(string(m[2 : len(m)-1]))) })
}

// Validate checks the configuration as a whole.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, c.Store.check())
	if c.Sessions.TTL < 0 || c.Sessions.DeleteAfter <= 0 || c.Sessions.SweepInterval <= 0 || c.Sessions.StallAfter <= 0 || c.Sessions.Titles.Timeout <= 0 {
		errs = append(errs, errors.New("sessions: ttl must not be negative; delete_after, sweep_interval, stall_after and titles.timeout must be positive"))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, fmt.Errorf("log.format: must be text or json, not %q", c.Log.Format))
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		errs = append(errs, err)
	}
	if c.HTTP.ShutdownTimeout <= 0 || c.HTTP.RequestTimeout <= 0 || c.HTTP.Heartbeat <= 0 {
		errs = append(errs, errors.New("http: shutdown_timeout, request_timeout and heartbeat must be positive"))
	}
	errs = append(errs, c.HTTP.checkLimits(), c.Quotas.check())
	if err := httpapi.ValidateCORSOrigins(c.HTTP.CORSOrigins); err != nil {
		errs = append(errs, fmt.Errorf("http.cors_origins: %w", err))
	}
	errs = append(errs, c.Auth.check(), c.Webhooks.check(), c.Images.check(), c.Schedules.check(), c.MCP.check())
	return errors.Join(errs...)
}

// check checks the store's settings.
func (c StoreConfig) check() error {
	switch {
	case c.Kind == "redis" && c.Redis.URL == "":
		return errors.New("store.redis.url: --store redis needs a server (--redis-url or KERNELD_REDIS_URL)")
	case c.Kind == "redis" && c.Redis.LeaseTTL < time.Second:
		return errors.New("store.redis.lease_ttl: must be at least 1s")
	case c.Kind == "postgres" && c.Postgres.LeaseTTL < time.Second:
		return errors.New("store.postgres.lease_ttl: must be at least 1s")
	case c.Kind == "postgres" && (c.Postgres.MaxConns < 0 || c.Postgres.StatementTimeout < 0):
		return errors.New("store.postgres: max_conns and statement_timeout must not be negative")
	case c.Kind != "memory" && c.Kind != "sqlite" && c.Kind != "redis" && c.Kind != "postgres":
		return fmt.Errorf("store.kind: unknown store %q (known: sqlite, memory, redis, postgres)", c.Kind)
	}
	return nil
}

// checkLimits checks the connection limits: timeouts positive, the rest
// not negative (0 means the default or no limit, as documented).
func (h HTTPConfig) checkLimits() error {
	var errs []error
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.IdleTimeout <= 0 {
		errs = append(errs, errors.New("http: read_header_timeout, read_timeout and idle_timeout must be positive"))
	}
	if h.MinBodyRate < 0 || h.BodyRateGrace < 0 || h.MaxConnections < 0 || h.MaxStreams < 0 || h.MaxStreamsPerTenant < 0 ||
		h.MaxConnectionsPerAddress < 0 || h.FirstRequestTimeout < 0 {
		errs = append(errs, errors.New("http: min_body_rate, body_rate_grace, max_connections, max_streams, "+
			"max_streams_per_tenant, max_connections_per_address and first_request_timeout must not be negative"))
	}
	if _, err := httpapi.ParseTrustedProxies(h.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("http.trusted_proxies: %w", err))
	}
	return errors.Join(errs...)
}

// check refuses negative quotas: 0 is the way to say none.
func (q QuotasConfig) check() error {
	if q.RequestsPerSecond < 0 || q.RequestBurst < 0 || q.MaxSessions < 0 || q.RunsPerMinute < 0 ||
		q.MaxConcurrentRuns < 0 || q.TokensPerDay < 0 {
		return errors.New("quotas: requests_per_second, request_burst, max_sessions, runs_per_minute, " +
			"max_concurrent_runs and tokens_per_day must not be negative (0 is no limit)")
	}
	return nil
}

// check refuses keys that are empty (an unset ${VAR}) or listed twice: a
// key in two places would act as whichever came last, silently.
func (a AuthConfig) check() error {
	var errs []error
	seen := make(map[string]string) // key → where it was first listed
	note := func(key, where string) {
		if first, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: key %s is also %s; every key must be listed once", where, redact(key), first))
			return
		}
		seen[key] = where
	}
	for i, k := range a.APIKeys {
		where := fmt.Sprintf("auth.api_keys[%d]", i)
		if k.Key == "" || k.Tenant == "" {
			errs = append(errs, fmt.Errorf("%s: key and tenant are required (is its ${VAR} set?)", where))
			continue
		}
		note(k.Key, where)
	}
	for i, k := range a.AdminKeys {
		where := fmt.Sprintf("auth.admin_keys[%d]", i)
		if k == "" {
			errs = append(errs, fmt.Errorf("%s: empty key (is its ${VAR} set?)", where))
			continue
		}
		note(k, where)
	}
	return errors.Join(errs...)
}

// redact shows enough of a key to find it in the config, never the key:
// at most its first four characters, fewer for a short key.
func redact(key string) string {
	n := min(4, len(key)/4)
	return fmt.Sprintf("%q… (%d characters)", key[:n], len(key))
}

// checkBinds refuses to serve without keys on an address other machines
// can reach: http.addr without API keys, http.metrics_addr without
// operator keys. A host name is resolved with lookup, and every address
// it resolves to must be loopback: "localhost" is trusted for what it
// resolves to, not for its name.
func (c Config) checkBinds(ctx context.Context, lookup func(ctx context.Context, host string) ([]string, error)) error {
	var errs []error
	if len(c.Auth.APIKeys) == 0 {
		if err := checkLoopback(ctx, c.HTTP.Addr, lookup); err != nil {
			errs = append(errs, fmt.Errorf("http.addr: refusing to listen on %s without auth.api_keys: %w; "+
				"configure API keys or listen on 127.0.0.1", c.HTTP.Addr, err))
		}
	}
	if c.HTTP.MetricsAddr != "" && len(c.Auth.AdminKeys) == 0 {
		if err := checkLoopback(ctx, c.HTTP.MetricsAddr, lookup); err != nil {
			errs = append(errs, fmt.Errorf("http.metrics_addr: refusing to serve metrics on %s without auth.admin_keys: %w; "+
				"configure operator keys or listen on 127.0.0.1", c.HTTP.MetricsAddr, err))
		}
	}
	return errors.Join(errs...)
}

// checkLoopback says why addr would bind more than loopback interfaces,
// or returns nil.
func checkLoopback(ctx context.Context, addr string, lookup func(ctx context.Context, host string) ([]string, error)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("it is every interface")
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		if addrs, err = lookup(ctx, host); err != nil {
			return fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%s resolves to no address", host)
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%s is not a loopback address", a)
		}
	}
	return nil
}

// apiKeys returns the configured keys as token → tenant.
func (c Config) apiKeys() map[string]string {
	m := make(map[string]string, len(c.Auth.APIKeys))
	for _, k := range c.Auth.APIKeys {
		m[k.Key] = k.Tenant
	}
	return m
}

// retention returns the kernel's retention policy.
func (c Config) retention() kernel.Retention {
	return kernel.Retention{TTL: c.Sessions.TTL, DeleteAfter: c.Sessions.DeleteAfter, Interval: c.Sessions.SweepInterval}
}

// limits returns the kernel limits the config sets.
func (c Config) limits() kernel.Limits {
	l := kernel.DefaultLimits()
	l.MaxMemoryEntries = c.Sessions.MaxMemoryEntries
	l.MaxMemoryValueBytes = c.Sessions.MaxMemoryValueBytes
	l.MaxInputBytes = c.Sessions.MaxInputBytes
	l.ToolTimeout = c.Sessions.ToolTimeout
	l.MaxQueued = c.Sessions.MaxQueued
	return l
}
