package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ kernel.Store = (*sqlite.Store)(nil)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustOpen opens a store and closes it when tb ends; Close may also be
// called earlier.
func mustOpen(tb testing.TB, opts sqlite.Options) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(tb.Context(), opts)
	require.NoError(tb, err, "open %s", opts.Path)
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

// tempPath returns a database path in a fresh directory.
func tempPath(tb testing.TB) string { return filepath.Join(tb.TempDir(), "kerneld.db") }

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// mustCreateSession stores a new top-level session, takes its lease (see
// appendEvents) and returns it.
func mustCreateSession(tb testing.TB, st *sqlite.Store) session.Session {
	tb.Helper()
	id, now := newID(), time.Now().UTC().Truncate(time.Microsecond)
	s := session.Session{ID: id, Tenant: "acme", Agent: "helper", State: session.StateActive,
		RootID: id, CreatedAt: now, UpdatedAt: now}
	require.NoError(tb, st.CreateSession(tb.Context(), s))
	mustLease(tb, st, id)
	return s
}

// tokens holds the token of the lease mustLease last took for each
// session, by id.
var tokens sync.Map

// mustLease takes session id's lease for an hour and keeps its token for
// appendEvents.
func mustLease(tb testing.TB, st *sqlite.Store, id string) int64 {
	tb.Helper()
	token, err := st.AcquireLease(tb.Context(), id, "test", time.Hour)
	require.NoError(tb, err, "acquire lease of %s", id)
	tokens.Store(id, token)
	return token
}

// tokenOf returns the token of the lease mustLease last took for session
// id, 0 if none.
func tokenOf(id string) int64 {
	token, _ := tokens.Load(id)
	t, _ := token.(int64)
	return t
}

// appendEvents appends evs under the lease mustLease last took for their
// session.
func appendEvents(ctx context.Context, st *sqlite.Store, evs []session.Event) error {
	return st.AppendEvents(ctx, tokenOf(evs[0].SessionID), evs)
}

// tokenEvent returns one TEXT_MESSAGE_CONTENT event of session sessionID.
func tokenEvent(sessionID string, n int) session.Event {
	ev := session.TextMessageContent("m1", fmt.Sprintf("token %d ", n))
	ev.SessionID, ev.RunID, ev.Time = sessionID, "run-1", time.Now()
	return ev
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) kernel.Store {
		return mustOpen(t, sqlite.Options{Path: tempPath(t)})
	})
}

// fixture is one of everything a store keeps, written by write.
type fixture struct {
	sess  session.Session
	run   session.Run
	msgs  []session.Message
	entry session.MemoryEntry
	evs   []session.Event
}

func writeFixture(t *testing.T, st *sqlite.Store) fixture {
	ctx := t.Context()
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	id := newID()
	f := fixture{
		sess: session.Session{ID: id, Tenant: "acme", Agent: "helper", Name: "kept",
			Metadata: map[string]string{"team": "core"}, State: session.StateRunning, RootID: id,
			CreatedAt: at, UpdatedAt: at.Add(time.Second), TTL: time.Hour, ExpiresAt: at.Add(time.Hour),
			ActiveRunID: "r1"},
		run: session.Run{ID: "r1", SessionID: id, State: session.RunRunning, Input: "hi",
			IdempotencyKey: "key-1", CreatedAt: at, StartedAt: at.Add(time.Millisecond), StartSeq: 1},
		msgs: []session.Message{
			{ID: "m0", SessionID: id, RunID: "r1", Role: session.RoleUser, Content: "hi", CreatedAt: at},
			{ID: "m1", SessionID: id, RunID: "r1", Role: session.RoleAssistant, CreatedAt: at,
				ToolCalls: []session.ToolCall{{ID: "c1", Name: "current_time", Arguments: "{}"}}},
		},
		entry: session.MemoryEntry{SessionID: id, Key: "k", Value: []byte(`{"v":1}`), UpdatedAt: at},
	}
	require.NoError(t, st.CreateSession(ctx, f.sess))
	token := mustLease(t, st, id)
	require.NoError(t, st.CreateRun(ctx, f.run, session.RunConstraints{}))
	require.NoError(t, st.AppendMessages(ctx, token, f.msgs...))
	require.NoError(t, st.PutMemory(ctx, f.entry, 10))
	f.evs = []session.Event{session.RunStarted(id, "r1"), tokenEvent(id, 1), tokenEvent(id, 2)}
	for i := range f.evs {
		f.evs[i].SessionID, f.evs[i].RunID, f.evs[i].Time = id, "r1", at.Add(time.Duration(i)*time.Microsecond)
	}
	require.NoError(t, st.AppendEvents(ctx, token, f.evs))
	f.sess.LastSeq = 3
	return f
}

func TestStore_Reopen(t *testing.T) {
	ctx, path := t.Context(), filepath.Join(t.TempDir(), "new", "dir", "kerneld.db")
	st := mustOpen(t, sqlite.Options{Path: path})
	f := writeFixture(t, st)
	require.NoError(t, st.Close())

	st = mustOpen(t, sqlite.Options{Path: path})
	got, err := st.GetSession(ctx, f.sess.ID)
	require.NoError(t, err)
	assert.Equal(t, f.sess, got)
	assert.Equal(t, time.UTC, got.CreatedAt.Location(), "times come back in UTC")
	run, err := st.FindRunByIdempotencyKey(ctx, f.sess.ID, "key-1", f.run.CreatedAt)
	require.NoError(t, err, "idempotency key after reopen")
	assert.Equal(t, f.run, run)
	byState, err := st.ListRunsByState(ctx, session.RunRunning)
	require.NoError(t, err)
	assert.Equal(t, []session.Run{f.run}, byState)
	msgs, err := st.ListMessages(ctx, f.sess.ID, 0, 0)
	require.NoError(t, err)
	f.msgs[0].Position, f.msgs[1].Position = 1, 2
	assert.Equal(t, f.msgs, msgs)
	entries, err := st.ListMemory(ctx, f.sess.ID)
	require.NoError(t, err)
	assert.Equal(t, []session.MemoryEntry{f.entry}, entries)
	evs, err := st.ReadEvents(ctx, f.sess.ID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, f.evs, evs)

	// No lease survives the process, and new tokens are greater than any
	// before. The log goes on where it stopped, without a gap.
	old := tokenOf(f.sess.ID)
	more := []session.Event{tokenEvent(f.sess.ID, 3), tokenEvent(f.sess.ID, 4)}
	require.ErrorIs(t, st.AppendEvents(ctx, old, more), session.ErrFenced)
	assert.Greater(t, mustLease(t, st, f.sess.ID), old)
	require.NoError(t, appendEvents(ctx, st, more))
	assert.Equal(t, []int64{4, 5}, []int64{more[0].Seq, more[1].Seq})
	got, err = st.GetSession(ctx, f.sess.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 5, got.LastSeq)
}

func TestOpen_DirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	first := mustOpen(t, sqlite.Options{Path: filepath.Join(dir, "kerneld.db")})
	pid, err := os.ReadFile(filepath.Join(dir, "kerneld.lock"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(pid), "the lock file names its owner")

	// Any database in the directory: the lock is the directory's.
	_, err = sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(dir, "other.db")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("data directory %s is in use by another kerneld (pid %d)", dir, os.Getpid()))
	assert.Contains(t, err.Error(), filepath.Join(dir, "other.db"), "the error names the file")

	require.NoError(t, first.Close())
	mustOpen(t, sqlite.Options{Path: filepath.Join(dir, "kerneld.db")}) // Close released it
}

// createForeignDB writes a SQLite database of another program at path,
// running stmts.
func createForeignDB(t *testing.T, path string, stmts ...string) {
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	for _, stmt := range stmts {
		_, err := db.ExecContext(t.Context(), stmt)
		require.NoError(t, err, stmt)
	}
}

// requireRefused requires Open to fail on path with an error naming it and
// containing want, leaving the file as it was and creating nothing beside
// it but the lock file.
func requireRefused(t *testing.T, path, want string) {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), want)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the refused file is unchanged")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{filepath.Base(path), "kerneld.lock"}, names)
}

func TestOpen_RefusesForeignFiles(t *testing.T) {
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
		want  string
	}{
		{"text file", writeBytes([]byte("name,value\na,1\n")), "is not a SQLite database; refusing to touch it"},
		{"shorter than a header", writeBytes([]byte("SQLite")), "is not a SQLite database; refusing to touch it"},
		{"corrupted database", writeBytes(append([]byte("SQLite format 3\x00"), garbage...)),
			"the database file looks corrupted and kerneld has not modified it"},
		{"another program's database", func(t *testing.T, path string) {
			createForeignDB(t, path, `CREATE TABLE notes (body TEXT)`, `INSERT INTO notes VALUES ('mine')`)
		}, "is a SQLite database but not a kerneld one; refusing to touch it"},
		{"another program's versioned database", func(t *testing.T, path string) {
			createForeignDB(t, path, `CREATE TABLE sessions (id TEXT)`, `PRAGMA user_version = 1`)
		}, "is a SQLite database but not a kerneld one; refusing to touch it"},
		{"another program's database without tables", func(t *testing.T, path string) {
			createForeignDB(t, path, `PRAGMA application_id = 42`)
		}, "is a SQLite database but not a kerneld one; refusing to touch it"},
		{"a versioned database without tables", func(t *testing.T, path string) {
			createForeignDB(t, path, `PRAGMA user_version = 1`)
		}, "is a SQLite database but not a kerneld one; refusing to touch it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			tt.write(t, path)
			requireRefused(t, path, tt.want)
		})
	}
}

func writeBytes(b []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, b, 0o600)) }
}

func TestOpen_RefusesNewerSchema(t *testing.T) {
	path := tempPath(t)
	st := mustOpen(t, sqlite.Options{Path: path})
	mustCreateSession(t, st)
	require.NoError(t, st.Close())
	createForeignDB(t, path, `PRAGMA user_version = 99`) // as a newer kerneld would leave it

	requireRefused(t, path, "has schema version 99, newer than version")
	_, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	assert.Regexp(t, `newer than version \d+ that this kerneld knows`, err.Error())
}

func TestOpen_EmptyFileIsNew(t *testing.T) {
	path := tempPath(t)
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	st := mustOpen(t, sqlite.Options{Path: path})
	require.NoError(t, st.Ping(t.Context()))
}

// writeConcurrently runs writers goroutines that each call write
// perWriter times, with their number and the call's, and waits for them.
func writeConcurrently(t *testing.T, writers, perWriter int, write func(writer, i int) error) {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if err := write(w, i); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// appendConcurrently appends perWriter single events to each of writers
// sessions at once.
func appendConcurrently(t *testing.T, st *sqlite.Store, writers, perWriter int) {
	ids := make([]string, writers)
	for w := range ids {
		ids[w] = mustCreateSession(t, st).ID
	}
	writeConcurrently(t, writers, perWriter, func(w, i int) error {
		return appendEvents(t.Context(), st, []session.Event{tokenEvent(ids[w], i)})
	})
}

func TestStore_AppendsAreGroupCommitted(t *testing.T) {
	const writers, perWriter = 64, 50
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	appendConcurrently(t, st, writers, perWriter)
	stats := st.Stats()
	t.Logf("%d appends in %d commits", stats.Appends, stats.Commits)
	assert.EqualValues(t, writers*perWriter, stats.Appends)
	assert.EqualValues(t, writers*perWriter, stats.Events)
	assert.Less(t, stats.Commits, stats.Appends/4, "commits should be far fewer than appends")
}

func TestStore_CreatesAreGroupCommitted(t *testing.T) {
	const writers, perWriter = 64, 20
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	writeConcurrently(t, writers, perWriter, func(int, int) error {
		id, now := newID(), time.Now().UTC()
		return st.CreateSession(t.Context(), session.Session{ID: id, State: session.StateActive,
			RootID: id, CreatedAt: now, UpdatedAt: now})
	})
	stats := st.Stats()
	t.Logf("%d creates in %d commits", stats.Writes, stats.Batches)
	assert.EqualValues(t, writers*perWriter, stats.Writes)
	assert.Less(t, stats.Batches, stats.Writes/4, "commits should be far fewer than creates")
}

func TestStore_MaxBatch(t *testing.T) {
	const writers, perWriter, maxBatch = 32, 20, 8
	st := mustOpen(t, sqlite.Options{Path: tempPath(t), MaxBatch: maxBatch})
	appendConcurrently(t, st, writers, perWriter)
	stats := st.Stats()
	assert.GreaterOrEqual(t, stats.Commits*maxBatch, stats.Events, "at most %d events per commit", maxBatch)
}

func TestStore_AfterClose(t *testing.T) {
	ctx := t.Context()
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	s := mustCreateSession(t, st)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close twice")

	err := appendEvents(ctx, st, []session.Event{tokenEvent(s.ID, 0)})
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Equal(t, "store_closed", string(errdefs.CodeOf(err)))
	require.Error(t, st.Ping(ctx))
	_, err = st.GetSession(ctx, s.ID)
	require.Error(t, err)
	require.ErrorIs(t, st.CreateSession(ctx, s), errdefs.ErrUnavailable)
}

// TestStore_DeleteWhileAppending recreates a session under appenders'
// feet: whatever interleaving wins, the log left behind must be numbered
// from 1 without gaps, which needs the seq cache to forget deleted sessions.
// Each incarnation gets a lease of its own; appends carrying an old one's
// token are fenced.
func TestStore_DeleteWhileAppending(t *testing.T) {
	ctx := t.Context()
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	s := mustCreateSession(t, st)
	var token atomic.Int64
	token.Store(tokenOf(s.ID))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				err := st.AppendEvents(ctx, token.Load(), []session.Event{tokenEvent(s.ID, i), tokenEvent(s.ID, w)})
				if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, session.ErrFenced) {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	for range 20 {
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, st.DeleteSession(ctx, s.ID))
		require.NoError(t, st.CreateSession(ctx, s))
		token.Store(mustLease(t, st, s.ID))
	}
	close(done)
	wg.Wait()

	evs, err := st.ReadEvents(ctx, s.ID, 0, 0)
	require.NoError(t, err)
	for i, ev := range evs {
		require.EqualValues(t, i+1, ev.Seq, "event %d", i)
	}
	got, err := st.GetSession(ctx, s.ID)
	require.NoError(t, err)
	assert.EqualValues(t, len(evs), got.LastSeq)
	more := []session.Event{tokenEvent(s.ID, 0)}
	require.NoError(t, appendEvents(ctx, st, more))
	assert.EqualValues(t, len(evs)+1, more[0].Seq)
}

// TestOpen_Upgrades opens a database written at schema version 1, as the
// first kerneld left it: every later migration runs at open, every row
// survives, and what the migrations index (metadata, a session's runs) is
// there for the rows written before them.
func TestOpen_Upgrades(t *testing.T) {
	ctx, path := t.Context(), tempPath(t)
	v1, err := os.ReadFile("migrations/0001_init.sql")
	require.NoError(t, err)
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	us := created.UnixMicro()
	id, other := newID(), newID()
	createForeignDB(t, path, string(v1),
		fmt.Sprintf(`INSERT INTO sessions (id, tenant, agent, name, metadata, state, parent_id, root_id, depth,
			created_at, updated_at, ttl, expires_at, last_seq, active_run_id) VALUES
			('%[1]s', 't', 'a', 'old', '{"user":"alice"}', 'active', '', '%[1]s', 0, %[3]d, %[3]d, 0, NULL, 0, ''),
			('%[2]s', 't', 'a', 'other', '{"user":"bob"}', 'active', '', '%[2]s', 0, %[4]d, %[4]d, 0, NULL, 0, '')`,
			id, other, us, us+1),
		fmt.Sprintf(`INSERT INTO runs (session_id, id, state, input, idempotency_key, created_at, input_tokens,
			output_tokens, start_seq, end_seq) VALUES
			('%[1]s', 'r2', 'succeeded', 'first', 'k', %[2]d, 0, 0, 0, 0),
			('%[1]s', 'r1', 'queued', 'second', '', %[2]d, 0, 0, 0, 0)`, id, us),
		`PRAGMA user_version = 1`)

	st := mustOpen(t, sqlite.Options{Path: path})
	got, err := st.GetSession(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, session.Session{ID: id, Tenant: "t", Agent: "a", Name: "old", State: session.StateActive,
		Metadata: map[string]string{"user": "alice"}, RootID: id, CreatedAt: created, UpdatedAt: created}, got)
	listed, err := st.ListSessions(ctx, session.Query{Tenant: "t", Metadata: map[string]string{"user": "alice"}})
	require.NoError(t, err)
	assert.Equal(t, []session.Session{got}, listed, "metadata written before its index")
	listed, err = st.ListSessions(ctx, session.Query{Metadata: map[string]string{"user": "bob"},
		After: &session.Cursor{CreatedAt: created.Add(time.Second), ID: id}})
	require.NoError(t, err)
	assert.Equal(t, []string{other}, []string{listed[0].ID}, "in the listing's order")
	runs, err := st.ListRuns(ctx, id, session.RunQuery{})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, []string{"r1", "r2"}, []string{runs[0].ID, runs[1].ID}, "newest first, by creation")
	queued, err := st.ListRuns(ctx, id, session.RunQuery{States: []session.RunState{session.RunQueued}})
	require.NoError(t, err)
	require.Len(t, queued, 1)
	assert.Equal(t, "r1", queued[0].ID)

	got.InheritMemory, got.ForkedFrom = "copy", other
	got.AgentState = []byte(`{"a":1}`)
	require.NoError(t, st.UpdateSession(ctx, got))
	again, err := st.GetSession(ctx, id)
	require.NoError(t, err)
	got.Version++
	assert.Equal(t, got, again)
	runs[1].Model = "m"
	require.NoError(t, st.UpdateRun(ctx, runs[1]))
}
