package proxy

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"sync"
)

// errorBody is E2B's proxy error JSON.
type errorBody struct {
	SandboxID string `json:"sandboxId,omitempty"`
	Message   string `json:"message"`
	Port      int    `json:"port,omitempty"`
	Code      int    `json:"code"`
}

// writeError answers r with e: as JSON, or as a page when r comes from a
// browser (someone opening a sandbox's URL), as E2B's proxy does.
func writeError(w http.ResponseWriter, r *http.Request, e errorBody) {
	w.Header().Set("Cache-Control", "no-store")
	if fromBrowser(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(e.Code)
		_ = errorPage.Execute(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(e)
}

// fromBrowser reports whether r is a browser's page load: it asks for
// HTML and names a browser engine. SDKs, curl and fetch() ask for neither.
func fromBrowser(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html") &&
		strings.HasPrefix(r.Header.Get("User-Agent"), "Mozilla/")
}

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Code}}: {{.Message}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em;color:#222}code{background:#eee;padding:.1em .3em}</style>
</head>
<body>
<h1>{{.Message}}</h1>
{{if .SandboxID}}<p>Sandbox <code>{{.SandboxID}}</code>{{if .Port}}, port <code>{{.Port}}</code>{{end}}.</p>{{end}}
{{if eq .Code 502}}{{if .Port}}<p>Start a server on this port inside the sandbox, listening on 0.0.0.0 or 127.0.0.1, then reload.</p>{{else}}<p>It is not running: it may have been killed, or timed out, or be paused without auto-resume.</p>{{end}}{{end}}
<p>Error {{.Code}} from Warren.</p>
</body>
</html>
`))

// bufferPool recycles the copy buffers of proxied bodies.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }
