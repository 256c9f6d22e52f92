package memory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// scheduleTable holds the sessions' schedules (schedule.Store). Its lock
// comes after a record's, as the image table's does.
type scheduleTable struct {
	mu       sync.Mutex
	sessions map[string]map[string]*storedSchedule // session id → schedule id →
	tenants  map[string]int                        // schedules per tenant
}

type storedSchedule struct {
	s          schedule.Schedule
	claimUntil time.Time
}

// CreateSchedule stores sch; see schedule.Store.
func (s *Store) CreateSchedule(ctx context.Context, sch schedule.Schedule, b schedule.Bounds) error {
	return s.read(sch.SessionID, func(*record) error {
		t := &s.schedules
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.sessions == nil {
			t.sessions, t.tenants = map[string]map[string]*storedSchedule{}, map[string]int{}
		}
		own := t.sessions[sch.SessionID]
		switch {
		case own[sch.ID] != nil:
			return schedule.Exists(sch.ID)
		case b.PerSession > 0 && len(own) >= b.PerSession:
			return schedule.LimitReached("session "+session.PublicID(sch.SessionID), b.PerSession)
		case b.PerTenant > 0 && t.tenants[sch.Tenant] >= b.PerTenant:
			return schedule.LimitReached("tenant "+sch.Tenant, b.PerTenant)
		}
		if own == nil {
			own = map[string]*storedSchedule{}
			t.sessions[sch.SessionID] = own
		}
		sch.Claim = 0
		own[sch.ID] = &storedSchedule{s: cloneSchedule(sch)}
		t.tenants[sch.Tenant]++
		return nil
	})
}

func cloneSchedule(sch schedule.Schedule) schedule.Schedule {
	if sch.Last != nil {
		last := *sch.Last
		sch.Last = &last
	}
	return sch
}

// GetSchedule returns schedule id of session sessionID.
func (s *Store) GetSchedule(ctx context.Context, sessionID, id string) (schedule.Schedule, error) {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	stored := t.sessions[sessionID][id]
	if stored == nil {
		return schedule.Schedule{}, schedule.NotFound(id)
	}
	return cloneSchedule(stored.s), nil
}

// ListSchedules returns a session's schedules, oldest first.
func (s *Store) ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error) {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []schedule.Schedule{}
	for _, stored := range t.sessions[sessionID] {
		out = append(out, cloneSchedule(stored.s))
	}
	slices.SortFunc(out, func(a, b schedule.Schedule) int {
		return cmpSchedules(a.CreatedAt, b.CreatedAt, a.ID, b.ID)
	})
	return out, nil
}

// cmpSchedules orders schedules by creation, then id.
func cmpSchedules(at, bt time.Time, a, b string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// DeleteSchedule deletes schedule id of session sessionID.
func (s *Store) DeleteSchedule(ctx context.Context, sessionID, id string) error {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.deleteLocked(sessionID, id) {
		return schedule.NotFound(id)
	}
	return nil
}

// deleteLocked deletes one schedule and reports whether there was one.
func (t *scheduleTable) deleteLocked(sessionID, id string) bool {
	stored := t.sessions[sessionID][id]
	if stored == nil {
		return false
	}
	delete(t.sessions[sessionID], id)
	if len(t.sessions[sessionID]) == 0 {
		delete(t.sessions, sessionID)
	}
	t.tenants[stored.s.Tenant]--
	return true
}

// DeleteSessionSchedules deletes every schedule of session sessionID.
func (s *Store) DeleteSessionSchedules(ctx context.Context, sessionID string) error {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.sessions[sessionID] {
		t.deleteLocked(sessionID, id)
	}
	return nil
}

// ClaimDue claims the schedules due at now for holder; see schedule.Store.
func (s *Store) ClaimDue(ctx context.Context, holder string, now time.Time, ttl time.Duration, limit int) ([]schedule.Schedule, error) {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	var due []*storedSchedule
	for _, own := range t.sessions {
		for _, stored := range own {
			if !stored.s.NextAt.After(now) && !stored.claimUntil.After(now) {
				due = append(due, stored)
			}
		}
	}
	slices.SortFunc(due, func(a, b *storedSchedule) int {
		return cmpSchedules(a.s.NextAt, b.s.NextAt, a.s.ID, b.s.ID)
	})
	out := []schedule.Schedule{}
	for _, stored := range due[:min(len(due), limit)] {
		stored.claimUntil = now.Add(ttl)
		stored.s.Claim++
		out = append(out, cloneSchedule(stored.s))
	}
	return out, nil
}

// FinishFiring records the firing of sch; see schedule.Store.
func (s *Store) FinishFiring(ctx context.Context, sch schedule.Schedule, done bool) error {
	t := &s.schedules
	t.mu.Lock()
	defer t.mu.Unlock()
	stored := t.sessions[sch.SessionID][sch.ID]
	if stored == nil || stored.s.Claim != sch.Claim {
		return schedule.ErrClaimLost
	}
	if done {
		t.deleteLocked(sch.SessionID, sch.ID)
		return nil
	}
	stored.s.NextAt, stored.s.Fired = sch.NextAt, sch.Fired
	stored.s.Last = cloneSchedule(sch).Last
	stored.claimUntil = time.Time{}
	return nil
}
