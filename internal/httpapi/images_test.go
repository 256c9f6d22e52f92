package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// imagePart is an AG-UI 1.0 image part carrying data.
func imagePart(mediaType string, data []byte) map[string]any {
	return map[string]any{"type": "image", "source": map[string]any{
		"type": "data", "value": imagestest.Base64(data), "mimeType": mediaType}}
}

func textPart(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

// runBody is a run's body whose input is parts.
func runBody(t *testing.T, parts ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"input": parts})
	require.NoError(t, err)
	return string(b)
}

// TestRun_ContentParts: the run route takes the content parts of an AG-UI
// user message. Text parts make the input; images, checked, are refused
// as a whole while runs cannot take them; a wrong part is named.
func TestRun_ContentParts(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{Images: images.New(nil, images.Limits{MaxBytes: 1000, MaxPerMessage: 2}, nil)}})
	id := ts.createSession(t, "echo")

	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", runBody(t, textPart("Hello, "), textPart("world")))
	assert.Equal(t, "Hello, world", run["input"], "text parts are joined")
	ts.waitRun(t, id, run["id"].(string))

	for name, parts := range map[string][]map[string]any{
		"AG-UI 1.0 data":   {textPart("What is this?"), imagePart("image/png", imagestest.PNG())},
		"AG-UI 1.0 url":    {{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.com/a.webp"}}},
		"binary data":      {{"type": "binary", "mimeType": "image/gif", "data": imagestest.Base64(imagestest.GIF())}},
		"binary url":       {{"type": "binary", "mimeType": "image/jpeg", "url": "https://example.com/a.jpg", "filename": "a.jpg"}},
		"a data URL":       {{"type": "binary", "mimeType": "image/webp", "url": "data:image/webp;base64," + imagestest.Base64(imagestest.WebP())}},
		"images, no text":  {imagePart("image/jpeg", imagestest.JPEG()), imagePart("image/webp", imagestest.WebP())},
		"an id and a name": {{"type": "image", "id": "p1", "metadata": map[string]any{"k": 1}, "source": map[string]any{"type": "url", "value": "http://example.com/x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			p := wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", runBody(t, parts...)),
				http.StatusUnprocessableEntity, "images_not_supported")
			assert.Contains(t, p["detail"], "input carries images")
		})
	}
}

func TestRun_ContentPartsRefused(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{Images: images.New(nil, images.Limits{MaxBytes: 1000, MaxPerMessage: 2}, nil)}})
	id := ts.createSession(t, "echo")
	png := imagestest.PNG()
	tests := []struct {
		name  string
		parts []map[string]any
		field string
		want  string
	}{
		{"another media type", []map[string]any{imagePart("image/svg+xml", []byte("<svg/>"))}, "input[0]", "is image/svg+xml; images may be"},
		{"bytes of another type", []map[string]any{textPart("hi"), imagePart("image/jpeg", png)}, "input[1]", "says image/jpeg but its bytes are image/png"},
		{"too large", []map[string]any{imagePart("image/png", append(png, make([]byte, 1000)...))}, "input[0]", "an image may have at most 1000"},
		{"not base64", []map[string]any{{"type": "image", "source": map[string]any{"type": "data", "value": "%%%", "mimeType": "image/png"}}}, "input[0]", "is not base64 text"},
		{"too many", []map[string]any{imagePart("image/png", png), imagePart("image/png", png), imagePart("image/png", png)}, "input", "has 3 images; a message may carry at most 2"},
		{"audio", []map[string]any{{"type": "audio", "source": map[string]any{"type": "url", "value": "https://example.com/a.mp3"}}}, "input[0]", "is an audio part"},
		{"a provider's file", []map[string]any{{"type": "image", "source": map[string]any{"type": "file", "value": "file-abc"}}}, "input[0].source", "is a file held by a model provider"},
		{"binary of a PDF", []map[string]any{{"type": "binary", "mimeType": "application/pdf", "data": "JVBERi0="}}, "input[0]", "is application/pdf"},
		{"binary by id", []map[string]any{{"type": "binary", "mimeType": "image/png", "id": "up-1"}}, "input[0]", "cannot fetch a binary part by id"},
		{"data without a type", []map[string]any{{"type": "image", "source": map[string]any{"type": "data", "value": "AA=="}}}, "input[0].source.mimeType", "required with data"},
		{"a local file URL", []map[string]any{{"type": "image", "source": map[string]any{"type": "url", "value": "file:///etc/passwd"}}}, "input[0]", "not an absolute http or https URL"},
		{"a text part without text", []map[string]any{{"type": "text"}}, "input[0].text", "required"},
		{"an unknown type", []map[string]any{{"type": "sticker"}}, "input[0].type", `must be "text" or "image"`},
		{"an unknown member", []map[string]any{{"type": "text", "text": "hi", "colour": "red"}}, "input[0]", "must be a content part"},
		{"no parts", []map[string]any{}, "input", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", runBody(t, tt.parts...)), http.StatusBadRequest, "invalid_request")
			errs, _ := p["errors"].(map[string]any)
			require.Contains(t, errs, tt.field, "problem %v", p)
			assert.Contains(t, errs[tt.field], tt.want)
		})
	}
	p := wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":42}`), http.StatusBadRequest, "invalid_request")
	assert.Equal(t, "must be a string or a list of content parts", p["errors"].(map[string]any)["input"])
	ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "") // nothing was run
}

// TestOneCallRun_ContentParts: "POST /run" reads its input as the run
// route does.
func TestOneCallRun_ContentParts(t *testing.T) {
	ts := newServer(t, serverOptions{})
	body := `{"agent":"echo","input":[{"type":"text","text":"hi"},` +
		`{"type":"binary","mimeType":"image/png","data":"` + imagestest.Base64(imagestest.PNG()) + `"}]}`
	wantProblem(t, ts.do(t, "POST", "/run", body), http.StatusUnprocessableEntity, "images_not_supported")
	run := ts.must(t, http.StatusAccepted, "POST", "/run", `{"agent":"echo","input":[{"type":"text","text":"hi"}]}`)
	assert.Equal(t, "hi", run["input"])
}

// TestAGUI_ImageParts: the AG-UI route reads the images of the new user
// message, naming the part of any that is wrong, and refuses good ones
// while runs cannot take them.
func TestAGUI_ImageParts(t *testing.T) {
	ts := newServer(t, serverOptions{})
	content := []map[string]any{textPart("What is this?"), imagePart("image/png", imagestest.PNG())}
	msg := map[string]any{"id": "u1", "role": "user", "content": content}
	p := wantProblem(t, ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "t-img", "r1", msg)),
		http.StatusUnprocessableEntity, "images_not_supported")
	assert.Contains(t, p["detail"], "messages[0].content carries images")

	msg["content"] = []map[string]any{textPart("hi"), imagePart("image/gif", imagestest.PNG())}
	p = wantProblem(t, ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "t-img", "r2", msg)), http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["messages[0].content[1]"], "says image/gif but its bytes are image/png")

	msg["content"] = []map[string]any{textPart("hi"), {"type": "video", "source": map[string]any{"type": "url", "value": "https://example.com/v.mp4"}}}
	p = wantProblem(t, ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "t-img", "r3", msg)), http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["messages[0].content[1]"], "is a video part")

	// Text parts alone run as before.
	msg["content"] = []map[string]any{textPart("hi")}
	frames := ts.aguiRun(t, "echo", aguiBody(t, "t-img", "r4", msg))
	_, text := assistantOf(t, frames)
	assert.NotEmpty(t, text)
}

// TestImages_Get serves the images a session's messages carry, by hash,
// to the session's tenant only.
func TestImages_Get(t *testing.T) {
	st := memory.New()
	lib := images.New(st, images.Limits{}, nil)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}, api: httpapi.Options{
		Images: lib, APIKeys: map[string]string{"key-a": "acme", "key-g": "globex"}}})
	acme, globex := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-g"}
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)["id"].(string)
	sess := storedSession(t, st, "acme")
	png, webp := imagestest.PNG(), imagestest.WebP()
	refs, err := lib.Put(t.Context(), "acme", sess.ID, []images.Input{
		{MediaType: "image/png", Data: png}, {MediaType: "image/webp", Data: webp}})
	require.NoError(t, err)

	res := ts.do(t, "GET", "/sessions/"+id+"/images/"+refs[0].Hash, "", acme...)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	assert.Equal(t, png, res.body)
	assert.Equal(t, "image/png", res.header.Get("Content-Type"))
	assert.Equal(t, `"`+refs[0].Hash+`"`, res.header.Get("ETag"))
	assert.Equal(t, "nosniff", res.header.Get("X-Content-Type-Options"))
	assert.Contains(t, res.header.Get("Cache-Control"), "immutable")
	again := ts.do(t, "GET", "/sessions/"+id+"/images/"+refs[0].Hash, "", append(acme, "If-None-Match", res.header.Get("ETag"))...)
	assert.Equal(t, http.StatusNotModified, again.status)

	list := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/images", "", acme...)["data"].([]any)
	require.Len(t, list, 2)
	for _, item := range list {
		img := item.(map[string]any)
		assert.Equal(t, fmt.Sprintf("/sessions/%s/images/%s", id, img["hash"]), img["url"])
		assert.Contains(t, []any{"image/png", "image/webp"}, img["media_type"])
	}

	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/images/"+refs[0].Hash, "", globex...), http.StatusNotFound, "session_not_found")
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/images/"+session.ImageHash([]byte("x")), "", acme...), http.StatusNotFound, "image_not_found")
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/images/"+strings.ToUpper(refs[0].Hash), "", acme...), http.StatusNotFound, "image_not_found")
	other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)["id"].(string)
	wantProblem(t, ts.do(t, "GET", "/sessions/"+other+"/images/"+refs[0].Hash, "", acme...), http.StatusNotFound, "image_not_found")
}

// storedSession returns the one session tenant has in st.
func storedSession(t *testing.T, st *memory.Store, tenant string) session.Session {
	t.Helper()
	ss, err := st.ListSessions(t.Context(), session.Query{Tenant: tenant, Limit: 10})
	require.NoError(t, err)
	require.Len(t, ss, 1)
	return ss[0]
}
