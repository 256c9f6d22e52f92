package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// sessionKeys lists the keys a session that tenant knows as id may be
// stored under, most likely first: an id of kerneld's form as it is (the
// session kerneld named), then the key of a client-chosen id (which may
// have kerneld's form too: AG-UI clients name threads with UUIDs). A key
// itself names its session when it is one of tenant's. Nothing else can
// name a session, so malformed path ids are not found without a look.
func sessionKeys(tenant, id string) []string {
	var keys []string
	if session.ValidID(id) {
		keys = append(keys, id)
	}
	if session.ValidClientID(id) {
		keys = append(keys, session.ClientKey(tenant, id))
	} else if session.IsClientKey(id, tenant) {
		keys = append(keys, id)
	}
	return keys
}

// EnsureSession creates a session as CreateSession does, unless the caller
// already has the one req names, by its ID or its IdempotencyKey: then it
// returns that one and created is false. A session of another agent by
// that name is a conflict. Replicas creating the same name at once race
// for one store key: one creates, the others find its session.
func (k *Kernel) EnsureSession(ctx context.Context, req CreateSession) (s session.Session, created bool, err error) {
	key, err := k.requestedKey(ctx, req)
	if err != nil {
		return session.Session{}, false, err
	}
	if key == "" {
		s, err = k.CreateSession(ctx, req)
		return s, err == nil, err
	}
	name := req.ID
	if name == "" {
		name = key
	}
	if s, err := k.GetSession(ctx, name); err == nil {
		return s, false, sameCreation(s, req)
	} else if errdefs.CodeOf(err) != errdefs.CodeSessionNotFound {
		return session.Session{}, false, err
	}
	req.key = key
	s, err = k.CreateSession(ctx, req)
	if errdefs.CodeOf(err) == errdefs.CodeSessionExists {
		// Another request created it since the look above.
		if s, err := k.GetSession(ctx, name); err == nil {
			return s, false, sameCreation(s, req)
		}
	}
	return s, err == nil, err
}

// sameCreation checks that s, found by the name a creation gave, is what
// the creation asks for: the same agent, and, when it came with an
// Idempotency-Key, the same request as the one that created s. The key
// sent again with another body is a mistake the client must hear about:
// the IETF Idempotency-Key draft answers it 422, as runs do.
func sameCreation(s session.Session, req CreateSession) error {
	if err := sameAgent(s, req.Agent); err != nil {
		return err
	}
	if req.IdempotencyKey == "" || s.RequestHash == "" || s.RequestHash == creationHash(req) {
		return nil
	}
	return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeIdempotencyKeyReused,
		"Idempotency-Key %q was used for session %s with another request body", req.IdempotencyKey,
		session.PublicID(s.ID)).With("session_id", session.PublicID(s.ID))
}

// creationHash fingerprints what a creation asks for: every field a client
// sets, the key itself aside.
func creationHash(req CreateSession) string {
	req.IdempotencyKey, req.key = "", ""
	b, err := json.Marshal(req)
	if err != nil {
		// Only memory values can fail, and CreateSession has checked them.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// requestedKey returns the store key a creation names: its client's id,
// or the id its Idempotency-Key derives; "" when it names none.
func (k *Kernel) requestedKey(ctx context.Context, req CreateSession) (string, error) {
	tenant := TenantFrom(ctx)
	switch {
	case req.ID != "":
		if !session.ValidClientID(req.ID) {
			return "", errdefs.Invalid("id", fmt.Sprintf("must be 1 to %d characters of [A-Za-z0-9._:-]", session.MaxClientIDLen))
		}
		return session.ClientKey(tenant, req.ID), nil
	case req.IdempotencyKey != "":
		if len(req.IdempotencyKey) > MaxIdempotencyKeyLen {
			return "", errdefs.Invalid("Idempotency-Key", fmt.Sprintf("longer than %d bytes", MaxIdempotencyKeyLen))
		}
		return session.KeyedID(tenant, req.IdempotencyKey), nil
	}
	return "", nil
}

// sameAgent checks that s, found by the name a creation gave, is of the
// agent the creation asked for.
func sameAgent(s session.Session, agent string) error {
	if s.Agent == agent {
		return nil
	}
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists,
		"session %q exists for agent %q, not %q", session.PublicID(s.ID), s.Agent, agent)
}

// CheckRun checks a run request's shape, so that a call which creates a
// session to run it can refuse a bad request before creating anything.
func (k *Kernel) CheckRun(req RunRequest) error { return k.validateRunRequest(req) }
