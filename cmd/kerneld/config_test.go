package main

import (
	"io"
	"os"
	"path/filepath"
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
	getenv := env(map[string]string{"KERNELD_API_KEYS": "k1, k2:acme,", "KERNELD_ADDR": "0.0.0.0:8080"})
	f, err := parseFlags(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(f, getenv)
	if err != nil {
		t.Fatalf("keys set, wildcard address: %v", err)
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
		{"public without keys", "http: {addr: '0.0.0.0:8080'}\n", nil, "refusing to listen on 0.0.0.0:8080 without auth.api_keys"},
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

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "nonsense": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
