package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// CORS lets pages served from other origins call the API and read its
// streams. Browsers ask first, with a preflight OPTIONS request that
// carries no credentials, so preflights are answered before
// authentication and routing; everything else goes through as usual,
// with the headers that let the page read the answer.
const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE"
	// corsRequestHeaders are the request headers a page may send:
	// Last-Event-ID is what a reconnecting EventSource sends, and a
	// fetch-based stream client sends it itself.
	corsRequestHeaders = "Authorization, Content-Type, Accept, Idempotency-Key, Last-Event-ID, X-Request-Id"
	// corsExposedHeaders are the response headers a page may read besides
	// the safelisted ones: where a created resource is, when to retry, and
	// what limited the request.
	corsExposedHeaders = "Location, Retry-After, Idempotent-Replayed, WWW-Authenticate, Allow, X-Request-Id, " +
		"RateLimit, RateLimit-Policy, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"
	corsMaxAge = "600" // seconds a browser may cache a preflight's answer
)

// errOriginRefused is a preflight from an origin the operator did not list.
var errOriginRefused = errForbidden

// cors answers preflights and marks the responses to allowed origins.
// Without Options.CORSOrigins no origin is allowed: it only refuses
// preflights, with a problem that names the setting to change, which is
// what the developer of a page on another origin needs to read.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.opts.CORSOrigins) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPreflight(r) {
				s.writeError(w, r, errdefs.New(errOriginRefused, errdefs.CodeOriginNotAllowed,
					"origin %q is not allowed: kerneld allows no other origin until http.cors_origins "+
						"(or KERNELD_CORS_ORIGINS) lists it", r.Header.Get("Origin")))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		h.Add("Vary", "Origin") // the answer depends on it, for caches
		preflight := isPreflight(r)
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		}
		allowed := origin != "" && s.allowOrigin(h, origin)
		switch {
		case preflight && !allowed:
			s.writeError(w, r, errdefs.New(errOriginRefused, errdefs.CodeOriginNotAllowed,
				"origin %q is not in http.cors_origins (or KERNELD_CORS_ORIGINS)", origin))
		case preflight:
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
		default:
			if allowed {
				h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
			}
			next.ServeHTTP(w, r)
		}
	})
}

// isPreflight reports whether r is a browser's CORS preflight: an OPTIONS
// that says which method the page means to use.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// allowOrigin sets the Access-Control-Allow-* headers for origin and
// reports whether it is allowed. A listed origin is echoed and may send
// credentials (cookies, or an Authorization header a page adds); "*"
// allows any other origin, never with credentials, as the Fetch standard
// requires.
func (s *Server) allowOrigin(h http.Header, origin string) bool {
	switch {
	case slices.Contains(s.opts.CORSOrigins, origin):
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	case slices.Contains(s.opts.CORSOrigins, "*"):
		h.Set("Access-Control-Allow-Origin", "*")
	default:
		return false
	}
	return true
}

// ValidateCORSOrigins checks each origin: "*", or scheme://host[:port]
// with an http or https scheme and no path, query or trailing slash (a
// browser's Origin never has one, so such an entry would never match).
func ValidateCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		scheme, host, ok := strings.Cut(o, "://")
		if !ok || (scheme != "http" && scheme != "https") || host == "" || strings.ContainsAny(host, "/?#@ ") {
			return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidCORSOrigin,
				"cors origin %q: want \"*\" or scheme://host[:port] with no path, like https://app.example.com", o)
		}
	}
	return nil
}
