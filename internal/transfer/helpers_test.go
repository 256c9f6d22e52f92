package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/transfer"
)

// store is a backend as transfer sees it. Those that keep images and
// schedules are also imageStore and scheduleStore.
type store = transfer.Target

type imageStore interface {
	PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error
	ListImages(ctx context.Context, sessionID string) ([]session.Image, error)
	GetImage(ctx context.Context, sessionID, hash string) (session.Image, error)
	ReleaseImages(ctx context.Context, sessionID string) error
}

type scheduleStore interface {
	CreateSchedule(ctx context.Context, s schedule.Schedule, b schedule.Bounds) error
	ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error)
	DeleteSessionSchedules(ctx context.Context, sessionID string) error
}

// keepsAll reports whether st keeps images and schedules.
func keepsAll(st store) bool {
	_, images := st.(imageStore)
	_, schedules := st.(scheduleStore)
	return images && schedules
}

// plain hides whether a store keeps images and schedules.
type plain struct{ transfer.Target }

// openSQLite opens a fresh SQLite store in its own directory.
func openSQLite(t *testing.T) store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "kerneld.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// openRedis opens a store on the test Redis under a prefix of its own.
func openRedis(t *testing.T) store {
	t.Helper()
	srv := redistest.Use(t)
	st, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func openMemory(t *testing.T) store { return memory.New() }

// openPostgres opens a store in a schema of its own on the test server.
func openPostgres(t *testing.T) store {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgres.Options{URL: pgtest.Schema(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// epoch is the base of fixture times: microseconds, in a zone not UTC.
var epoch = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.FixedZone("UTC+2", 2*60*60))

func at(n int) time.Time { return epoch.Add(time.Duration(n) * time.Second) }

// fixture is what seed wrote: the sessions, in creation order.
type fixture struct {
	ids []string
}

// seed writes n sessions of two tenants into st, each with every kind of
// record st keeps and events enough to take several pages, and bytes that a
// careless encoder would change: HTML characters, JSON with spaces, and
// text that is not JSON.
func seed(t *testing.T, st store, n, events int) fixture {
	t.Helper()
	var f fixture
	for i := range n {
		id := session.NewID()
		f.ids = append(f.ids, id)
		s := session.Session{
			ID: id, Tenant: []string{"acme", "globex"}[i%2], Agent: "echo", Name: fmt.Sprintf("chat %d", i),
			Metadata: map[string]string{"user": fmt.Sprint(i), "plan": "pro"}, State: session.StateCompleted,
			RootID: id, CreatedAt: at(i), UpdatedAt: at(i + 100), TTL: time.Hour, ExpiresAt: at(i + 3600),
			Version: 3,
			SessionExt: session.SessionExt{AgentState: []byte(`{"step":2}`), Model: "scripted",
				Overrides: &session.Overrides{Model: "scripted"}},
		}
		if i > 0 && i%3 == 0 {
			s.ParentID, s.RootID, s.Depth, s.InheritMemory = f.ids[0], f.ids[0], 1, "copy"
		}
		require.NoError(t, st.CreateSession(t.Context(), s))
		seedSession(t, st, s, events+i)
	}
	return f
}

func seedSession(t *testing.T, st store, s session.Session, events int) {
	t.Helper()
	ctx := t.Context()
	token, err := st.AcquireLease(ctx, s.ID, "seed", time.Minute)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.ReleaseLease(ctx, s.ID, token)) }()
	for j, state := range []session.RunState{session.RunSucceeded, session.RunFailed, session.RunQueued} {
		r := session.Run{ID: session.NewID(), SessionID: s.ID, State: state, Input: fmt.Sprintf("hi <%d> & bye", j),
			IdempotencyKey: fmt.Sprint("key-", j), CreatedAt: at(10 + j), StartedAt: at(11 + j),
			Usage: session.Usage{InputTokens: 10, OutputTokens: 20}, StartSeq: 1, EndSeq: 4, Version: 2,
			RunExt: session.RunExt{IfBusy: "queue", Model: "scripted", Resumes: 1}}
		if state == session.RunFailed {
			r.Error, r.EndedAt = &session.RunError{Code: "model_error", Message: "boom"}, at(20)
		}
		if state == session.RunQueued {
			r.StartedAt = time.Time{}
		}
		require.NoError(t, st.CreateRun(ctx, r, session.RunConstraints{}))
	}
	var refs []session.ImageRef
	if keepsAll(st) {
		refs = seedExtras(t, st, s)
	}
	require.NoError(t, st.PutMemory(ctx, session.MemoryEntry{SessionID: s.ID, Key: "prefs",
		Value: []byte(`{"lang": "en",  "tags":["<a>"]}`), UpdatedAt: at(8)}, 0))
	require.NoError(t, st.PutMemory(ctx, session.MemoryEntry{SessionID: s.ID, Key: "n",
		Value: []byte(`42`), UpdatedAt: at(9)}, 0))
	msgs := []session.Message{
		{ID: "m1", SessionID: s.ID, RunID: "r", Role: session.RoleUser, Content: "look <b>this</b> & that",
			Images: refs, CreatedAt: at(12)},
		{ID: "m2", SessionID: s.ID, RunID: "r", Role: session.RoleAssistant,
			ToolCalls: []session.ToolCall{{ID: "c1", Name: "current_time", Arguments: `{"tz": "UTC"}`}}, CreatedAt: at(13)},
		{ID: "m3", SessionID: s.ID, RunID: "r", Role: session.RoleTool, Content: "oops", ToolCallID: "c1",
			IsError: true, CreatedAt: at(14)},
		{ID: "m4", SessionID: s.ID, RunID: "r", Role: session.RoleAssistant, Content: "done", CreatedAt: at(15)},
	}
	require.NoError(t, st.AppendMessages(ctx, token, msgs...))
	seedEvents(t, st, s.ID, token, events)
}

// seedExtras gives session s an image and a schedule, and returns the
// image's reference.
func seedExtras(t *testing.T, st store, s session.Session) []session.ImageRef {
	t.Helper()
	ctx := t.Context()
	img := []byte("\x89PNG fake image " + s.ID)
	hash := session.ImageHash(img)
	require.NoError(t, st.(imageStore).PutImage(ctx, s.ID, session.Image{Tenant: s.Tenant, Hash: hash,
		MediaType: "image/png", Size: int64(len(img)), Data: img, CreatedAt: at(5)}, 0))
	require.NoError(t, st.(scheduleStore).CreateSchedule(ctx, schedule.Schedule{ID: session.NewID(), Tenant: s.Tenant,
		SessionID: s.ID, Every: time.Hour, Input: "ping", IfBusy: schedule.IfBusySkip, NextAt: at(7200),
		CreatedAt: at(6), Fired: 2, Last: &schedule.Firing{At: at(3600).UTC(), DueAt: at(3600).UTC(), Outcome: "skipped"}},
		schedule.Bounds{}))
	return []session.ImageRef{{Hash: hash, MediaType: "image/png"}}
}

// seedEvents appends n events in batches of up to 300.
func seedEvents(t *testing.T, st store, id string, token int64, n int) {
	t.Helper()
	for done := 0; done < n; {
		var batch []session.Event
		for i := done; i < min(n, done+300); i++ {
			ev := session.Event{SessionID: id, RunID: "run-1", Type: session.EventTextMessageContent,
				Time: at(20 + i), Data: fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m4","delta":"tok <%d> & \u2028"}`, i)}
			switch i % 97 {
			case 1:
				ev.Meta = []byte(`{"reason":"cancelled"}`)
			case 2:
				ev.Type, ev.Data = session.EventStateSnapshot, []byte(`{"type":"STATE_SNAPSHOT", "snapshot": {"a": 1}}`)
			}
			batch = append(batch, ev)
		}
		require.NoError(t, st.AppendEvents(t.Context(), token, batch))
		done += len(batch)
	}
}

// export dumps st.
func export(t *testing.T, st store) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := transfer.Export(t.Context(), st, &buf, transfer.ExportOptions{Source: "test"})
	require.NoError(t, err)
	return buf.Bytes()
}

// requireSameSessions fails t unless dst holds every session of src as
// src does: the same fields (but the version and import mark), runs,
// messages, memory, images, schedules, and events byte for byte.
func requireSameSessions(t *testing.T, src, dst store, ids []string) {
	t.Helper()
	ctx := t.Context()
	opts := cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(0),
		cmpopts.IgnoreFields(session.Session{}, "Version"), cmpopts.IgnoreFields(session.SessionExt{}, "Imported"),
		cmpopts.IgnoreFields(schedule.Schedule{}, "Claim")}
	for _, id := range ids {
		want, err := src.GetSession(ctx, id)
		require.NoError(t, err)
		got, err := dst.GetSession(ctx, id)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(want, got, opts), "session %s", id)
		require.NotNil(t, got.Imported, "session %s has no import mark", id)
		require.True(t, got.Imported.Done, "session %s is not marked done", id)
		compare(t, opts, id, "runs", func(st store) (any, error) { return st.ListRuns(ctx, id, session.RunQuery{}) }, src, dst)
		compare(t, opts, id, "messages", func(st store) (any, error) { return st.ListMessages(ctx, id, 0, 0) }, src, dst)
		compare(t, opts, id, "memory", func(st store) (any, error) { return st.ListMemory(ctx, id) }, src, dst)
		if keepsAll(src) && keepsAll(dst) {
			compare(t, opts, id, "images", func(st store) (any, error) { return st.(imageStore).ListImages(ctx, id) }, src, dst)
			compare(t, opts, id, "schedules", func(st store) (any, error) { return st.(scheduleStore).ListSchedules(ctx, id) }, src, dst)
		}
		requireSameEvents(t, src, dst, id)
	}
}

func compare(t *testing.T, opts cmp.Options, id, what string, list func(store) (any, error), src, dst store) {
	t.Helper()
	want, err := list(src)
	require.NoError(t, err)
	got, err := list(dst)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(want, got, opts), "%s of session %s", what, id)
}

// requireSameEvents compares two logs seq for seq, Data and Meta byte
// for byte.
func requireSameEvents(t *testing.T, src, dst store, id string) {
	t.Helper()
	want, err := src.ReadEvents(t.Context(), id, 0, 0)
	require.NoError(t, err)
	got, err := dst.ReadEvents(t.Context(), id, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, len(want), "events of session %s", id)
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.Seq, g.Seq)
		require.Equal(t, string(w.Data), string(g.Data), "data of event %d of session %s", w.Seq, id)
		require.Equal(t, string(w.Meta), string(g.Meta), "meta of event %d of session %s", w.Seq, id)
		require.Equal(t, []any{w.Type, w.RunID, w.Time.UnixMicro()}, []any{g.Type, g.RunID, g.Time.UnixMicro()},
			"event %d of session %s", w.Seq, id)
	}
}
