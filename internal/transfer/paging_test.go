package transfer_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/transfer"
)

// TestExport_PagesThroughEverything moves more sessions, runs and
// messages than one page of each holds, so that every paging loop turns.
func TestExport_PagesThroughEverything(t *testing.T) {
	src := openMemory(t)
	var ids []string
	for i := range 23 { // sessions: four pages
		s := session.Session{ID: session.NewID(), Tenant: fmt.Sprint("t", i%3), Agent: "echo",
			State: session.StateActive, CreatedAt: at(i % 7), UpdatedAt: at(i)} // equal times: the cursor's id decides
		s.RootID = s.ID
		require.NoError(t, src.CreateSession(t.Context(), s))
		ids = append(ids, s.ID)
	}
	big := ids[17]
	token, err := src.AcquireLease(t.Context(), big, "test", time.Minute)
	require.NoError(t, err)
	for j := range 12 { // runs: three pages
		require.NoError(t, src.CreateRun(t.Context(), session.Run{ID: session.NewID(), SessionID: big,
			State: session.RunSucceeded, Input: fmt.Sprint("input ", j), CreatedAt: at(j)}, session.RunConstraints{}))
	}
	var msgs []session.Message
	for j := range 10 { // messages: three pages
		msgs = append(msgs, session.Message{ID: fmt.Sprint("m", j), SessionID: big, Role: session.RoleUser,
			Content: fmt.Sprint("message ", j), CreatedAt: at(j)})
	}
	require.NoError(t, src.AppendMessages(t.Context(), token, msgs...))
	seedEvents(t, src, big, token, 120)

	var dump bytes.Buffer
	sum, err := transfer.Export(t.Context(), src, &dump, transfer.ExportOptions{})
	require.NoError(t, err)
	assert.Equal(t, 23, sum.Sessions)
	assert.Equal(t, transfer.Counts{Runs: 12, Messages: 10, Events: 120}, sum.Counts)

	dst := openMemory(t)
	_, err = transfer.Import(t.Context(), dst, bytes.NewReader(dump.Bytes()), transfer.ImportOptions{})
	require.NoError(t, err)
	requireSameSessions(t, src, dst, ids)
	runs, err := dst.ListRuns(t.Context(), big, session.RunQuery{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, "input 11", runs[0].Input, "runs keep their order: the newest lists first")
}
