package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/web"
)

// consolePrefix is where the console's files other than index.html are
// served. Its pages, styles and scripts need no key: they hold nothing
// secret, and the console asks for a key only to call the API.
const consolePrefix = "/console/"

// consolePolicy forbids the console any request but to this origin: no
// CDN, font or analytics can slip in, and an injected script cannot
// send data elsewhere.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleTypes are the console's content types, fixed here rather than
// read from the system's MIME tables, which differ between machines (some
// serve .js as text/plain, which browsers refuse as a module).
var consoleTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// consoleFile is one embedded file, ready to serve.
type consoleFile struct {
	body        []byte
	etag        string
	contentType string
}

// consoleFiles reads the embedded console once, hashing each file for
// its ETag: embedded files have no modification time to revalidate by.
var consoleFiles = sync.OnceValue(func() map[string]consoleFile {
	files := map[string]consoleFile{}
	_ = fs.WalkDir(web.Console, "console", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(web.Console, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype, ok := consoleTypes[path.Ext(name)]
		if !ok {
			ctype = "application/octet-stream"
		}
		files[strings.TrimPrefix(name, "console/")] = consoleFile{body: body,
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: ctype}
		return nil
	}) // walking an embedded tree does not fail
	return files
})

// isConsoleRequest reports whether r reads one of the console's files,
// which authenticate lets through without a key.
func isConsoleRequest(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, consolePrefix))
}

// handleConsoleIndex handles "GET /": the console's page.
func (s *Server) handleConsoleIndex(w http.ResponseWriter, r *http.Request) error {
	return serveConsoleFile(w, r, "index.html")
}

// handleConsoleFile handles "GET /console/{file}": the console's styles
// and scripts.
func (s *Server) handleConsoleFile(w http.ResponseWriter, r *http.Request) error {
	return serveConsoleFile(w, r, r.PathValue("file"))
}

// serveConsoleFile writes the named file, or 304 when the client's copy
// is current. Browsers revalidate every time (no-cache), so a new binary's
// console is never mixed with an old one's cached modules.
func serveConsoleFile(w http.ResponseWriter, r *http.Request, name string) error {
	f, ok := consoleFiles()[name]
	if !ok || name == "index.html" && r.URL.Path != "/" {
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeConsoleFileNotFound, "the console has no file %q", name)
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", consolePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	return nil
}
