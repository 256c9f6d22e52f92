package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

// principal is who a request acts as.
type principal struct {
	tenant   string // the tenant whose sessions it sees; "" for an operator key
	operator bool   // may read operational data of every tenant (/metrics)
	keyed    bool   // it presented a valid key
	// reader is who reads sessions, for read cursors and unread counts:
	// the key (by a digest, never the key itself), or the user a trusted
	// proxy names in X-Kerneld-User (Options.UserHeader).
	reader string
}

type principalKey struct{}

// principalFrom returns the principal authenticate found for the request.
func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// authenticate finds who the request acts as before anything is routed,
// so that without a valid key an unknown path or a wrong method answers
// 401 like a real route, and reveals nothing of the API's shape. Only
// /healthz is open, for orchestrators, and the console's files (GET / and
// /console/*), which hold no data: the console sends the key the person
// gives it with each API request.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || isConsoleRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, ok := s.principalFor(r.Header.Get("Authorization"))
		if !ok {
			s.unauthorized(w, r)
			return
		}
		s.setReader(&p, r)
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		if p.tenant != "" {
			ctx = kernel.WithTenant(ctx, p.tenant)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// principalFor maps an Authorization header to a principal. An operator
// key is an operator; an API key, its tenant. Without API keys every
// caller is the default tenant, and also an operator unless operator
// keys are configured. With API keys, no valid key is not ok.
func (s *Server) principalFor(header string) (principal, bool) {
	token := bearerToken(header)
	if matchKey(s.opts.AdminKeys, token) {
		return principal{operator: true, keyed: true}, true
	}
	if tenant := s.tenantFor(token); tenant != "" {
		return principal{tenant: tenant, keyed: true}, true
	}
	if len(s.opts.APIKeys) > 0 {
		return principal{}, false
	}
	return principal{tenant: DefaultTenant, operator: len(s.opts.AdminKeys) == 0}, true
}

// requireTenant admits principals that act as a tenant: an operator key
// reads metrics, not sessions.
func (s *Server) requireTenant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if principalFrom(r.Context()).tenant == "" {
			s.writeError(w, r, errdefs.New(errForbidden, errdefs.CodeTenantKeyRequired,
				"an operator key does not act as a tenant: use an API key (auth.api_keys)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireOperator admits operators only: /metrics counts the sessions,
// runs and events of every tenant, so a tenant's key may not read it.
func (s *Server) requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := principalFrom(r.Context()); {
		case p.operator:
			next.ServeHTTP(w, r)
		case p.keyed:
			s.writeError(w, r, errdefs.New(errForbidden, errdefs.CodeOperatorKeyRequired,
				"metrics need an operator key (auth.admin_keys), not a tenant's API key"))
		default:
			s.unauthorized(w, r)
		}
	})
}

// unauthorized answers 401 with a Bearer challenge.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kerneld"`)
	s.writeError(w, r, errdefs.New(errUnauthorized, errdefs.CodeUnauthorized, "a valid API key is required: Authorization: Bearer <key>"))
}

// bearerToken returns the token of a "Bearer <token>" header, or "".
func bearerToken(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return token
}

// tenantFor returns the tenant of an API key, or "". Every key is
// compared in constant time, so timing does not reveal a near miss.
func (s *Server) tenantFor(token string) string {
	found := ""
	for key, tenant := range s.opts.APIKeys {
		if subtle.ConstantTimeCompare([]byte(key), []byte(token)) == 1 && token != "" {
			found = tenant
		}
	}
	return found
}

// matchKey reports whether token is one of keys, comparing each in
// constant time.
func matchKey(keys []string, token string) bool {
	found := false
	for _, key := range keys {
		if subtle.ConstantTimeCompare([]byte(key), []byte(token)) == 1 && token != "" {
			found = true
		}
	}
	return found
}

// UserHeader names the user a trusted proxy reads for, when the operator
// enables it (Options.UserHeader): read cursors and unread counts are
// then that user's, not the API key's.
const UserHeader = "X-Kerneld-User"

// setReader sets who p reads as: the user r names in UserHeader when
// the operator enables it and r names one, else p's key, else (no keys
// configured) everyone alike. Both are kept by a digest, so a cursor
// costs the same whatever the name, and no key is stored. The reader is
// no security boundary: whoever holds a tenant's key reads all its
// sessions anyway, so the header is trusted from any caller with a key,
// which is the proxy in front of kerneld.
func (s *Server) setReader(p *principal, r *http.Request) {
	switch user, token := r.Header.Get(UserHeader), bearerToken(r.Header.Get("Authorization")); {
	case s.opts.UserHeader && user != "":
		p.reader = "user:" + digest(user)
	case p.keyed && token != "":
		p.reader = "key:" + digest(token)
	default:
		p.reader = "anonymous"
	}
}

// digest is a short digest of s: 64 bits, plenty among one session's
// readers.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// readerFrom returns who the request reads as (see setReader).
func readerFrom(r *http.Request) string { return principalFrom(r.Context()).reader }
