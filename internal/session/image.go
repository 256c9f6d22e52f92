package session

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// ImageRef is how a user message refers to an image it carries: by the
// content hash of bytes the store keeps for the session's tenant, with
// their media type, or by a URL that the model's vendor fetches itself
// (kerneld never does). Exactly one of Hash and URL is set.
type ImageRef struct {
	Hash      string `json:"hash,omitempty"`       // ImageHash of the bytes
	MediaType string `json:"media_type,omitempty"` // image/png, …; optional with a URL
	URL       string `json:"url,omitempty"`
}

// Image is an image's bytes as a store keeps them: once per tenant and
// content hash, however many messages and sessions refer to it.
type Image struct {
	Tenant    string
	Hash      string // ImageHash(Data)
	MediaType string
	Size      int64  // len(Data)
	Data      []byte // nil where only the description is asked for
	CreatedAt time.Time
}

// ImageHash returns the name an image's bytes are stored under: their
// SHA-256, as 64 lowercase hex digits.
func ImageHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ValidImageHash reports whether h has the form ImageHash gives, so a
// hash from a URL can be refused before any store sees it.
func ValidImageHash(h string) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ImageNotFound says the session refers to no image hash.
func ImageNotFound(hash string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeImageNotFound, "image %s not found", hash)
}

// ImageQuotaExceeded says storing an image would take the tenant past
// the bytes of images it may keep.
func ImageQuotaExceeded(tenant string, limit int64) error {
	return errdefs.New(errdefs.ErrExhausted, errdefs.CodeImageQuotaExceeded,
		"tenant %q already keeps the %d bytes of images it may", tenant, limit)
}

// cloneImageRefs returns refs sharing no memory with the original; nil
// stays nil.
func cloneImageRefs(refs []ImageRef) []ImageRef { return slices.Clone(refs) }

// ImageUsage is what a tenant's images take in a store.
type ImageUsage struct {
	Images int
	Bytes  int64
}
