package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix starts a secret as Standard Webhooks writes it: the key's
// bytes in base64 follow.
const secretPrefix = "whsec_"

// The bounds Standard Webhooks sets on a key: at least 24 bytes, at most 64.
const (
	minKeyBytes = 24
	maxKeyBytes = 64
)

// Key is a signing secret.
type Key struct {
	ID    string // a fingerprint that names the key in stored deliveries, never the key
	bytes []byte
}

// ParseSecret reads a secret written "whsec_" + base64 of 24 to 64 bytes,
// the form every Standard Webhooks library takes.
func ParseSecret(s string) (Key, error) {
	enc, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return Key{}, errors.New(`a webhook secret starts with "whsec_" (generate one with: echo "whsec_$(head -c 32 /dev/urandom | base64)")`)
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return Key{}, errors.New(`a webhook secret is "whsec_" followed by standard base64`)
	}
	if len(b) < minKeyBytes || len(b) > maxKeyBytes {
		return Key{}, fmt.Errorf("a webhook secret holds %d to %d bytes, not %d", minKeyBytes, maxKeyBytes, len(b))
	}
	sum := sha256.Sum256(b)
	return Key{ID: "key_" + hex.EncodeToString(sum[:8]), bytes: b}, nil
}

// NewSecret returns a fresh random secret in the "whsec_" form.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the webhook-signature value for a message: "v1," and the
// base64 HMAC-SHA256, under k, of id.timestamp.body.
func (k Key) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(k.mac(id, strconv.FormatInt(ts.Unix(), 10), body))
}

func (k Key) mac(id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, k.bytes)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SetHeaders signs body as message id, sent at ts, onto h.
func (k Key) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, k.Sign(id, ts, body))
}

// ErrBadSignature is Verify's error for a message that is not signed by
// the key, or not recently.
var ErrBadSignature = errors.New("webhook: bad signature")

// Verify checks h's Standard Webhooks headers for body: one of the
// space-separated v1 signatures must be k's, and the timestamp within
// tolerance of now. kerneld verifies the answers of guards with it.
func (k Key) Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing %s, %s or %s", ErrBadSignature, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not a number", ErrBadSignature, HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is more than %s away", ErrBadSignature, ts, tolerance)
	}
	want := k.mac(id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		version, enc, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && subtle.ConstantTimeCompare(got, want) == 1 {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}

// Keyring holds the secrets deliveries are signed with, by Key.ID.
type Keyring map[string]Key

// Add parses secret and adds it, returning its key.
func (r Keyring) Add(secret string) (Key, error) {
	k, err := ParseSecret(secret)
	if err == nil {
		r[k.ID] = k
	}
	return k, err
}
