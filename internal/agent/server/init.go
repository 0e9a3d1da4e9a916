package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/agent/trust"
)

// maxInitBody bounds POST /init; env vars are the only large part.
const maxInitBody = 8 << 20

// initRequest is the body of POST /init. Every field is optional; a nil
// field leaves the setting as it is. Fields envd knows but a container
// has no use for (volume mounts, hyperloop, …) are ignored.
type initRequest struct {
	EnvVars        map[string]string `json:"envVars"`
	AccessToken    *string           `json:"accessToken"`
	Timestamp      *time.Time        `json:"timestamp"`
	DefaultUser    *string           `json:"defaultUser"`
	DefaultWorkdir *string           `json:"defaultWorkdir"`
	// CABundle is PEM certificates to install into the trust store
	// (Warren's CA, for the egress gateway's interception).
	CABundle *string `json:"caBundle"`
	// AgentSecret (Warren's own) replaces the server secret, for an agent
	// restored from another sandbox's memory (a fork, a sandbox of a
	// memory snapshot), which holds that sandbox's secret until told its
	// own. It is taken only from a caller who proved the current one.
	AgentSecret *string `json:"agentSecret"`
}

// parseInit decodes and validates a /init body. An empty body is an empty
// request.
func parseInit(body []byte) (initRequest, error) {
	var req initRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return initRequest{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	if dec.More() {
		return initRequest{}, errors.New("invalid JSON body: trailing data")
	}
	// Commands get these as their environment; exec refuses NULs and a key
	// with '=' would silently become a different variable.
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return initRequest{}, fmt.Errorf("invalid env var name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return initRequest{}, fmt.Errorf("env var %q contains a NUL byte", k)
		}
	}
	for name, p := range map[string]*string{"defaultUser": req.DefaultUser, "defaultWorkdir": req.DefaultWorkdir} {
		if p != nil && strings.ContainsRune(*p, 0) {
			return initRequest{}, fmt.Errorf("%s contains a NUL byte", name)
		}
	}
	if req.CABundle != nil && *req.CABundle != "" {
		if _, err := trust.Parse([]byte(*req.CABundle)); err != nil {
			return initRequest{}, err
		}
	}
	return req, nil
}

// authorized applies the token rules of /init: while no token is set,
// anyone may set one; once set, the caller must prove it knows it, and a
// body token is an attempt to set the token, so it must be the same one.
// The Warren server (server true: it proved the server secret) may set
// another token by proving the current one in the header: a fork's agent,
// restored with its source's token, is given its own.
func (req initRequest) authorized(current, header string, server bool) bool {
	if current == "" || server && equalSecret(header, current) {
		return true
	}
	if req.AccessToken != nil && *req.AccessToken != "" {
		return equalSecret(*req.AccessToken, current)
	}
	return equalSecret(header, current)
}

func (s *Server) init(w http.ResponseWriter, r *http.Request) {
	if !s.initMu.TryLock() {
		writeError(w, http.StatusServiceUnavailable, "another init request is in progress")
		return
	}
	defer s.initMu.Unlock()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInitBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	req, err := parseInit(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	secret := s.serverSecret()
	if secret != "" && !equalSecret(r.Header.Get(secretHeader), secret) {
		writeError(w, http.StatusUnauthorized, "invalid agent secret")
		return
	}
	if req.AgentSecret != nil && (secret == "" || *req.AgentSecret == "") {
		writeError(w, http.StatusBadRequest, "agentSecret replaces a server secret, and this agent has none to replace")
		return
	}
	st := s.cfg.State
	if !req.authorized(st.AccessToken(), r.Header.Get("X-Access-Token"), secret != "") {
		writeError(w, http.StatusUnauthorized, "access token does not match the one set by the first init")
		return
	}
	// The timestamp orders init requests: one older than the newest seen
	// is a delayed retry and must not undo newer settings. The agent does
	// not set the system clock; a container shares the host's.
	if req.Timestamp != nil && !st.SyncClock(*req.Timestamp) {
		s.log.Info("ignoring stale init", "timestamp", req.Timestamp.Format(time.RFC3339Nano))
	} else if err := s.apply(req); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("X-Envd-Version", state.Version)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) apply(req initRequest) error {
	st := s.cfg.State
	if req.AgentSecret != nil {
		s.secret.Store(req.AgentSecret)
	}
	if req.CABundle != nil && *req.CABundle != "" {
		certs, _ := trust.Parse([]byte(*req.CABundle)) // parseInit checked it
		env, err := trust.Install(s.cfg.TrustRoot, certs)
		if err != nil {
			return fmt.Errorf("cannot install the CA bundle into the trust store: %w", err)
		}
		st.SetTrustEnv(env)
	}
	if req.EnvVars != nil {
		st.SetEnvVars(req.EnvVars)
	}
	if req.AccessToken != nil && *req.AccessToken != "" {
		st.SetAccessToken(*req.AccessToken)
	}
	if req.DefaultUser != nil {
		st.SetDefaultUser(*req.DefaultUser)
	}
	if req.DefaultWorkdir != nil {
		st.SetDefaultWorkdir(*req.DefaultWorkdir)
	}
	s.log.Info("initialised", "env_vars", len(req.EnvVars), "default_user", st.DefaultUser(), "default_workdir", st.DefaultWorkdir())
	if s.cfg.Initialised != nil {
		s.cfg.Initialised(s.serverSecret())
	}
	return nil
}
