package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/schedule/scheduletest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// scheduleServer is a test server whose schedules fire on clock, into
// runner, when the test calls svc.FireDue.
type scheduleServer struct {
	*testServer
	svc    *schedule.Service
	clock  *scheduletest.Clock
	runner *scheduletest.Runner
}

func newScheduleServer(t *testing.T, limits schedule.Limits, keys map[string]string) *scheduleServer {
	t.Helper()
	st := memory.New()
	clock, runner := scheduletest.NewClock(), scheduletest.NewRunner()
	svc, err := schedule.New(schedule.Options{Store: st, Runner: runner, Now: clock.Now, Limits: limits})
	require.NoError(t, err)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st, Now: clock.Now},
		api: httpapi.Options{Schedules: svc, APIKeys: keys}})
	return &scheduleServer{testServer: ts, svc: svc, clock: clock, runner: runner}
}

func TestSchedules_CreateGetListDelete(t *testing.T) {
	ts := newScheduleServer(t, schedule.Limits{}, nil)
	id := ts.createSession(t, "echo")
	at := ts.clock.Now().Add(2 * time.Hour)

	res := ts.do(t, "POST", "/sessions/"+id+"/schedules", `{"at":"`+at.Format(time.RFC3339)+`","input":"Stand-up!"}`)
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	once := res.json(t)
	assert.Equal(t, "/sessions/"+id+"/schedules/"+once["id"].(string), res.header.Get("Location"))
	assert.Equal(t, id, once["session_id"])
	assert.Equal(t, at.Format(time.RFC3339), once["at"])
	assert.Equal(t, at.Format(time.RFC3339), once["next_at"])
	assert.Nil(t, once["every"])
	assert.Equal(t, "skip", once["if_busy"])
	assert.Nil(t, once["last_firing"])

	daily := ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/schedules",
		`{"every":"24h","input":"Daily summary, please.","if_busy":"queue"}`)
	assert.Equal(t, "24h", daily["every"])
	assert.Equal(t, ts.clock.Now().Add(24*time.Hour).Format(time.RFC3339), daily["next_at"])
	assert.Equal(t, "queue", daily["if_busy"])

	list := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/schedules", "")["data"].([]any)
	require.Len(t, list, 2)
	assert.Equal(t, once["id"], list[0].(map[string]any)["id"], "oldest first")
	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/schedules/"+daily["id"].(string), "")
	assert.Equal(t, daily, got)

	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/"+id+"/schedules/"+daily["id"].(string), "")
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/schedules/"+daily["id"].(string), ""), http.StatusNotFound, "schedule_not_found")
	wantProblem(t, ts.do(t, "DELETE", "/sessions/"+id+"/schedules/"+daily["id"].(string), ""), http.StatusNotFound, "schedule_not_found")
}

// TestSchedules_Firing: a firing shows in the schedule, and one that fires
// once is gone after it.
func TestSchedules_Firing(t *testing.T) {
	ts := newScheduleServer(t, schedule.Limits{}, nil)
	id := ts.createSession(t, "echo")
	hourly := ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/schedules", `{"every":"1h30m","input":"ping"}`)
	assert.Equal(t, "1h30m", hourly["every"])
	ts.clock.Advance(90 * time.Minute)
	n, err := ts.svc.FireDue(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)

	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/schedules/"+hourly["id"].(string), "")
	assert.Equal(t, float64(1), got["fired"])
	last := got["last_firing"].(map[string]any)
	assert.Equal(t, "started", last["outcome"])
	assert.Equal(t, hourly["next_at"], last["due_at"])
	assert.NotEmpty(t, last["run_id"])
	assert.Nil(t, last["error"])
	req := ts.runner.Requests()[0]
	assert.Equal(t, "default", req.Tenant)
	assert.Equal(t, "ping", req.Input)
}

func TestSchedules_Refused(t *testing.T) {
	ts := newScheduleServer(t, schedule.Limits{Bounds: schedule.Bounds{PerSession: 1}}, nil)
	id := ts.createSession(t, "echo")
	for _, tt := range []struct{ name, body, field, want string }{
		{"neither at nor every", `{"input":"hi"}`, "at", "at or every is required"},
		{"every not a duration", `{"every":"daily","input":"hi"}`, "every", "must be a duration such as 90s"},
		{"every too short", `{"every":"5s","input":"hi"}`, "every", "must be at least 1m0s"},
		{"at not a time", `{"at":"tomorrow","input":"hi"}`, "at", ""},
		{"no input", `{"every":"1h"}`, "input", "required"},
		{"an unknown policy", `{"every":"1h","input":"hi","if_busy":"interrupt"}`, "if_busy", `must be "skip" or "queue"`},
		{"an unknown member", `{"every":"1h","input":"hi","cron":"* * * * *"}`, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/schedules", tt.body), http.StatusBadRequest, "invalid_request")
			if tt.field != "" {
				errs := p["errors"].(map[string]any)
				require.Contains(t, errs, tt.field)
				assert.Contains(t, errs[tt.field], tt.want)
			}
		})
	}
	ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/schedules", `{"every":"1h","input":"hi"}`)
	wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/schedules", `{"every":"1h","input":"again"}`), http.StatusTooManyRequests, "schedule_limit")

	closed := ts.createSession(t, "echo")
	ts.must(t, http.StatusOK, "POST", "/sessions/"+closed+"/close", `{}`)
	wantProblem(t, ts.do(t, "POST", "/sessions/"+closed+"/schedules", `{"every":"1h","input":"hi"}`), http.StatusConflict, "session_closed")
}

// TestSchedules_Tenants: a tenant sees and changes the schedules of its
// own sessions only.
func TestSchedules_Tenants(t *testing.T) {
	ts := newScheduleServer(t, schedule.Limits{}, map[string]string{"key-a": "acme", "key-g": "globex"})
	acme, globex := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-g"}
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)["id"].(string)
	sch := ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/schedules", `{"every":"1h","input":"hi"}`, acme...)
	path := "/sessions/" + id + "/schedules"
	wantProblem(t, ts.do(t, "POST", path, `{"every":"1h","input":"hi"}`, globex...), http.StatusNotFound, "session_not_found")
	wantProblem(t, ts.do(t, "GET", path, "", globex...), http.StatusNotFound, "session_not_found")
	wantProblem(t, ts.do(t, "GET", path+"/"+sch["id"].(string), "", globex...), http.StatusNotFound, "session_not_found")
	wantProblem(t, ts.do(t, "DELETE", path+"/"+sch["id"].(string), "", globex...), http.StatusNotFound, "session_not_found")
	ts.must(t, http.StatusOK, "GET", path+"/"+sch["id"].(string), "", acme...)
	ts.clock.Advance(time.Hour)
	_, err := ts.svc.FireDue(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "acme", ts.runner.Requests()[0].Tenant, "a firing runs as the session's tenant")
}

func TestSchedules_Unavailable(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/schedules", ""), http.StatusServiceUnavailable, "schedules_unavailable")
}
