package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

type putMemoryRequest struct {
	Value json.RawMessage `json:"value"`
}

// Validate checks that a value was sent; JSON null counts as one.
func (req putMemoryRequest) Validate() error {
	if len(req.Value) == 0 {
		return errdefs.Invalid("value", "required")
	}
	return nil
}

type memoryEntryResponse struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt time.Time       `json:"updated_at"`
}

func toMemoryEntryResponse(e session.MemoryEntry) memoryEntryResponse {
	return memoryEntryResponse{Key: e.Key, Value: e.Value, UpdatedAt: e.UpdatedAt.UTC()}
}

type memoryListResponse struct {
	Data []memoryEntryResponse `json:"data"`
}

// handleMemoryList handles "GET /sessions/{id}/memory".
func (s *Server) handleMemoryList(w http.ResponseWriter, r *http.Request) error {
	entries, err := s.kernel.ListMemory(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := memoryListResponse{Data: make([]memoryEntryResponse, len(entries))}
	for i, e := range entries {
		out.Data[i] = toMemoryEntryResponse(e)
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleMemoryGet handles "GET /sessions/{id}/memory/{key}".
func (s *Server) handleMemoryGet(w http.ResponseWriter, r *http.Request) error {
	key, err := memoryKeyParam(r)
	if err != nil {
		return err
	}
	e, err := s.kernel.GetMemory(r.Context(), r.PathValue("id"), key)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toMemoryEntryResponse(e))
}

// handleMemoryPut handles "PUT /sessions/{id}/memory/{key}".
func (s *Server) handleMemoryPut(w http.ResponseWriter, r *http.Request) error {
	key, err := memoryKeyParam(r)
	if err != nil {
		return err
	}
	req, err := decode[putMemoryRequest](r)
	if err != nil {
		return err
	}
	e, err := s.kernel.PutMemory(r.Context(), r.PathValue("id"), key, req.Value)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toMemoryEntryResponse(e))
}

// handleMemoryDelete handles "DELETE /sessions/{id}/memory/{key}".
func (s *Server) handleMemoryDelete(w http.ResponseWriter, r *http.Request) error {
	key, err := memoryKeyParam(r)
	if err != nil {
		return err
	}
	if err := s.kernel.DeleteMemory(r.Context(), r.PathValue("id"), key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// memoryKeyParam returns the key: the rest of the path, since keys may
// contain slashes (also accepted percent-encoded). chi matches on the raw
// path when the request has one, and then the key is still escaped.
func memoryKeyParam(r *http.Request) (string, error) {
	key := r.PathValue("*")
	if r.URL.RawPath != "" {
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			return "", errdefs.Invalid("key", "not a valid path segment")
		}
	}
	if !utf8.ValidString(key) {
		return "", errdefs.Invalid("key", "is not valid UTF-8")
	}
	if err := session.ValidateMemoryKey(key); err != nil {
		return "", errdefs.Invalid("key", err.Error())
	}
	return key, nil
}
