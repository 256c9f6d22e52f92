package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// The sessions' schedules (schedule.Store). Keys, after the prefix P:
//
//	P{id}:sched     hash: schedule id → its record as JSON (scheduleRecord)
//	P{id}:schedc    hash: schedule id → "<token> <claim end, micros> [holder]"
//	P sched:due     sorted set: "<session id> TAB <schedule id>", scored by
//	                when it is due, or when its claim ends while claimed
//	P sched:n:<t>   string: how many schedules tenant t has
//
// Scoring a claimed schedule by the end of its claim makes ClaimDue one
// ZRANGEBYSCORE: what it finds is due and unclaimed, or claimed by a
// holder that did not finish in time. Scores are microseconds, which a
// double holds exactly until the year 2255. Deleting a session leaves
// its schedules to DeleteSessionSchedules.
var (
	scriptScheduleCreate = newScript("schedule_create")
	scriptScheduleDelete = newScript("schedule_delete")
	scriptScheduleClaim  = newScript("schedule_claim")
	scriptScheduleFinish = newScript("schedule_finish")
)

// scheduleRecord is a schedule as stored; its claim is kept apart.
type scheduleRecord struct {
	ID        string           `json:"id"`
	Tenant    string           `json:"tenant"`
	SessionID string           `json:"session_id"`
	At        int64            `json:"at,omitempty"` // micros; 0: none
	Every     int64            `json:"every,omitempty"`
	Input     string           `json:"input"`
	IfBusy    string           `json:"if_busy"`
	NextAt    int64            `json:"next_at"`
	CreatedAt int64            `json:"created_at"`
	Fired     int64            `json:"fired,omitempty"`
	Last      *schedule.Firing `json:"last,omitempty"`
}

func toScheduleRecord(s schedule.Schedule) scheduleRecord {
	r := scheduleRecord{ID: s.ID, Tenant: s.Tenant, SessionID: s.SessionID, Every: int64(s.Every), Input: s.Input,
		IfBusy: s.IfBusy, NextAt: s.NextAt.UnixMicro(), CreatedAt: s.CreatedAt.UnixMicro(), Fired: s.Fired, Last: s.Last}
	if !s.At.IsZero() {
		r.At = s.At.UnixMicro()
	}
	return r
}

func (r scheduleRecord) schedule() schedule.Schedule {
	s := schedule.Schedule{ID: r.ID, Tenant: r.Tenant, SessionID: r.SessionID, Every: time.Duration(r.Every),
		Input: r.Input, IfBusy: r.IfBusy, NextAt: time.UnixMicro(r.NextAt).UTC(),
		CreatedAt: time.UnixMicro(r.CreatedAt).UTC(), Fired: r.Fired, Last: r.Last}
	if r.At != 0 {
		s.At = time.UnixMicro(r.At).UTC()
	}
	return s
}

func (s *Store) schedulesKey(sessionID string) string { return s.prefix + "{" + sessionID + "}:sched" }
func (s *Store) claimsKey(sessionID string) string    { return s.prefix + "{" + sessionID + "}:schedc" }
func (s *Store) dueKey() string                       { return s.prefix + "sched:due" }
func (s *Store) tenantSchedulesKey(tenant string) string {
	return s.prefix + "sched:n:" + tenant
}
func dueMember(sessionID, id string) string { return sessionID + "\t" + id }

// CreateSchedule stores sch; see schedule.Store.
func (s *Store) CreateSchedule(ctx context.Context, sch schedule.Schedule, b schedule.Bounds) error {
	rec, err := json.Marshal(toScheduleRecord(sch))
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", sch.ID, err)
	}
	keys := []string{s.keysOf(sch.SessionID).s, s.schedulesKey(sch.SessionID), s.dueKey(), s.tenantSchedulesKey(sch.Tenant)}
	err = scriptScheduleCreate.Run(ctx, s.rdb, keys, sch.ID, dueMember(sch.SessionID, sch.ID), rec,
		sch.NextAt.UnixMicro(), max(b.PerSession, 0), max(b.PerTenant, 0)).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(sch.SessionID)
	case isReply(err, replyExists):
		return schedule.Exists(sch.ID)
	case isReply(err, replyFull) && replyDetail(err) == "session":
		return schedule.LimitReached("session "+session.PublicID(sch.SessionID), b.PerSession)
	case isReply(err, replyFull):
		return schedule.LimitReached("tenant "+sch.Tenant, b.PerTenant)
	case err != nil:
		return fmt.Errorf("create schedule %s: %w", sch.ID, err)
	}
	return nil
}

// GetSchedule returns schedule id of session sessionID.
func (s *Store) GetSchedule(ctx context.Context, sessionID, id string) (schedule.Schedule, error) {
	var rec, claim *goredis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		rec = p.HGet(ctx, s.schedulesKey(sessionID), id)
		claim = p.HGet(ctx, s.claimsKey(sessionID), id)
		return nil
	})
	if errors.Is(rec.Err(), goredis.Nil) {
		return schedule.Schedule{}, schedule.NotFound(id)
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		return schedule.Schedule{}, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return decodeSchedule(rec.Val(), claim.Val())
}

// decodeSchedule reads a stored record and the token of its claim state
// ("" for none).
func decodeSchedule(rec, claim string) (schedule.Schedule, error) {
	var r scheduleRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return schedule.Schedule{}, fmt.Errorf("decode schedule: %w", err)
	}
	sch := r.schedule()
	token, _, _ := strings.Cut(claim, " ")
	sch.Claim, _ = strconv.ParseInt(token, 10, 64)
	return sch, nil
}

// ListSchedules returns a session's schedules, oldest first.
func (s *Store) ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error) {
	var recs, claims *goredis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		recs = p.HGetAll(ctx, s.schedulesKey(sessionID))
		claims = p.HGetAll(ctx, s.claimsKey(sessionID))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules of session %s: %w", sessionID, err)
	}
	out := []schedule.Schedule{}
	for id, rec := range recs.Val() {
		sch, err := decodeSchedule(rec, claims.Val()[id])
		if err != nil {
			return nil, err
		}
		out = append(out, sch)
	}
	slices.SortFunc(out, func(a, b schedule.Schedule) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteSchedule deletes schedule id of session sessionID.
func (s *Store) DeleteSchedule(ctx context.Context, sessionID, id string) error {
	n, err := s.deleteSchedules(ctx, sessionID, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return schedule.NotFound(id)
	}
	return nil
}

// DeleteSessionSchedules deletes every schedule of session sessionID.
func (s *Store) DeleteSessionSchedules(ctx context.Context, sessionID string) error {
	_, err := s.deleteSchedules(ctx, sessionID)
	return err
}

// deleteSchedules deletes the schedules ids of session sessionID, or all
// of them, and returns how many it deleted.
func (s *Store) deleteSchedules(ctx context.Context, sessionID string, ids ...string) (int64, error) {
	keys := []string{s.schedulesKey(sessionID), s.claimsKey(sessionID), s.dueKey()}
	args := []any{s.prefix, sessionID}
	for _, id := range ids {
		args = append(args, id)
	}
	n, err := scriptScheduleDelete.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("delete schedules of session %s: %w", sessionID, err)
	}
	return n, nil
}

// ClaimDue claims the schedules due at now for holder; see schedule.Store.
func (s *Store) ClaimDue(ctx context.Context, holder string, now time.Time, ttl time.Duration, limit int) ([]schedule.Schedule, error) {
	got, err := scriptScheduleClaim.Run(ctx, s.rdb, []string{s.dueKey()}, s.prefix, now.UnixMicro(),
		now.Add(ttl).UnixMicro(), holder, limit).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("claim due schedules: %w", err)
	}
	out := make([]schedule.Schedule, 0, len(got)/2)
	for i := 0; i+1 < len(got); i += 2 {
		sch, err := decodeSchedule(got[i], got[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, sch)
	}
	schedule.SortDue(out) // the set orders by score, which claims change
	return out, nil
}

// FinishFiring records the firing of sch; see schedule.Store.
func (s *Store) FinishFiring(ctx context.Context, sch schedule.Schedule, done bool) error {
	rec, err := json.Marshal(toScheduleRecord(sch))
	if err != nil {
		return fmt.Errorf("record firing of schedule %s: %w", sch.ID, err)
	}
	del := "0"
	if done {
		del = "1"
	}
	keys := []string{s.schedulesKey(sch.SessionID), s.claimsKey(sch.SessionID), s.dueKey(), s.tenantSchedulesKey(sch.Tenant)}
	err = scriptScheduleFinish.Run(ctx, s.rdb, keys, sch.ID, dueMember(sch.SessionID, sch.ID),
		strconv.FormatInt(sch.Claim, 10), rec, sch.NextAt.UnixMicro(), del).Err()
	switch {
	case isReply(err, replyStale):
		return schedule.ErrClaimLost
	case err != nil:
		return fmt.Errorf("record firing of schedule %s: %w", sch.ID, err)
	}
	return nil
}
