package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
)

// BenchmarkAppendBatch writes group-commit batches as the appenders do,
// with the one statement the store uses and with the transaction of five
// round trips it replaced (BEGIN, lock the sessions' rows, lock their
// leases, a pipelined INSERT, last-seq UPDATE and NOTIFY, COMMIT). Each op
// writes one batch each way, in alternating order, into stores of their
// own on one server, so that a machine whose load drifts during the run
// weighs on both alike; it reports the mean time of a batch each way. A
// batch is calls of 8 token events (a stream's usual share of one commit)
// on 1 or 16 sessions; with synchronous_commit off the commit does not
// wait for the WAL flush, which leaves the round trips and the
// statements' own work.
//
//	KERNELD_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres \
//	  go test -run '^$' -bench AppendBatch -benchtime 2000x ./internal/store/postgres/
func BenchmarkAppendBatch(b *testing.B) {
	pgtest.Require(b)
	ways := []struct {
		name  string
		write func(s *Store, batch []*appendReq)
	}{
		{"statement", (*Store).writeBatch},
		{"transaction", (*Store).writeBatchTx},
	}
	for _, commit := range []string{"on", "off"} {
		for _, sessions := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/sessions=%d", commit, sessions), func(b *testing.B) {
				stores := make([]*Store, len(ways))
				ids := make([][]string, len(ways))
				tokens := make([][]int64, len(ways))
				for i := range ways {
					s, err := Open(b.Context(), Options{URL: pgtest.Schema(b) + "&synchronous_commit=" + commit})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					stores[i] = s
					ids[i], tokens[i] = benchSessions(b, s, sessions)
				}
				spent := make([]time.Duration, len(ways))
				b.ResetTimer()
				for n := range b.N {
					for k := range ways {
						w := (n + k) % len(ways)
						batch := make([]*appendReq, sessions)
						for i, id := range ids[w] {
							batch[i] = &appendReq{token: tokens[w][i], evs: benchEvents(id, 8), done: make(chan struct{})}
						}
						start := time.Now()
						ways[w].write(stores[w], batch)
						spent[w] += time.Since(start)
						for _, r := range batch {
							if r.err != nil {
								b.Fatal(r.err)
							}
						}
					}
				}
				for w, way := range ways {
					b.ReportMetric(float64(spent[w].Microseconds())/float64(b.N), way.name+"-µs/batch")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func benchSessions(b *testing.B, s *Store, n int) ([]string, []int64) {
	b.Helper()
	var ids []string
	var tokens []int64
	for range n {
		id := uuid.NewString()
		now := time.Now()
		sess := session.Session{ID: id, Tenant: "acme", Agent: "helper", State: session.StateActive, RootID: id,
			CreatedAt: now, UpdatedAt: now}
		if err := s.CreateSession(b.Context(), sess); err != nil {
			b.Fatal(err)
		}
		token, err := s.AcquireLease(b.Context(), id, "bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		ids, tokens = append(ids, id), append(tokens, token)
	}
	return ids, tokens
}

func benchEvents(id string, n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.Event{SessionID: id, RunID: "run", Type: "TEXT_MESSAGE_CONTENT", Time: time.Now(),
			Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"token "}`)}
	}
	return evs
}

// writeBatchTx is how writeBatch wrote a batch before it was one
// statement, kept to measure against: a transaction of five round trips.
func (s *Store) writeBatchTx(batch []*appendReq) {
	ctx := context.Background()
	var accepted []*appendReq
	var firsts []int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		accepted, firsts, err = appendBatchTx(ctx, tx, batch, s.channel(eventsChannel))
		return err
	})
	for i, r := range accepted {
		r.err = err
		if err == nil {
			for j := range r.evs {
				r.evs[j].Seq = firsts[i] + int64(j)
			}
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

func appendBatchTx(ctx context.Context, tx pgx.Tx, batch []*appendReq, channel string) ([]*appendReq, []int64, error) {
	ids := make([]string, 0, len(batch))
	for _, r := range batch {
		r.err = nil
		ids = append(ids, r.evs[0].SessionID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	last, err := lockSeqs(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT session_id, token FROM leases
		WHERE session_id = ANY($1) AND expires_at > kerneld_now_us() ORDER BY session_id FOR UPDATE`, ids)
	if err != nil {
		return nil, nil, err
	}
	tokens := make(map[string]int64, len(ids))
	var id string
	var token int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &token}, func() error { tokens[id] = token; return nil }); err != nil {
		return nil, nil, err
	}
	var events eventRows
	touched := make(map[string]int64, len(ids))
	var accepted []*appendReq
	var firsts []int64
	for _, r := range batch {
		id := r.evs[0].SessionID
		seq, ok := last[id]
		switch {
		case !ok:
			r.err = session.SessionNotFound(id)
			continue
		case tokens[id] != r.token || r.token == 0:
			r.err = session.ErrFenced
			continue
		}
		accepted, firsts = append(accepted, r), append(firsts, seq+1)
		events.add(r.evs, seq+1)
		last[id] = seq + int64(len(r.evs))
		touched[id] = last[id]
	}
	if len(accepted) == 0 {
		return nil, nil, nil
	}
	return accepted, firsts, events.write(ctx, tx, touched, channel)
}
