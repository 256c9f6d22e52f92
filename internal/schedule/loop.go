package schedule

import (
	"context"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Start starts the loop that fires due schedules every Poll and forgets
// the schedules of sessions that ended. Close stops it.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.stopped = cancel, make(chan struct{})
	go s.loop(ctx)
}

// Close stops the loop and waits for it, or for ctx to end. A firing
// under way is cut short; its claim expires and it fires again.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	cancel, stopped := s.cancel, s.stopped
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Service) loop(ctx context.Context) {
	defer close(s.stopped)
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-s.ended:
			if err := s.store.DeleteSessionSchedules(ctx, id); err != nil && ctx.Err() == nil {
				s.log.Warn("forget schedules of an ended session", "session", id, "err", err)
			}
		case <-tick.C:
			if _, err := s.FireDue(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("fire due schedules", "err", err)
			}
		}
	}
}

// ObserveEvents implements kernel.Observer; the Service needs no events.
func (s *Service) ObserveEvents([]session.Event) {}

// ObserveSessionEnded implements kernel.Observer: a session closed or
// deleted takes no more runs, so its schedules go. It never blocks: when
// the loop is behind, the schedules go at their next firing instead,
// which finds the session gone.
func (s *Service) ObserveSessionEnded(sessionID string, _ int64) {
	select {
	case s.ended <- sessionID:
	default:
	}
}
