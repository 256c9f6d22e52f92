package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfig_ImagesAndSchedules(t *testing.T) {
	def := DefaultConfig()
	assert.Equal(t, ImagesConfig{MaxBytes: 3840 << 10, MaxPerMessage: 16, MaxTenantBytes: 4 << 30, MaxRequestBytes: 24 << 20}, def.Images)
	assert.Equal(t, SchedulesConfig{MaxPerSession: 32, MaxPerTenant: 1000, MinInterval: time.Minute, MaxAhead: 366 * 24 * time.Hour,
		Poll: time.Second, ClaimTTL: 30 * time.Second}, def.Schedules)

	shipped, err := loadConfig(flagValues{config: "../../configs/kerneld.yaml"}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, def.Images, shipped.Images, "configs/kerneld.yaml shows the defaults")
	assert.Equal(t, def.Schedules, shipped.Schedules, "configs/kerneld.yaml shows the defaults")

	file := writeFile(t, t.TempDir(), "kerneld.yaml", `
images: {max_bytes: 1000, max_per_message: 2, max_tenant_bytes: 5000, max_request_bytes: 9000}
schedules: {max_per_session: 3, max_per_tenant: 9, min_interval: 10s, max_ahead: 48h, poll: 100ms, claim_ttl: 5s}
`)
	c, err := loadConfig(flagValues{config: file}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, ImagesConfig{MaxBytes: 1000, MaxPerMessage: 2, MaxTenantBytes: 5000, MaxRequestBytes: 9000}, c.Images)
	assert.Equal(t, SchedulesConfig{MaxPerSession: 3, MaxPerTenant: 9, MinInterval: 10 * time.Second, MaxAhead: 48 * time.Hour,
		Poll: 100 * time.Millisecond, ClaimTTL: 5 * time.Second}, c.Schedules)

	for body, want := range map[string]string{
		"images: {max_bytes: 0}":                    "images: max_bytes",
		"schedules: {max_per_tenant: -1}":           "schedules: max_per_session",
		"schedules: {poll: 10s, claim_ttl: 15s}":    "claim_ttl must be at least twice poll",
		"images: {max_request_bytes: -5}":           "max_request_bytes",
		"schedules: {min_interval: 0s, poll: 1s}":   "min_interval",
		"schedules: {max_ahead: 0s, claim_ttl: 1m}": "max_ahead",
	} {
		file := writeFile(t, t.TempDir(), "kerneld.yaml", body)
		_, err := loadConfig(flagValues{config: file}, env(nil))
		assert.ErrorContains(t, err, want, "config %s", body)
	}
}

// startKerneld runs kerneld in-process with config (YAML) over the
// defaults, data in dataDir, and returns its base URL and a stop function
// that waits for it to exit.
func startKerneld(t *testing.T, config, dataDir string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	file := writeFile(t, t.TempDir(), "kerneld.yaml", config)
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args := []string{"-addr", "127.0.0.1:0", "-agents-dir", "../../configs/agents", "-config", file, "-data-dir", dataDir}
	go func() { done <- run(ctx, args, env(nil), io.Discard, logs) }()
	base := "http://" + waitAddr(t, logs.String)
	waitReady(t, base)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("kerneld did not stop")
		}
	}
	t.Cleanup(stop)
	return base, stop
}

// status GETs url and returns the status of the answer.
func status(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	_ = res.Body.Close() // the status is what is asked for
	return res.StatusCode
}

// TestRun_ScheduleFires: a schedule posted to kerneld as shipped (SQLite)
// fires its run through the kernel, once, and a schedule kept for later
// survives a restart.
func TestRun_ScheduleFires(t *testing.T) {
	dataDir := t.TempDir()
	base, stop := startKerneld(t, "schedules: {poll: 20ms, claim_ttl: 1s}\n", dataDir)
	id := post(t, base+"/sessions", `{"agent":"echo"}`)["id"].(string)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	once := post(t, base+"/sessions/"+id+"/schedules", `{"at":"`+now+`","input":"Good morning"}`)
	later := post(t, base+"/sessions/"+id+"/schedules", `{"every":"24h","input":"Daily summary"}`)

	var page struct{ Data []map[string]any }
	pollUntil(t, "the schedule's run", func() bool {
		getJSON(t, base+"/sessions/"+id+"/runs", &page)
		return len(page.Data) > 0
	})
	run := page.Data[0]
	assert.Equal(t, "Good morning", run["input"])
	assert.True(t, strings.HasPrefix(run["idempotency_key"].(string), "schedule:"+once["id"].(string)+":"), "key %v", run["idempotency_key"])
	pollUntil(t, "the schedule that fires once to go once it fired", func() bool {
		return status(t, base+"/sessions/"+id+"/schedules/"+once["id"].(string)) == http.StatusNotFound
	})

	stop()
	base, _ = startKerneld(t, "schedules: {poll: 20ms, claim_ttl: 1s}\n", dataDir)
	var got map[string]any
	getJSON(t, base+"/sessions/"+id+"/schedules/"+later["id"].(string), &got)
	assert.Equal(t, later["next_at"], got["next_at"], "kept across the restart")
	getJSON(t, base+"/sessions/"+id+"/runs", &page)
	assert.Len(t, page.Data, 1, "the fired schedule did not fire again after the restart")

	post(t, base+"/sessions/"+id+"/close", `{}`)
	pollUntil(t, "the closed session's schedules to go", func() bool {
		getJSON(t, base+"/sessions/"+id+"/schedules", &page)
		return len(page.Data) == 0
	})
}
