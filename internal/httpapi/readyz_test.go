package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// pingStore is a memory store whose Ping fails while failing is set, as
// the SQLite store's does while its event writer cannot commit.
type pingStore struct {
	*memory.Store
	failing atomic.Bool
}

func (s *pingStore) Ping(ctx context.Context) error {
	if s.failing.Load() {
		return errors.New("ping store: the last event append failed: database or disk is full (13)")
	}
	return s.Store.Ping(ctx)
}

func TestHealth_ReadyzStoreUnavailable(t *testing.T) {
	st := &pingStore{Store: memory.New()}
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}})
	ts.must(t, http.StatusOK, "GET", "/readyz", "")

	st.failing.Store(true)
	p := wantProblem(t, ts.do(t, "GET", "/readyz", ""), http.StatusServiceUnavailable, "store_unavailable")
	if detail, _ := p["detail"].(string); strings.Contains(detail, "disk") {
		t.Errorf("detail = %q shows the store's error to the client", detail)
	}
	if got := ts.must(t, http.StatusOK, "GET", "/healthz", ""); got["status"] != "ok" {
		t.Errorf("GET /healthz = %v while the store fails, want ok: the process is alive", got)
	}

	st.failing.Store(false)
	if got := ts.must(t, http.StatusOK, "GET", "/readyz", ""); got["status"] != "ready" {
		t.Errorf("GET /readyz = %v once the store recovered, want status ready", got)
	}
}
