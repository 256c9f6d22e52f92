package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// The images of users' messages. A run's input may carry images
// (RunRequest.Images): Run keeps their bytes in the images library, once
// per tenant and content hash, before the run is accepted, so the run's
// record and its user message hold only references (session.ImageRef).
// Every model call reads the referenced bytes back (modelMessage), so a
// run continued by another replica sends the model the same images.
//
// The input's echo in the log says which images the message carries in a
// CUSTOM kerneld.message.images event after the message's text events:
// AG-UI 1.0 has no event for a user message's other content parts.

// CustomMessageImages is the CUSTOM event naming the images of the user
// message messageId: each a hash and media type of bytes kerneld keeps,
// or a URL.
const CustomMessageImages = "kerneld.message.images"

// keepImages stores the images of req for session s and returns req with
// their references, ready to become the run's.
func (k *Kernel) keepImages(ctx context.Context, s session.Session, req RunRequest) (RunRequest, error) {
	if len(req.Images) == 0 {
		return req, nil
	}
	refs, err := k.images.Put(ctx, s.Tenant, s.ID, req.Images)
	if err != nil {
		return req, fmt.Errorf("keep the input's images: %w", err)
	}
	req.imageRefs = refs
	return req, nil
}

// sameInput reports whether run r was created for the input of req, its
// text and its images.
func sameInput(r session.Run, req RunRequest) bool {
	return r.Input == req.Input && slices.Equal(r.Images, req.imageRefs)
}

// imagesEvent returns the event naming the images of user message id, or
// nothing when it carries none.
func imagesEvent(id string, refs []session.ImageRef) []session.Event {
	if len(refs) == 0 {
		return nil
	}
	type image struct {
		Hash      string `json:"hash,omitempty"`
		MediaType string `json:"mediaType,omitempty"`
		URL       string `json:"url,omitempty"`
	}
	imgs := make([]image, len(refs))
	for i, ref := range refs {
		imgs[i] = image{Hash: ref.Hash, MediaType: ref.MediaType, URL: ref.URL}
	}
	return []session.Event{session.Custom(CustomMessageImages, map[string]any{"messageId": id, "images": imgs})}
}

// userInputEvents echoes user message id with text and images: its text
// events (START and END alone when it is images only: a CONTENT delta is
// never empty), then the images.
func userInputEvents(id, text string, refs []session.ImageRef) []session.Event {
	evs := []session.Event{session.TextMessageStart(id, session.RoleUser)}
	if text != "" {
		evs = append(evs, session.TextMessageContent(id, text))
	}
	evs = append(evs, session.TextMessageEnd(id))
	return append(evs, imagesEvent(id, refs)...)
}

// modelMessage returns stored message m as the model sees it, the bytes
// of its images read back. An image the store no longer keeps for the
// session is left out and the message says so, so that one lost image
// does not stop every later run of the session.
func (r *runner) modelMessage(ctx context.Context, m session.Message) (llm.Message, error) {
	out := toLLM(m)
	for _, ref := range m.Images {
		imgs, err := r.k.images.Load(ctx, r.run.SessionID, []session.ImageRef{ref})
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			out.Content += "\n\n[An image sent with this message is no longer available.]"
		case err != nil:
			return llm.Message{}, err
		default:
			out.Images = append(out.Images, imgs...)
		}
	}
	return out, nil
}
