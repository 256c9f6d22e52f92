package main

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
)

// env returns a getenv over a fixed map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "kerneld.yaml", `
http:
  addr: 127.0.0.1:9000
  metrics_addr: 127.0.0.1:9100
  heartbeat: 5s
log: {format: json}
agents_dir: file-agents
store: {kind: memory, data_dir: file-data}
sessions: {max_queued: 3}
auth:
  api_keys: [{key: "${KEY}", tenant: acme}]
`)
	type testCase struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c Config)
	}
	tests := []testCase{
		{"file over defaults", []string{"-config", file}, map[string]string{"KEY": "s3cret"}, func(t *testing.T, c Config) {
			if c.HTTP.Addr != "127.0.0.1:9000" || c.HTTP.Heartbeat != 5*time.Second || c.Log.Format != "json" {
				t.Errorf("config = %+v", c)
			}
			if c.HTTP.ShutdownTimeout != 10*time.Second {
				t.Errorf("shutdown_timeout = %v, want the default", c.HTTP.ShutdownTimeout)
			}
			if got := c.limits().MaxQueued; got != 3 {
				t.Errorf("sessions.max_queued gives a limit of %d, want 3", got)
			}
			if got := c.limits().MaxInputBytes; got != kernel.DefaultLimits().MaxInputBytes {
				t.Errorf("max_input_bytes = %d, want the default", got)
			}
			if got := c.apiKeys()["s3cret"]; got != "acme" {
				t.Errorf("${KEY} expanded to tenant %q", got)
			}
		}},
		{"env over file", []string{"-config", file}, map[string]string{"KEY": "k", "KERNELD_ADDR": "127.0.0.1:9001", "KERNELD_LOG_FORMAT": "text"},
			func(t *testing.T, c Config) {
				if c.HTTP.Addr != "127.0.0.1:9001" || c.Log.Format != "text" {
					t.Errorf("addr, format = %s, %s", c.HTTP.Addr, c.Log.Format)
				}
			}},
		{"flag over env", []string{"-config", file, "-addr", "127.0.0.1:9002", "-agents-dir", "x", "-data-dir", "d"},
			map[string]string{"KEY": "k", "KERNELD_ADDR": "127.0.0.1:9001"}, func(t *testing.T, c Config) {
				if c.HTTP.Addr != "127.0.0.1:9002" || c.AgentsDir != "x" || c.Store.DataDir != "d" {
					t.Errorf("config = %+v", c)
				}
			}},
		{"config path from env", nil, map[string]string{"KERNELD_CONFIG": file, "KEY": "k"}, func(t *testing.T, c Config) {
			if c.HTTP.Addr != "127.0.0.1:9000" {
				t.Errorf("addr = %s", c.HTTP.Addr)
			}
		}},
	}
	// Every flag with an environment twin, with a value for each layer
	// that differs from the layer below (store.kind and log.format have
	// two valid values, so they alternate). The file row checks that the
	// file sets a value other than the default, so a twin that is ignored
	// shows as the file's value, and a flag that is ignored as the env's.
	twins := []struct {
		flag, env                      string
		fileValue, envValue, flagValue string
		get                            func(Config) string
	}{
		{"addr", "KERNELD_ADDR", "127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002", func(c Config) string { return c.HTTP.Addr }},
		{"metrics-addr", "KERNELD_METRICS_ADDR", "127.0.0.1:9100", "127.0.0.1:9101", "127.0.0.1:9102", func(c Config) string { return c.HTTP.MetricsAddr }},
		{"agents-dir", "KERNELD_AGENTS_DIR", "file-agents", "env-agents", "flag-agents", func(c Config) string { return c.AgentsDir }},
		{"store", "KERNELD_STORE", "memory", "sqlite", "memory", func(c Config) string { return c.Store.Kind }},
		{"data-dir", "KERNELD_DATA_DIR", "file-data", "env-data", "flag-data", func(c Config) string { return c.Store.DataDir }},
		{"log-format", "KERNELD_LOG_FORMAT", "json", "text", "json", func(c Config) string { return c.Log.Format }},
	}
	for _, tw := range twins {
		want := func(layer, value string) func(*testing.T, Config) {
			return func(t *testing.T, c Config) {
				if got := tw.get(c); got != value {
					t.Errorf("-%s = %q, want the %s's %q", tw.flag, got, layer, value)
				}
			}
		}
		withEnv := map[string]string{"KEY": "k", tw.env: tw.envValue}
		tests = append(tests,
			testCase{"file/" + tw.flag, []string{"-config", file}, map[string]string{"KEY": "k"}, want("file", tw.fileValue)},
			testCase{"env over file/" + tw.env, []string{"-config", file}, withEnv, want("env", tw.envValue)},
			testCase{"flag over env/-" + tw.flag, []string{"-config", file, "-" + tw.flag, tw.flagValue}, withEnv, want("flag", tw.flagValue)},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseFlags(tt.args, env(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			c, err := loadConfig(f, env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfig_APIKeysFromEnv(t *testing.T) {
	getenv := env(map[string]string{"KERNELD_API_KEYS": "k1, k2:acme,", "KERNELD_ADDR": "0.0.0.0:8080",
		"KERNELD_ADMIN_KEYS": " ops1,,ops2 "})
	f, err := parseFlags(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(f, getenv)
	if err != nil {
		t.Fatalf("keys set, wildcard address: %v", err)
	}
	if !slices.Equal(c.Auth.AdminKeys, []string{"ops1", "ops2"}) {
		t.Errorf("admin keys = %q, want ops1 and ops2", c.Auth.AdminKeys)
	}
	want := map[string]string{"k1": "default", "k2": "acme"}
	for k, tenant := range want {
		if c.apiKeys()[k] != tenant {
			t.Errorf("key %s: tenant %q, want %q", k, c.apiKeys()[k], tenant)
		}
	}
}

func TestLoadConfig_Errors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", "htp:\n  addr: x\n", nil, "field htp not found"},
		{"bad log format", "log: {format: xml}\n", nil, "log.format"},
		{"bad level", "log: {level: loud}\n", nil, "log.level"},
		{"unknown store", "store: {kind: cassandra}\n", nil, `store.kind: unknown store "cassandra"`},
		{"key variable unset", "auth: {api_keys: [{key: '${NOPE}', tenant: t}]}\n", nil, "auth.api_keys[0]: key and tenant are required"},
		{"negative timeout", "http: {shutdown_timeout: -1s}\n", nil, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml", tt.file)
			_, err := loadConfig(flagValues{config: path}, env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("missing explicit file", func(t *testing.T) {
		if _, err := loadConfig(flagValues{config: filepath.Join(dir, "nope.yaml")}, env(nil)); err == nil {
			t.Fatal("a missing config file named explicitly must be an error")
		}
	})
}

func TestCheckBinds(t *testing.T) {
	// lookup resolves from a fixed table, as DNS or /etc/hosts would.
	hosts := map[string][]string{
		"localhost":   {"127.0.0.1", "::1"},
		"lo6":         {"::1"},
		"split":       {"127.0.0.1", "10.0.0.7"},
		"public":      {"203.0.113.9"},
		"nothing":     {},
		"not-an-addr": {"garbage"},
	}
	lookup := func(_ context.Context, host string) ([]string, error) {
		addrs, ok := hosts[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		return addrs, nil
	}
	keys := AuthConfig{APIKeys: []APIKey{{Key: "k", Tenant: "t"}}}
	admin := AuthConfig{AdminKeys: []string{"ops"}}
	tests := []struct {
		name    string
		http    HTTPConfig
		auth    AuthConfig
		wantErr string // "" for none
	}{
		{"IPv4 loopback", HTTPConfig{Addr: "127.0.0.1:8080"}, AuthConfig{}, ""},
		{"IPv4 loopback range", HTTPConfig{Addr: "127.0.0.2:8080"}, AuthConfig{}, ""},
		{"IPv6 loopback", HTTPConfig{Addr: "[::1]:8080"}, AuthConfig{}, ""},
		{"localhost resolves to loopback", HTTPConfig{Addr: "localhost:8080"}, AuthConfig{}, ""},
		{"name resolving to IPv6 loopback", HTTPConfig{Addr: "lo6:8080"}, AuthConfig{}, ""},
		{"wildcard", HTTPConfig{Addr: "0.0.0.0:8080"}, AuthConfig{}, "refusing to listen on 0.0.0.0:8080 without auth.api_keys: 0.0.0.0 is not a loopback address"},
		{"every interface", HTTPConfig{Addr: ":8080"}, AuthConfig{}, "every interface"},
		{"public IP", HTTPConfig{Addr: "10.0.0.1:80"}, AuthConfig{}, "10.0.0.1 is not a loopback address"},
		{"name resolving to loopback and more", HTTPConfig{Addr: "split:8080"}, AuthConfig{}, "10.0.0.7 is not a loopback address"},
		{"name resolving elsewhere", HTTPConfig{Addr: "public:8080"}, AuthConfig{}, "203.0.113.9 is not a loopback address"},
		{"name resolving to nothing", HTTPConfig{Addr: "nothing:8080"}, AuthConfig{}, "resolves to no address"},
		{"name resolving to garbage", HTTPConfig{Addr: "not-an-addr:8080"}, AuthConfig{}, "garbage is not a loopback address"},
		{"unresolvable name", HTTPConfig{Addr: "nowhere:8080"}, AuthConfig{}, "resolve nowhere: no such host"},
		{"malformed", HTTPConfig{Addr: "nonsense"}, AuthConfig{}, "refusing to listen on nonsense"},
		{"public with API keys", HTTPConfig{Addr: "0.0.0.0:8080"}, keys, ""},
		{"operator keys are not API keys", HTTPConfig{Addr: "0.0.0.0:8080"}, admin, "without auth.api_keys"},
		{"metrics on loopback", HTTPConfig{Addr: "0.0.0.0:8080", MetricsAddr: "localhost:9090"}, keys, ""},
		{"public metrics without operator keys", HTTPConfig{Addr: "0.0.0.0:8080", MetricsAddr: "0.0.0.0:9090"}, keys,
			"http.metrics_addr: refusing to serve metrics on 0.0.0.0:9090 without auth.admin_keys"},
		{"public metrics with operator keys", HTTPConfig{Addr: "127.0.0.1:8080", MetricsAddr: "0.0.0.0:9090"}, admin, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{HTTP: tt.http, Auth: tt.auth}.checkBinds(t.Context(), lookup)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkBinds = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkBinds = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	t.Run("system resolver", func(t *testing.T) {
		// What this machine resolves localhost to must be loopback for
		// kerneld to start keyless on it.
		c := Config{HTTP: HTTPConfig{Addr: "localhost:0"}}
		if err := c.checkBinds(t.Context(), net.DefaultResolver.LookupHost); err != nil {
			t.Errorf("localhost:0: %v", err)
		}
	})
}

// TestRun_RefusesPublicKeyless: startup stops before listening when the
// address is not loopback and no API keys are set.
func TestRun_RefusesPublicKeyless(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		err := run(t.Context(), []string{"-addr", addr, "-agents-dir", "../../configs/agents", "-data-dir", t.TempDir()},
			env(nil), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "refusing to listen on "+addr) {
			t.Errorf("run on %s = %v, want a refusal", addr, err)
		}
	}
}

func TestAuthConfig_DuplicateKeys(t *testing.T) {
	const long = "sk-live-0123456789abcdef"
	tests := []struct {
		name    string
		auth    AuthConfig
		wantErr []string // each must appear; nil for no error
	}{
		{"distinct", AuthConfig{APIKeys: []APIKey{{long, "a"}, {"other-key", "b"}}, AdminKeys: []string{"ops-key"}}, nil},
		{"same key, two tenants", AuthConfig{APIKeys: []APIKey{{long, "a"}, {long, "b"}}},
			[]string{"auth.api_keys[1]: key \"sk-l\"… (24 characters) is also auth.api_keys[0]"}},
		{"same key, same tenant", AuthConfig{APIKeys: []APIKey{{long, "a"}, {"x-key", "b"}, {long, "a"}}},
			[]string{"auth.api_keys[2]", "auth.api_keys[0]"}},
		{"API key and operator key", AuthConfig{APIKeys: []APIKey{{long, "a"}}, AdminKeys: []string{long}},
			[]string{"auth.admin_keys[0]: key \"sk-l\"… (24 characters) is also auth.api_keys[0]"}},
		{"operator key twice", AuthConfig{AdminKeys: []string{"ops-key-1", "ops-key-1"}},
			[]string{"auth.admin_keys[1]: key \"op\"… (9 characters) is also auth.admin_keys[0]"}},
		{"short key shows nothing", AuthConfig{AdminKeys: []string{"abc", "abc"}}, []string{`key ""… (3 characters)`}},
		{"empty operator key", AuthConfig{AdminKeys: []string{""}}, []string{"auth.admin_keys[0]: empty key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.auth.check()
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("check = nil, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("check = %q, want it to contain %q", err, want)
				}
			}
			for _, k := range append(tt.auth.AdminKeys, long) {
				if len(k) > 4 && strings.Contains(err.Error(), k) {
					t.Errorf("check = %q shows the key %q", err, k)
				}
			}
		})
	}
	t.Run("from the environment", func(t *testing.T) {
		getenv := env(map[string]string{"KERNELD_API_KEYS": long + ":a", "KERNELD_ADMIN_KEYS": "ops-key, " + long})
		f, err := parseFlags(nil, getenv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(f, getenv); err == nil || !strings.Contains(err.Error(), "auth.admin_keys[1]") {
			t.Errorf("loadConfig = %v, want the duplicate named", err)
		}
	})
}

// TestLoadConfig_ConnectionLimits: every connection limit has a default,
// is read from the file, and is overridden by its environment twin; a
// twin that does not parse, or a limit out of range, stops startup
// naming it.
func TestLoadConfig_ConnectionLimits(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "kerneld.yaml", `
http:
  read_header_timeout: 3s
  read_timeout: 20s
  idle_timeout: 40s
  min_body_rate: 500
  body_rate_grace: 2s
  max_connections: 900
  max_streams: 300
  max_streams_per_tenant: 30
  max_connections_per_address: 200
  first_request_timeout: 2s
`)
	def := DefaultConfig().HTTP
	if def.ReadHeaderTimeout != 10*time.Second || def.ReadTimeout != time.Minute || def.IdleTimeout != 2*time.Minute ||
		def.MinBodyRate != 1024 || def.BodyRateGrace != 5*time.Second || def.MaxConnections != 0 ||
		def.MaxStreams != 0 || def.MaxStreamsPerTenant != 1000 || def.MaxConnectionsPerAddress != 2048 ||
		def.FirstRequestTimeout != 5*time.Second || len(def.TrustedProxies) != 0 {
		t.Errorf("defaults = %+v", def)
	}
	checkEnvTwins(t, file, []envTwinCase{
		{"KERNELD_READ_HEADER_TIMEOUT", "3s", "4s", func(c Config) string { return c.HTTP.ReadHeaderTimeout.String() }},
		{"KERNELD_READ_TIMEOUT", "20s", "21s", func(c Config) string { return c.HTTP.ReadTimeout.String() }},
		{"KERNELD_IDLE_TIMEOUT", "40s", "41s", func(c Config) string { return c.HTTP.IdleTimeout.String() }},
		{"KERNELD_MIN_BODY_RATE", "500", "501", func(c Config) string { return strconv.FormatInt(c.HTTP.MinBodyRate, 10) }},
		{"KERNELD_BODY_RATE_GRACE", "2s", "3s", func(c Config) string { return c.HTTP.BodyRateGrace.String() }},
		{"KERNELD_MAX_CONNECTIONS", "900", "901", func(c Config) string { return strconv.Itoa(c.HTTP.MaxConnections) }},
		{"KERNELD_MAX_STREAMS", "300", "301", func(c Config) string { return strconv.Itoa(c.HTTP.MaxStreams) }},
		{"KERNELD_MAX_STREAMS_PER_TENANT", "30", "31", func(c Config) string { return strconv.Itoa(c.HTTP.MaxStreamsPerTenant) }},
		{"KERNELD_MAX_CONNECTIONS_PER_ADDRESS", "200", "201", func(c Config) string {
			return strconv.Itoa(c.HTTP.MaxConnectionsPerAddress)
		}},
		{"KERNELD_FIRST_REQUEST_TIMEOUT", "2s", "3s", func(c Config) string { return c.HTTP.FirstRequestTimeout.String() }},
	})
}

func TestLoadConfig_TrustedProxies(t *testing.T) {
	file := writeFile(t, t.TempDir(), "kerneld.yaml", "http:\n  trusted_proxies: [10.0.0.5, 10.1.0.0/16]\n")
	c, err := loadConfig(flagValues{config: file}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.HTTP.TrustedProxies, ","); got != "10.0.0.5,10.1.0.0/16" {
		t.Errorf("from the file: %s", got)
	}
	c, err = loadConfig(flagValues{config: file}, env(map[string]string{"KERNELD_TRUSTED_PROXIES": "fd00::/8, 192.168.1.2"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.HTTP.TrustedProxies, ","); got != "fd00::/8,192.168.1.2" {
		t.Errorf("KERNELD_TRUSTED_PROXIES replaces the list: %s", got)
	}
	_, err = loadConfig(flagValues{config: file}, env(map[string]string{"KERNELD_TRUSTED_PROXIES": "nginx"}))
	if err == nil || !strings.Contains(err.Error(), "http.trusted_proxies") || !strings.Contains(err.Error(), `"nginx"`) {
		t.Errorf("a proxy by name: error %v, want one naming the key and the entry", err)
	}
}

// envTwinCase is a key of the config file at checkEnvTwins' path with its
// environment twin: the value in the file, another for the variable, and
// how to read the key.
type envTwinCase struct {
	env, fileValue, envValue string
	get                      func(Config) string
}

// checkEnvTwins checks that each key is read from file, that its twin
// overrides it, and that a twin that does not parse, or is negative,
// stops startup.
func checkEnvTwins(t *testing.T, file string, tests []envTwinCase) {
	t.Helper()
	load := func(t *testing.T, m map[string]string) (Config, error) {
		t.Helper()
		return loadConfig(flagValues{config: file}, env(m))
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			c, err := load(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c); got != tt.fileValue {
				t.Errorf("from the file: %s, want %s", got, tt.fileValue)
			}
			if c, err = load(t, map[string]string{tt.env: tt.envValue}); err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c); got != tt.envValue {
				t.Errorf("%s=%s: %s, want the environment's", tt.env, tt.envValue, got)
			}
			if _, err := load(t, map[string]string{tt.env: "lots"}); err == nil || !strings.Contains(err.Error(), tt.env) {
				t.Errorf("%s=lots: error %v, want one naming the variable", tt.env, err)
			}
			if _, err := load(t, map[string]string{tt.env: "-1" + strings.TrimLeft(tt.envValue, "0123456789")}); err == nil {
				t.Errorf("%s negative: no error", tt.env)
			}
		})
	}
}

func TestPlanConnections(t *testing.T) {
	tests := []struct {
		name                                 string
		http                                 HTTPConfig
		fileLimit                            uint64
		wantConns, wantStreams, wantRefusing int
		wantLowered                          bool
	}{
		{"defaults under a large limit", HTTPConfig{}, 1 << 20, 943719, 471859, 52428, false},
		{"defaults under 20000", HTTPConfig{}, 20000, 18000, 9000, 1000, false},
		{"defaults under 1024", HTTPConfig{}, 1024, 922, 461, 51, false},
		{"a tiny limit keeps half", HTTPConfig{}, 100, 50, 25, 25, false},
		{"configured below the ceiling", HTTPConfig{MaxConnections: 500, MaxStreams: 10}, 20000, 500, 10, 1000, false},
		{"configured above the ceiling", HTTPConfig{MaxConnections: 50000}, 20000, 18000, 9000, 1000, true},
		{"unlimited descriptors", HTTPConfig{}, math.MaxUint64, 1932735283, 966367641, 107374182, false},
		{"unknown limit", HTTPConfig{}, 0, 4096, 2048, 32, false},
		{"unknown limit, configured", HTTPConfig{MaxConnections: 100000}, 0, 100000, 50000, 32, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planConnections(tt.http, tt.fileLimit)
			if p.maxConns != tt.wantConns || p.maxStreams != tt.wantStreams || p.maxRefusing != tt.wantRefusing || p.lowered != tt.wantLowered {
				t.Errorf("plan = %+v, want conns %d streams %d refusing %d lowered %v",
					p, tt.wantConns, tt.wantStreams, tt.wantRefusing, tt.wantLowered)
			}
			if tt.fileLimit > 0 && uint64(p.maxConns+p.maxRefusing) > tt.fileLimit {
				t.Errorf("%d connections and %d being refused exceed the %d descriptors", p.maxConns, p.maxRefusing, tt.fileLimit)
			}
		})
	}
}

// TestLoadConfig_Quotas: every quota has a default, is read from the
// file (0 for no limit), and is overridden by its environment twin; a
// twin that does not parse, or a negative quota, stops startup.
func TestLoadConfig_Quotas(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "kerneld.yaml", `
quotas:
  requests_per_second: 2.5
  request_burst: 0
  max_sessions: 30
  runs_per_minute: 40
  max_concurrent_runs: 5
  tokens_per_day: 1000
`)
	def := DefaultConfig().Quotas
	if def != (QuotasConfig{RequestsPerSecond: 500, RequestBurst: 2000, MaxSessions: 100_000, RunsPerMinute: 1200,
		MaxConcurrentRuns: 500, TokensPerDay: 10_000_000}) {
		t.Errorf("defaults = %+v", def)
	}
	checkEnvTwins(t, file, []envTwinCase{
		{"KERNELD_REQUESTS_PER_SECOND", "2.5", "0.5", func(c Config) string { return strconv.FormatFloat(c.Quotas.RequestsPerSecond, 'g', -1, 64) }},
		{"KERNELD_REQUEST_BURST", "0", "9", func(c Config) string { return strconv.Itoa(c.Quotas.RequestBurst) }},
		{"KERNELD_MAX_SESSIONS", "30", "0", func(c Config) string { return strconv.Itoa(c.Quotas.MaxSessions) }},
		{"KERNELD_RUNS_PER_MINUTE", "40", "41", func(c Config) string { return strconv.Itoa(c.Quotas.RunsPerMinute) }},
		{"KERNELD_MAX_CONCURRENT_RUNS", "5", "6", func(c Config) string { return strconv.Itoa(c.Quotas.MaxConcurrentRuns) }},
		{"KERNELD_TOKENS_PER_DAY", "1000", "1001", func(c Config) string { return strconv.FormatInt(c.Quotas.TokensPerDay, 10) }},
	})
}

// TestLoadConfig_CORSOrigins: none by default; the file lists them, and
// KERNELD_CORS_ORIGINS replaces the list; an origin a browser never sends
// is refused.
func TestLoadConfig_CORSOrigins(t *testing.T) {
	if got := DefaultConfig().HTTP.CORSOrigins; len(got) != 0 {
		t.Errorf("default cors origins = %q, want none", got)
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "kerneld.yaml", "http:\n  cors_origins: [\"http://localhost:5173\", \"https://app.example.com\"]\n")
	c, err := loadConfig(flagValues{config: file}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://localhost:5173", "https://app.example.com"}; !slices.Equal(c.HTTP.CORSOrigins, want) {
		t.Errorf("cors origins from the file = %q, want %q", c.HTTP.CORSOrigins, want)
	}
	c, err = loadConfig(flagValues{config: file}, env(map[string]string{"KERNELD_CORS_ORIGINS": " https://b.example:8443, *,"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://b.example:8443", "*"}; !slices.Equal(c.HTTP.CORSOrigins, want) {
		t.Errorf("cors origins from the environment = %q, want %q", c.HTTP.CORSOrigins, want)
	}
	for _, bad := range []string{"https://app.example.com/", "app.example.com"} {
		_, err := loadConfig(flagValues{config: file}, env(map[string]string{"KERNELD_CORS_ORIGINS": bad}))
		if err == nil || !strings.Contains(err.Error(), "http.cors_origins") {
			t.Errorf("KERNELD_CORS_ORIGINS=%s: error = %v, want one naming http.cors_origins", bad, err)
		}
	}
}
