package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

// BenchmarkServerCPU measures what the store costs the Redis server, in
// its own CPU time (INFO cpu), per appended token event and per run
// start, beside this process's CPU time (client-µs, go-redis and the
// store's own work). The server's CPU is all of it, whoever asked: run it
// against a server nothing else uses, e.g.
//
//	redis-server --port 16399 --save '' --appendonly no &
//	KERNELD_TEST_REDIS_URL=redis://127.0.0.1:16399/0 go test -run '^$' -bench ServerCPU ./internal/store/redis/
//
// The append sub-benchmarks append batches of word-sized token events of
// one run to one session, as a run's event writer does; with tail, a
// tailer follows the session as the hub does for its streams, so what the
// server reads back for it counts too.
func BenchmarkServerCPU(b *testing.B) {
	redistest.Require(b)
	for _, batch := range []int{1, 16, 64} {
		for _, tail := range []bool{false, true} {
			b.Run(fmt.Sprintf("append/batch=%d/tail=%v", batch, tail), func(b *testing.B) {
				benchAppendCPU(b, batch, tail)
			})
		}
	}
	b.Run("runstart", benchRunStartCPU)
}

func benchAppendCPU(b *testing.B, batch int, tail bool) {
	srv := redistest.Use(b)
	st := mustOpen(b, srv)
	id := mustCreateSession(b, st).ID
	evs := wordTokens(id, batch)
	if tail {
		followed(b, st, id)
	}
	ctx := b.Context()
	require.NoError(b, appendEvents(ctx, st, evs)) // the lease, and a warm connection
	m := startCPU(b, srv)
	for b.Loop() {
		if err := appendEvents(ctx, st, evs); err != nil {
			b.Fatal(err)
		}
	}
	m.report(b, b.N*batch, "event")
}

func benchRunStartCPU(b *testing.B) {
	srv := redistest.Use(b)
	st := mustOpen(b, srv)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
	}
	ctx := b.Context()
	m := startCPU(b, srv)
	b.ResetTimer()
	for _, id := range ids {
		if err := storetest.StartRun(ctx, st, id); err != nil {
			b.Fatal(err)
		}
	}
	m.report(b, b.N, "run")
}

// followed has a tailer follow session id until b ends, discarding what
// it delivers.
func followed(b *testing.B, st *redis.Store, id string) {
	tl, err := st.NewTailer(func([]session.Event) {})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		assert.NoError(b, <-done)
		assert.NoError(b, tl.Close())
	})
	tl.Follow(id, 0)
}

// wordTokens returns n token events of one assistant message of one run
// of session id, as big as a model's word-sized tokens make them.
func wordTokens(id string, n int) []session.Event {
	runID, msgID := session.NewID(), session.NewMessageID()
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.TextMessageContent(msgID, " word"+strconv.Itoa(i%10))
		evs[i].SessionID, evs[i].RunID, evs[i].Time = id, runID, time.Now()
	}
	return evs
}

// cpuMeter is the CPU time of the Redis server and of this process when
// a benchmark's timed part began.
type cpuMeter struct {
	srv            redistest.Server
	server, client time.Duration
}

func startCPU(b *testing.B, srv redistest.Server) cpuMeter {
	return cpuMeter{srv: srv, server: serverCPU(b, srv), client: storetest.CPUTime()}
}

// report reports the CPU time since startCPU per one of n units.
func (m cpuMeter) report(b *testing.B, n int, unit string) {
	b.StopTimer()
	server, client := serverCPU(b, m.srv)-m.server, storetest.CPUTime()-m.client
	b.ReportMetric(float64(server.Nanoseconds())/1e3/float64(n), "redis-µs/"+unit)
	b.ReportMetric(float64(client.Nanoseconds())/1e3/float64(n), "client-µs/"+unit)
}

// serverCPU returns the Redis server's CPU time, user and system, from
// INFO cpu.
func serverCPU(b *testing.B, srv redistest.Server) time.Duration {
	info, err := srv.Client(b).Info(context.Background(), "cpu").Result()
	require.NoError(b, err)
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(b, err, "INFO cpu %s", line)
			sum += v
		}
	}
	return time.Duration(sum * float64(time.Second))
}
