package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/transfer"
)

// TestMain lowers the page sizes, so that a few records turn every paging
// loop.
func TestMain(m *testing.M) {
	transfer.SetPages(7, 5, 4, 50)
	os.Exit(m.Run())
}

// targets are the stores a dump is imported into.
var targets = []struct {
	name string
	open func(t *testing.T) store
}{
	{"sqlite", openSQLite},
	{"redis", openRedis},
	{"postgres", openPostgres},
	{"memory", openMemory},
}

func TestImport_MovesEverySessionSeqForSeq(t *testing.T) {
	// A store that keeps no images or schedules gets a dump without them.
	full, plainSrc := newSource(t, openSQLite(t)), newSource(t, plain{openSQLite(t)})
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.open(t)
			src, extras := full, 1
			if !keepsAll(dst) {
				src, extras = plainSrc, 0
			}
			sum, err := transfer.Import(t.Context(), dst, bytes.NewReader(src.dump), transfer.ImportOptions{})
			require.NoError(t, err)
			assert.Equal(t, 3, sum.Sessions)
			assert.Equal(t, transfer.Counts{Runs: 9, Messages: 12, Memory: 6, Images: 3 * extras, Schedules: 3 * extras,
				Events: 3*110 + 0 + 1 + 2}, sum.Counts)
			requireSameSessions(t, src.st, dst, src.f.ids)
			rep, err := transfer.Verify(t.Context(), dst, bytes.NewReader(src.dump))
			require.NoError(t, err)
			assert.Empty(t, rep.Mismatches)
			assert.Equal(t, 3, rep.Sessions)
		})
	}
}

func TestImport_RefusesImagesAStoreCannotKeep(t *testing.T) {
	src := openSQLite(t)
	seed(t, src, 1, 3)
	_, err := transfer.Import(t.Context(), plain{openSQLite(t)}, bytes.NewReader(export(t, src)), transfer.ImportOptions{})
	require.ErrorIs(t, err, errdefs.ErrUnprocessable)
	assert.Equal(t, errdefs.CodeImagesUnsupported, errdefs.CodeOf(err))
}

func TestImport_TwiceRefuses(t *testing.T) {
	src := openSQLite(t)
	f := seed(t, src, 2, 10)
	dump := export(t, src)
	dst := openSQLite(t)
	_, err := transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{})
	require.NoError(t, err)

	_, err = transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{})
	require.ErrorIs(t, err, errdefs.ErrConflict)
	assert.Equal(t, "session_imported", string(errdefs.CodeOf(err)))

	t.Run("another dump of the same sessions", func(t *testing.T) {
		_, err := transfer.Import(t.Context(), dst, bytes.NewReader(export(t, src)), transfer.ImportOptions{})
		require.ErrorIs(t, err, errdefs.ErrConflict)
		assert.Equal(t, "session_exists", string(errdefs.CodeOf(err)))
	})
	t.Run("overwrite replaces", func(t *testing.T) {
		ctx := t.Context()
		require.NoError(t, dst.PutMemory(ctx, session.MemoryEntry{SessionID: f.ids[1], Key: "extra", Value: []byte(`1`)}, 0))
		sum, err := transfer.Import(ctx, dst, bytes.NewReader(export(t, src)), transfer.ImportOptions{Overwrite: true})
		require.NoError(t, err)
		assert.Equal(t, 2, sum.Sessions)
		requireSameSessions(t, src, dst, f.ids)
	})
}

func TestImport_CutShortResumes(t *testing.T) {
	full, plainSrc := newSource(t, openSQLite(t)), newSource(t, plain{openSQLite(t)})
	for _, tc := range targets[:3] {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.open(t)
			src := full
			if !keepsAll(dst) {
				src = plainSrc
			}
			testCutShortResumes(t, src, dst)
		})
	}
}

// source is a seeded store and its dump.
type source struct {
	st   store
	f    fixture
	dump []byte
}

func newSource(t *testing.T, st store) source {
	f := seed(t, st, 3, 110) // events take three pages
	return source{st: st, f: f, dump: export(t, st)}
}

func testCutShortResumes(t *testing.T, src source, dst store) {
	dump := src.dump
	lines := bytes.SplitAfter(dump, []byte("\n"))
	// Cut in the middle of the second session's events, and mid-line.
	cut := len(bytes.Join(lines[:len(lines)/2], nil)) + 25

	_, err := transfer.Import(t.Context(), dst, bytes.NewReader(dump[:cut]), transfer.ImportOptions{})
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	require.Contains(t, err.Error(), "cut short")
	rep, err := transfer.Verify(t.Context(), dst, bytes.NewReader(dump))
	require.NoError(t, err)
	require.Len(t, rep.Mismatches, 2, "the session cut and the one never reached differ")

	_, err = transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{})
	require.ErrorIs(t, err, errdefs.ErrConflict, "without --resume the finished session refuses")

	sum, err := transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{Resume: true})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Skipped)
	assert.Equal(t, 2, sum.Sessions)
	requireSameSessions(t, src.st, dst, src.f.ids)
	rep, err = transfer.Verify(t.Context(), dst, bytes.NewReader(dump))
	require.NoError(t, err)
	assert.Empty(t, rep.Mismatches)
}

// failingTarget fails the store's nth append of events or messages, as a
// store that goes away mid-import does.
type failingTarget struct {
	fullStore
	n     int
	calls int
}

// fullStore is a store that keeps images and schedules.
type fullStore interface {
	transfer.Target
	imageStore
	scheduleStore
}

var errInjected = errors.New("injected store failure")

func (f *failingTarget) fail() error {
	f.calls++
	if f.calls == f.n {
		return errInjected
	}
	return nil
}

func (f *failingTarget) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.fullStore.AppendEvents(ctx, token, evs)
}

func (f *failingTarget) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.fullStore.AppendMessages(ctx, token, msgs...)
}

func TestImport_StoreFailureResumes(t *testing.T) {
	src := openSQLite(t)
	f := seed(t, src, 3, 110)
	dump := export(t, src)
	// Appends are: the first session's messages, its three pages of
	// events, then the second session's. Fail the first, the second page
	// of events (the first is in) and the second session's messages.
	for _, n := range []int{1, 3, 5} {
		dst := openSQLite(t)
		_, err := transfer.Import(t.Context(), &failingTarget{fullStore: dst.(fullStore), n: n}, bytes.NewReader(dump), transfer.ImportOptions{})
		require.ErrorIs(t, err, errInjected, "fail append %d", n)

		sum, err := transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{Resume: true})
		require.NoError(t, err, "resume after failed append %d", n)
		assert.Equal(t, 3, sum.Sessions+sum.Skipped)
		requireSameSessions(t, src, dst, f.ids)
	}
}

func TestVerify_FindsDifferences(t *testing.T) {
	src := openSQLite(t)
	f := seed(t, src, 4, 20)
	dump := export(t, src)
	dst := openSQLite(t)
	_, err := transfer.Import(t.Context(), dst, bytes.NewReader(dump), transfer.ImportOptions{})
	require.NoError(t, err)
	ctx := t.Context()

	require.NoError(t, dst.PutMemory(ctx, session.MemoryEntry{SessionID: f.ids[0], Key: "n", Value: []byte(`43`),
		UpdatedAt: at(9)}, 0))
	token, err := dst.AcquireLease(ctx, f.ids[1], "test", time.Minute)
	require.NoError(t, err)
	require.NoError(t, dst.AppendEvents(ctx, token, []session.Event{{SessionID: f.ids[1], Type: session.EventCustom,
		Data: []byte(`{"type":"CUSTOM"}`), Time: at(0)}}))
	require.NoError(t, dst.DeleteSession(ctx, f.ids[2]))

	rep, err := transfer.Verify(ctx, dst, bytes.NewReader(dump))
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range rep.Mismatches {
		got[m.SessionID] = m.Problem
	}
	require.Len(t, got, 3, "mismatches: %v", rep.Mismatches)
	assert.Contains(t, got[f.ids[0]], "contents differ")
	assert.Contains(t, got[f.ids[1]], "events: 21 in the dump, 22 in the store")
	assert.Equal(t, "missing from the store", got[f.ids[2]])
}

func TestImport_RefusesBadDumps(t *testing.T) {
	src := openSQLite(t)
	seed(t, src, 1, 5)
	dump := string(export(t, src))
	header, rest, _ := strings.Cut(dump, "\n")
	cases := []struct {
		name, dump, want string
	}{
		{"empty", "", "empty"},
		{"no header", rest, "starts with its header"},
		{"newer version", strings.Replace(header, `"version":1`, `"version":2`, 1) + "\n" + rest, "newer than this kerneld"},
		{"altered record", strings.Replace(dump, "look <b>this</b>", "look <i>this</i>", 1), "altered or damaged"},
		{"not JSON", header + "\n{oops\n", "not a JSON record"},
		{"a line without end", header + "\n" + strings.Repeat("x", 1<<20), "longer than"},
	}
	defer transfer.SetMaxLine(len(dump))() // the dump's lines fit, the line without end does not
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transfer.Import(t.Context(), openMemory(t), strings.NewReader(tc.dump), transfer.ImportOptions{})
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestExport_EmptyStore(t *testing.T) {
	var buf bytes.Buffer
	sum, err := transfer.Export(t.Context(), openMemory(t), &buf, transfer.ExportOptions{})
	require.NoError(t, err)
	assert.Zero(t, sum.Sessions)
	isum, err := transfer.Import(t.Context(), openMemory(t), &buf, transfer.ImportOptions{})
	require.NoError(t, err)
	assert.Zero(t, isum.Sessions)
	_, err = io.Copy(io.Discard, &buf)
	require.NoError(t, err)
}
