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
	"github.com/kerneld/kerneld/internal/session/aguitest"
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
// user message. Text parts make the input; images, checked and kept, go
// with it into the history the model reads; a wrong part is named.
func TestRun_ContentParts(t *testing.T) {
	st := memory.New()
	lib := images.New(st, images.Limits{MaxBytes: 1000, MaxPerMessage: 2}, nil)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}, api: httpapi.Options{Images: lib}})
	id := ts.createSession(t, "echo")

	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", runBody(t, textPart("Hello, "), textPart("world")))
	assert.Equal(t, "Hello, world", run["input"], "text parts are joined")
	ts.waitRun(t, id, run["id"].(string))

	kept := func(data []byte, mt string) map[string]any {
		h := session.ImageHash(data)
		return map[string]any{"hash": h, "media_type": mt, "url": "/sessions/" + id + "/images/" + h}
	}
	for _, tt := range []struct {
		name  string
		parts []map[string]any
		text  string
		want  []map[string]any
	}{
		{"AG-UI 1.0 data", []map[string]any{textPart("What is this?"), imagePart("image/png", imagestest.PNG())},
			"What is this?", []map[string]any{kept(imagestest.PNG(), "image/png")}},
		{"AG-UI 1.0 url", []map[string]any{{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.com/a.webp"}}},
			"", []map[string]any{{"hash": nil, "media_type": nil, "url": "https://example.com/a.webp"}}},
		{"binary data", []map[string]any{{"type": "binary", "mimeType": "image/gif", "data": imagestest.Base64(imagestest.GIF())}},
			"", []map[string]any{kept(imagestest.GIF(), "image/gif")}},
		{"binary url", []map[string]any{{"type": "binary", "mimeType": "image/jpeg", "url": "https://example.com/a.jpg", "filename": "a.jpg"}},
			"", []map[string]any{{"hash": nil, "media_type": "image/jpeg", "url": "https://example.com/a.jpg"}}},
		{"a data URL", []map[string]any{{"type": "binary", "mimeType": "image/webp", "url": "data:image/webp;base64," + imagestest.Base64(imagestest.WebP())}},
			"", []map[string]any{kept(imagestest.WebP(), "image/webp")}},
		{"images, no text", []map[string]any{imagePart("image/jpeg", imagestest.JPEG()), imagePart("image/png", imagestest.PNG())},
			"", []map[string]any{kept(imagestest.JPEG(), "image/jpeg"), kept(imagestest.PNG(), "image/png")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", runBody(t, tt.parts...))
			assert.Equal(t, tt.text, run["input"])
			ts.waitRun(t, id, run["id"].(string))
			user := lastUserMessage(t, ts, id)
			assert.Equal(t, tt.text, user["content"])
			assert.JSONEq(t, string(mustJSON(t, tt.want)), string(mustJSON(t, user["images"])))
		})
	}
	res := ts.do(t, "GET", "/sessions/"+id+"/images/"+session.ImageHash(imagestest.PNG()), "")
	require.Equal(t, http.StatusOK, res.status)
	assert.Equal(t, imagestest.PNG(), res.body, "kept once, served by hash")
}

// lastUserMessage returns the last user message of session id's history.
func lastUserMessage(t *testing.T, ts *testServer, id string) map[string]any {
	t.Helper()
	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages?limit=200", "")["data"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i].(map[string]any); m["role"] == "user" {
			return m
		}
	}
	t.Fatal("no user message")
	return nil
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
// route does, images included.
func TestOneCallRun_ContentParts(t *testing.T) {
	ts := newServer(t, serverOptions{})
	body := `{"agent":"echo","session_id":"one-img","input":[{"type":"text","text":"hi"},` +
		`{"type":"binary","mimeType":"image/png","data":"` + imagestest.Base64(imagestest.PNG()) + `"}]}`
	run := ts.must(t, http.StatusAccepted, "POST", "/run", body)
	assert.Equal(t, "hi", run["input"])
	ts.waitRun(t, "one-img", run["id"].(string))
	user := lastUserMessage(t, ts, "one-img")
	assert.Equal(t, session.ImageHash(imagestest.PNG()), user["images"].([]any)[0].(map[string]any)["hash"])
}

// TestAGUI_ImageParts: the AG-UI route takes the images of the new user
// message into the run, naming the part of any that is wrong.
func TestAGUI_ImageParts(t *testing.T) {
	ts := newServer(t, serverOptions{})
	content := []map[string]any{textPart("What is this?"), imagePart("image/png", imagestest.PNG())}
	msg := map[string]any{"id": "u1", "role": "user", "content": content}
	frames := ts.aguiRun(t, "echo", aguiBody(t, "t-img", "r1", msg))
	_, text := assistantOf(t, frames)
	assert.NotEmpty(t, text)
	user := lastUserMessage(t, ts, "t-img")
	assert.Equal(t, "What is this?", user["content"])
	assert.Equal(t, session.ImageHash(imagestest.PNG()), user["images"].([]any)[0].(map[string]any)["hash"])

	msg2 := map[string]any{"id": "u2", "role": "user", "content": []map[string]any{textPart("hi"), imagePart("image/gif", imagestest.PNG())}}
	p := wantProblem(t, ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "t-img", "r2", msg, msg2)), http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["messages[1].content[1]"], "says image/gif but its bytes are image/png")

	msg2["content"] = []map[string]any{textPart("hi"), {"type": "video", "source": map[string]any{"type": "url", "value": "https://example.com/v.mp4"}}}
	p = wantProblem(t, ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "t-img", "r3", msg, msg2)), http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["messages[1].content[1]"], "is a video part")
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

// TestEventStream_SnapshotImages: a user message's images are in the
// MESSAGES_SNAPSHOT a reloaded client draws, as AG-UI image parts by URL
// (kerneld's own URL for an image it keeps, the client's otherwise) after
// the text, at the URLs GET /sessions/{id}/messages gives, and the stream
// stays a valid AG-UI stream.
func TestEventStream_SnapshotImages(t *testing.T) {
	st := memory.New()
	lib := images.New(st, images.Limits{MaxBytes: 1000, MaxPerMessage: 2}, nil)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}, api: httpapi.Options{Images: lib}})
	id := ts.createSession(t, "echo")
	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", runBody(t, textPart("What is this?"),
		imagePart("image/png", imagestest.PNG()),
		map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.com/a.webp"}}))
	ts.waitRun(t, id, run["id"].(string))
	listed := lastUserMessage(t, ts, id)["images"].([]any)
	require.Len(t, listed, 2)

	s := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	frames := readFrames(t, s, 3)
	require.Equal(t, "MESSAGES_SNAPSHOT", frames[1].event)
	var snap struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(frames[1].data), &snap))
	require.NotEmpty(t, snap.Messages)
	require.Equal(t, "user", snap.Messages[0].Role)
	want := []map[string]any{
		{"type": "text", "text": "What is this?"},
		{"type": "image", "source": map[string]any{"type": "url", "value": listed[0].(map[string]any)["url"], "mimeType": "image/png"}},
		{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.com/a.webp"}},
	}
	assert.JSONEq(t, string(mustJSON(t, want)), string(mustJSON(t, snap.Messages[0].Content)))
	assert.Equal(t, "/sessions/"+id+"/images/"+session.ImageHash(imagestest.PNG()), listed[0].(map[string]any)["url"])
	img := ts.do(t, "GET", listed[0].(map[string]any)["url"].(string), "")
	assert.Equal(t, http.StatusOK, img.status)
	assert.Equal(t, imagestest.PNG(), img.body, "the snapshot's URL serves the image")
	aguitest.VerifyJSON(t, streamObjects(frames))
}
