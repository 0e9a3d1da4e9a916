package codeinterp

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/warrenhq/warren/internal/agent/codeinterp/jupyter"
)

// Headers of the code-interpreter API.
const (
	headerTrafficToken = "E2B-Traffic-Access-Token"
	headerAccessToken  = "X-Access-Token"
)

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /execute", s.handleExecute)
	mux.HandleFunc("POST /contexts", s.handleCreateContext)
	mux.HandleFunc("GET /contexts", s.handleListContexts)
	mux.HandleFunc("POST /contexts/{id}/restart", s.handleRestartContext)
	mux.HandleFunc("DELETE /contexts/{id}", s.handleDeleteContext)
	return mux
}

// ServeHTTP serves the API, checking the traffic token when one is set.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.TrafficToken != "" && !(r.Method == http.MethodGet && r.URL.Path == "/health") {
		got := r.Header.Get(headerTrafficToken)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.TrafficToken)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"code":403,"message":"missing or invalid %s header"}`, headerTrafficToken)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, "OK")
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	req, err := parseExecute(r.Body)
	if err != nil {
		writeText(w, requestErrorStatus(err), err.Error())
		return
	}
	var c *codeContext
	if req.ContextID != "" {
		if c = s.lookup(req.ContextID); c == nil {
			writeText(w, http.StatusNotFound, fmt.Sprintf("Context %s not found", req.ContextID))
			return
		}
	} else {
		c = s.defaultContext(req.Language) // "" is python
	}
	out := newStream(w, s.cfg.Keepalive)
	defer out.Close()
	c.execute(r.Context(), req, r.Header.Get(headerAccessToken), out)
}

func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	req, err := parseCreateContext(r.Body)
	if err != nil {
		writeText(w, requestErrorStatus(err), err.Error())
		return
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = s.defaultWorkdir()
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("cwd %q is not a directory", cwd))
		return
	}
	c := newCodeContext(s, jupyter.NewID(), req.Language, cwd)
	if err := c.acquire(r.Context()); err != nil {
		return
	}
	_, err = c.kernel()
	c.release()
	if err != nil {
		s.log.Error("creating context", "language", req.Language, "err", err)
		writeText(w, http.StatusInternalServerError, fmt.Sprintf("Failed to create context: %v", err))
		return
	}
	s.mu.Lock()
	closed := s.ctx.Err() != nil
	if !closed {
		s.contexts[c.ID] = c
	}
	s.mu.Unlock()
	if closed {
		c.kill(true)
		writeText(w, http.StatusServiceUnavailable, "server is closing")
		return
	}
	writeJSON(w, c)
}

func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]*codeContext, 0, len(s.contexts))
	for _, c := range s.contexts {
		list = append(list, c)
	}
	s.mu.Unlock()
	// In order of creation, as E2B's server lists them: clients take the
	// last one as the newest.
	slices.SortFunc(list, func(a, b *codeContext) int { return cmp.Compare(a.seq, b.seq) })
	writeJSON(w, list)
}

func (s *Server) handleRestartContext(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(r.PathValue("id"))
	if c == nil {
		writeText(w, http.StatusNotFound, fmt.Sprintf("Context %s not found", r.PathValue("id")))
		return
	}
	if err := c.restart(r.Context()); err != nil {
		if r.Context().Err() == nil {
			s.log.Error("restarting context", "context", c.ID, "err", err)
			writeText(w, http.StatusInternalServerError, fmt.Sprintf("Failed to restart context: %v", err))
		}
		return
	}
	writeJSON(w, nil)
}

func (s *Server) handleDeleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	c := s.contexts[id]
	delete(s.contexts, id)
	for lang, d := range s.defaults {
		if d == c {
			delete(s.defaults, lang)
		}
	}
	s.mu.Unlock()
	if c == nil {
		writeText(w, http.StatusNotFound, fmt.Sprintf("Context %s not found", id))
		return
	}
	c.kill(true)
	writeJSON(w, nil)
}

func (s *Server) lookup(id string) *codeContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contexts[id]
}

// defaultContext returns the language's default context, registering it
// on first use; its kernel starts with its first execution.
func (s *Server) defaultContext(lang string) *codeContext {
	if lang == "" {
		lang = langPython
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.defaults[lang]; c != nil {
		return c
	}
	c := newCodeContext(s, jupyter.NewID(), lang, s.defaultWorkdir())
	s.defaults[lang] = c
	s.contexts[c.ID] = c
	return c
}

func requestErrorStatus(err error) int {
	if errors.Is(err, errUnsupportedLanguage) {
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, errors.New("encoding response failed").Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(msg))
}
