package proxy

import (
	"encoding/json"
	"net/http"
	"sync"
)

// errorBody is E2B's proxy error JSON.
type errorBody struct {
	SandboxID string `json:"sandboxId,omitempty"`
	Message   string `json:"message"`
	Port      int    `json:"port,omitempty"`
	Code      int    `json:"code"`
}

func writeError(w http.ResponseWriter, e errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(e)
}

// bufferPool recycles the copy buffers of proxied bodies.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }
