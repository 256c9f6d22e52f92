package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/webhook"
)

// deliveryResponse is one webhook delivery, as a tenant sees it.
type deliveryResponse struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	URL           string          `json:"url"`
	SessionID     string          `json:"session_id"`
	State         webhook.State   `json:"state"`
	Attempts      int             `json:"attempts"`
	CreatedAt     time.Time       `json:"created_at"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	LastAttemptAt *time.Time      `json:"last_attempt_at"`
	LastStatus    *int            `json:"last_status"`
	LastError     *string         `json:"last_error"`
	Payload       json.RawMessage `json:"payload"`
}

func toDeliveryResponse(d webhook.Delivery) deliveryResponse {
	out := deliveryResponse{
		ID: d.ID, Type: d.Type, URL: d.URL, SessionID: session.PublicID(d.SessionID), State: d.State, Attempts: d.Attempts,
		CreatedAt: d.CreatedAt.UTC(), LastAttemptAt: nullableTime(d.LastAttemptAt), LastError: nullable(d.LastError),
		Payload: d.Body,
	}
	if d.State == webhook.StatePending {
		out.NextAttemptAt = nullableTime(d.NextAt)
	}
	if d.LastStatus != 0 {
		out.LastStatus = &d.LastStatus
	}
	return out
}

// webhooks returns the dispatcher, or a not-found error when kerneld
// runs without one.
func (s *Server) webhooks() (*webhook.Dispatcher, error) {
	if s.opts.Webhooks == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, errdefs.CodeWebhooksDisabled, "webhooks are not enabled on this server")
	}
	return s.opts.Webhooks, nil
}

// handleDeliveryList handles "GET /webhooks/deliveries".
func (s *Server) handleDeliveryList(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.webhooks()
	if err != nil {
		return err
	}
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	p, err := wh.ListPage(r.Context(), kernel.TenantFrom(r.Context()), webhook.State(r.URL.Query().Get("state")),
		page.Cursor, page.Limit)
	if err != nil {
		return err
	}
	out := listResponse[deliveryResponse]{Data: make([]deliveryResponse, len(p.Items)), NextCursor: nullable(p.Next)}
	for i, d := range p.Items {
		out.Data[i] = toDeliveryResponse(d)
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleDeliveryRedeliver handles "POST /webhooks/deliveries/{id}/redeliver".
func (s *Server) handleDeliveryRedeliver(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.webhooks()
	if err != nil {
		return err
	}
	d, err := wh.Redeliver(r.Context(), kernel.TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, toDeliveryResponse(d))
}
