package codeinterp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Languages a context can run. Aliases are resolved by normalizeLanguage.
const (
	langPython     = "python"
	langJavaScript = "javascript"
	langTypeScript = "typescript"
	langBash       = "bash"
	langR          = "r"
	langJava       = "java"
)

// maxBodyBytes bounds request bodies; code cells are small, and a runaway
// client must not make the agent buffer without limit.
const maxBodyBytes = 16 << 20

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// createContextRequest is the body of POST /contexts.
type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// errBadRequest marks errors that are the client's fault (400).
var errBadRequest = errors.New("bad request")

// errUnsupportedLanguage is answered with 500, as E2B's server does (its
// context creation fails on an unknown language).
var errUnsupportedLanguage = errors.New("unsupported language")

// parseExecute decodes and validates an /execute body. The SDK sends null
// for absent context_id, language and env_vars, which decode as empty.
func parseExecute(r io.Reader) (executeRequest, error) {
	var req executeRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	if req.ContextID != "" && strings.TrimSpace(req.Language) != "" {
		return req, fmt.Errorf("%w: only one of context_id or language can be provided", errBadRequest)
	}
	if req.Language != "" {
		lang, ok := normalizeLanguage(req.Language)
		if !ok {
			return req, fmt.Errorf("%w %q", errUnsupportedLanguage, req.Language)
		}
		req.Language = lang
	}
	for name, value := range req.EnvVars {
		if !validEnvName(name) {
			return req, fmt.Errorf("%w: invalid env var name %q", errBadRequest, name)
		}
		if strings.ContainsRune(value, 0) {
			return req, fmt.Errorf("%w: env var %s contains a NUL byte", errBadRequest, name)
		}
	}
	return req, nil
}

// parseCreateContext decodes a /contexts body; an empty body means all
// defaults.
func parseCreateContext(r io.Reader) (createContextRequest, error) {
	var req createContextRequest
	if err := decodeJSON(r, &req); err != nil && !errors.Is(err, io.EOF) {
		return req, err
	}
	lang, ok := normalizeLanguage(req.Language)
	if !ok {
		return req, fmt.Errorf("%w %q", errUnsupportedLanguage, req.Language)
	}
	req.Language = lang
	return req, nil
}

func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(r, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty body: %w", errBadRequest, err)
		}
		return fmt.Errorf("%w: invalid JSON body: %w", errBadRequest, err)
	}
	return nil
}

// normalizeLanguage maps a language as clients spell it to ours; "" is
// python, the default.
func normalizeLanguage(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "python", "python3":
		return langPython, true
	case "javascript", "js":
		return langJavaScript, true
	case "typescript", "ts":
		return langTypeScript, true
	case "bash", "sh":
		return langBash, true
	case "r":
		return langR, true
	case "java":
		return langJava, true
	}
	return "", false
}

// validEnvName accepts POSIX shell identifiers: every kernel, bash
// included, can set and unset those without quoting tricks.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}
