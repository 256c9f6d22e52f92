package kernel

import (
	"context"
	"log/slog"

	"github.com/kerneld/kerneld/internal/session"
)

// LogObserver logs run boundaries at Info and every other event at Debug.
type LogObserver struct {
	Log *slog.Logger
}

// ObserveEvents implements Observer.
func (o LogObserver) ObserveEvents(evs []session.Event) {
	ctx := context.Background()
	debug := o.Log.Enabled(ctx, slog.LevelDebug)
	for i := range evs {
		ev := &evs[i]
		level := slog.LevelDebug
		switch ev.Type {
		case session.EventRunStarted, session.EventRunFinished, session.EventRunError:
			level = slog.LevelInfo
		default:
			if !debug {
				continue
			}
		}
		o.Log.LogAttrs(ctx, level, "event", slog.String("session", ev.SessionID), slog.String("run", ev.RunID),
			slog.Int64("seq", ev.Seq), slog.String("type", string(ev.Type)))
	}
}

// ObserveSessionEnded implements Observer.
func (o LogObserver) ObserveSessionEnded(sessionID string, lastSeq int64) {
	o.Log.Info("session ended", "session", sessionID, "last_seq", lastSeq)
}
