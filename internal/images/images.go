// Package images keeps the pictures users send with their messages. It
// checks them (media type, size, that the bytes are what they claim),
// stores their bytes once per tenant under their SHA-256 through a Store,
// with a bound on each image and on each tenant's total, and gives them
// back to the model call that needs them as llm.Image.
//
// A message keeps only session.ImageRef values: the hash and media type
// of stored bytes, or a URL that the model's vendor fetches (kerneld
// never fetches one). A session refers to the images of its messages; an
// image no session refers to any more is deleted.
//
// It knows neither HTTP nor the kernel: httpapi checks a request's images
// with it, and the kernel stores and loads them through it.
package images

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Store keeps images for the Library. It is declared here, by its
// consumer; the backends in internal/store implement it and
// storetest.RunImages checks that they agree.
type Store interface {
	// PutImage keeps img (every field set) once per tenant and hash, and
	// records that session sessionID, of img.Tenant, refers to it: a hash
	// the tenant keeps already only gains the reference. A new hash that
	// would take the tenant's images past maxTenantBytes, when that is
	// above 0, is ErrExhausted (session.ImageQuotaExceeded); a session
	// that is missing or of another tenant is ErrNotFound.
	PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error
	// GetImage returns image hash, bytes included, if session sessionID
	// refers to it, and otherwise session.ImageNotFound.
	GetImage(ctx context.Context, sessionID, hash string) (session.Image, error)
	// ListImages returns the images session sessionID refers to, without
	// their bytes, by hash.
	ListImages(ctx context.Context, sessionID string) ([]session.Image, error)
	// LinkImages makes session to refer to every image session from
	// refers to, as a fork shares the images of the history it copies.
	LinkImages(ctx context.Context, from, to string) error
	// ReleaseImages drops every reference of session sessionID, which may
	// be deleted already; an image no session refers to any more is
	// deleted, and its bytes stop counting for its tenant.
	ReleaseImages(ctx context.Context, sessionID string) error
	// ImageUsage returns how many images tenant keeps and their bytes.
	ImageUsage(ctx context.Context, tenant string) (session.ImageUsage, error)
}

// Limits bound the images clients send. Zero fields take DefaultLimits'.
type Limits struct {
	MaxBytes       int64 // one image's bytes
	MaxPerMessage  int   // images in one message
	MaxTenantBytes int64 // the bytes of every image a tenant keeps
	MaxURLLength   int   // an image's URL, in bytes
}

// DefaultLimits returns the limits kerneld uses unless configured
// otherwise. MaxBytes is 3.75 MiB because Anthropic's API refuses an image
// whose base64 text is over 5 MiB ("image exceeds 5 MB maximum"); OpenAI
// takes 20 MB. MaxTenantBytes bounds abuse, not use: over a thousand
// photos of that size.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 3840 << 10, MaxPerMessage: 16, MaxTenantBytes: 4 << 30, MaxURLLength: 2048}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxPerMessage <= 0 {
		l.MaxPerMessage = d.MaxPerMessage
	}
	if l.MaxTenantBytes <= 0 {
		l.MaxTenantBytes = d.MaxTenantBytes
	}
	if l.MaxURLLength <= 0 {
		l.MaxURLLength = d.MaxURLLength
	}
	return l
}

// Library checks, stores and loads images. Its methods are safe for
// concurrent use.
type Library struct {
	store  Store
	limits Limits
	now    func() time.Time
}

// New returns a library keeping images in store under limits; now is the
// clock of their creation times (nil: time.Now). Without a store it
// checks images and keeps none: Put fails with ErrUnavailable, and no
// image is found.
func New(store Store, limits Limits, now func() time.Time) *Library {
	if now == nil {
		now = time.Now
	}
	if store == nil {
		store = noStore{}
	}
	return &Library{store: store, limits: limits.withDefaults(), now: now}
}

// Limits returns the limits the library applies.
func (l *Library) Limits() Limits { return l.limits }

// Input is one image as a client sent it: bytes with their media type, or
// a URL (a data: URL carries bytes too; see FromURL).
type Input struct {
	MediaType string
	Data      []byte
	URL       string
}

// mediaTypes are the image types every vendor kerneld speaks to takes.
var mediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// MediaTypes returns the media types images may have.
func MediaTypes() []string { return append([]string(nil), mediaTypes...) }

func allowedType(mt string) bool {
	for _, t := range mediaTypes {
		if t == mt {
			return true
		}
	}
	return false
}

// FromData returns the input for base64 text b64 of media type mt,
// refusing text that would decode to more than the library's MaxBytes
// before decoding it. Padding may be left out; line breaks are ignored.
func (l *Library) FromData(mt, b64 string) (Input, error) {
	if int64(len(b64))/4*3 > l.limits.MaxBytes+2 {
		return Input{}, l.tooLarge(int64(len(b64)) / 4 * 3)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		if data, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
			return Input{}, invalid("is not base64 text")
		}
	}
	return Input{MediaType: strings.ToLower(mt), Data: data}, nil
}

// FromURL returns the input for an image at rawURL, of media type mt if
// the client said. A data: URL (data:image/png;base64,…) is taken as the
// bytes it carries.
func (l *Library) FromURL(mt, rawURL string) (Input, error) {
	if rest, ok := strings.CutPrefix(rawURL, "data:"); ok {
		meta, b64, found := strings.Cut(rest, ",")
		dataType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 {
			return Input{}, invalid("is a data URL that is not data:<media type>;base64,<data>")
		}
		if mt != "" && !strings.EqualFold(mt, dataType) {
			return Input{}, invalid(fmt.Sprintf("says %s but its data URL says %s", mt, dataType))
		}
		return l.FromData(dataType, b64)
	}
	return Input{MediaType: strings.ToLower(mt), URL: rawURL}, nil
}

// tooLarge says an image of n bytes is over the limit.
func (l *Library) tooLarge(n int64) error {
	return invalid(fmt.Sprintf("is %d bytes; an image may have at most %d", n, l.limits.MaxBytes))
}

func invalid(problem string) error {
	return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidImage, "%s", problem)
}
