package httpapi

import (
	"bytes"
	"net/http"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/session"
)

// readImages decodes and checks the images of a message, naming the part
// of any that is wrong: 400 for what the client can fix in the part (its
// media type, its size, bytes that are not what they claim).
func (s *Server) readImages(parts []imagePart, field string) ([]images.Input, error) {
	lib := s.opts.Images
	if err := lib.CheckCount(len(parts)); err != nil {
		return nil, errdefs.Invalid(field, err.Error())
	}
	ins := make([]images.Input, len(parts))
	for i, p := range parts {
		var err error
		if p.url != "" {
			ins[i], err = lib.FromURL(p.mediaType, p.url)
		} else {
			ins[i], err = lib.FromData(p.mediaType, p.data)
		}
		if err == nil {
			err = lib.Check(ins[i])
		}
		if err != nil {
			return nil, errdefs.Invalid(p.field, err.Error())
		}
	}
	return ins, nil
}

type imageResponse struct {
	Hash      string    `json:"hash"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	URL       string    `json:"url"`
	CreatedAt time.Time `json:"created_at"`
}

func toImageResponse(sessionID string, img session.Image) imageResponse {
	return imageResponse{Hash: img.Hash, MediaType: img.MediaType, Size: img.Size, CreatedAt: img.CreatedAt.UTC(),
		URL: "/sessions/" + session.PublicID(sessionID) + "/images/" + img.Hash}
}

// imageRefResponse is an image of a message: one kerneld keeps (hash,
// and the url that serves it) or one at a URL of the client's.
type imageRefResponse struct {
	Hash      *string `json:"hash"`
	MediaType *string `json:"media_type"`
	URL       string  `json:"url"`
}

func toImageRefResponse(sessionID string, ref session.ImageRef) imageRefResponse {
	if ref.Hash == "" {
		return imageRefResponse{MediaType: nullable(ref.MediaType), URL: ref.URL}
	}
	return imageRefResponse{Hash: &ref.Hash, MediaType: nullable(ref.MediaType),
		URL: session.ImagePath(sessionID, ref.Hash)}
}

// handleImageList handles "GET /sessions/{id}/images": the images the
// session's messages carry, without their bytes.
func (s *Server) handleImageList(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	imgs, err := s.opts.Images.List(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	out := make([]imageResponse, len(imgs))
	for i, img := range imgs {
		out[i] = toImageResponse(sess.ID, img)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// handleImageGet handles "GET /sessions/{id}/images/{hash}": an image's
// bytes, as its media type. The hash names the bytes, so they never
// change: clients may keep them as long as they like, and If-None-Match
// answers 304.
func (s *Server) handleImageGet(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	img, err := s.opts.Images.Get(r.Context(), sess.ID, r.PathValue("hash"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", img.MediaType)
	h.Set("ETag", `"`+img.Hash+`"`)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	http.ServeContent(w, r, "", img.CreatedAt, bytes.NewReader(img.Data))
	return nil
}
