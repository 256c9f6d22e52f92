package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Starting returns the handler kerneld serves while its store opens,
// migrates and recovers: /healthz answers (the process is alive, so a
// liveness probe must not kill a long migration), everything else is 503
// starting, /readyz included.
func Starting(version string) http.Handler {
	s := &Server{log: discardLogger(), opts: Options{Version: version}}
	return middleware.RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
			_ = s.handleHealth(w, r) // only fails to encode a constant
			return
		}
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStarting, "kerneld is starting: opening and recovering its store"))
	}))
}
