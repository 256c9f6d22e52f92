package kernel_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/webhook"
)

// announcements is a kernel.Announcer that keeps what the kernel
// announces, in order, as the webhook outbox would store it.
type announcements struct {
	mu  sync.Mutex
	got []webhook.Announcement
}

var _ kernel.Announcer = (*announcements)(nil)

func (a *announcements) CheckSessionEndpoints(string, []webhook.Endpoint) error { return nil }

func (a *announcements) Announce(_ context.Context, as ...webhook.Announcement) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, as...)
	return len(as), nil
}

func (a *announcements) Notify() {}

// of returns what was announced about session sessionID, in order.
func (a *announcements) of(sessionID string) []webhook.Announcement {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []webhook.Announcement
	for _, an := range a.got {
		if an.SessionID == sessionID {
			out = append(out, an)
		}
	}
	return out
}

// TestKernel_EndingSessionCancelsQueue closes or deletes a session whose
// run has runs queued behind it: each queued run ends cancelled, as a
// client's cancel ends one, before the session is closed: its record
// says so, its log says so inside the active run, and the webhooks
// announce it ahead of the session's close.
func TestKernel_EndingSessionCancelsQueue(t *testing.T) {
	for _, end := range []struct {
		name string
		end  func(ctx context.Context, k *kernel.Kernel, id string) error
	}{
		{"deleted", func(ctx context.Context, k *kernel.Kernel, id string) error {
			return k.DeleteSession(ctx, id, false)
		}},
		{"closed", func(ctx context.Context, k *kernel.Kernel, id string) error {
			_, err := k.CloseSession(ctx, id)
			return err
		}},
	} {
		t.Run(end.name, func(t *testing.T) {
			ann := &announcements{}
			onEveryStoreWith(t, kerneltest.Options{Announcer: ann}, func(t *testing.T, k *kerneltest.Kernel, rec *recorder) {
				s := mustSession(t, k.Kernel, "waiter")
				active := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
				<-k.Wait.Started() // the active run waits in its tool until cancelled
				queued := []session.Run{
					post(t, k.Kernel, s.ID, "second", kernel.BusyQueue),
					post(t, k.Kernel, s.ID, "third", kernel.BusyQueue),
				}
				require.NoError(t, end.end(t.Context(), k.Kernel, s.ID))
				last := rec.WaitEnded(t, s.ID)

				evs := rec.Events(s.ID)
				require.NotEmpty(t, evs)
				assert.Equal(t, last, evs[len(evs)-1].Seq, "the stream ends after the final event")
				checkLog(t, s.ID, evs)
				aguitest.Verify(t, evs)
				activeEnd := slices.IndexFunc(evs, func(ev session.Event) bool { return ev.RunID == active.ID && ev.Type.Ends() })
				require.GreaterOrEqual(t, activeEnd, 0, "the active run ended")
				assert.Equal(t, "cancelled", outcomeOf(evs[activeEnd]))
				for _, q := range queued {
					notice := slices.IndexFunc(evs, func(ev session.Event) bool {
						return ev.Type == session.EventCustom && ev.Member("name") == "kerneld.run.cancelled" &&
							ev.Fields()["value"].(map[string]any)["runId"] == q.ID
					})
					require.GreaterOrEqual(t, notice, 0, "the log says queued run %s was cancelled", q.ID)
					assert.Equal(t, active.ID, evs[notice].RunID, "logged inside the active run")
					assert.Less(t, notice, activeEnd, "logged before the active run's end")
				}

				if end.name == "closed" {
					for _, q := range queued {
						run, err := k.GetRun(t.Context(), s.ID, q.ID)
						require.NoError(t, err)
						assert.Equal(t, session.RunCancelled, run.State, "queued run %s", q.ID)
						assert.False(t, run.EndedAt.IsZero())
					}
				}

				said := ann.of(s.ID)
				closedAt := slices.IndexFunc(said, func(a webhook.Announcement) bool { return a.Type == webhook.SessionClosed })
				require.GreaterOrEqual(t, closedAt, 0, "session.closed is announced")
				for _, r := range append([]session.Run{active}, queued...) {
					i := slices.IndexFunc(said, func(a webhook.Announcement) bool { return a.RunID == r.ID })
					require.GreaterOrEqual(t, i, 0, "the end of run %s is announced", r.ID)
					assert.Equal(t, webhook.RunCancelled, said[i].Type, "run %s", r.ID)
					assert.Equal(t, string(session.RunCancelled), said[i].Data["state"], "run %s", r.ID)
					assert.Less(t, i, closedAt, "run %s ends before its session closes", r.ID)
				}
			})
		})
	}
}
