// Package envdauth holds the rules by which a sandbox's agent (envd) lets a
// request in: the sandbox's access token in X-Access-Token, the signed
// /files URLs the SDKs derive from that token, and the few requests that
// need neither (GET /health, CORS preflights).
//
// The agent enforces these rules on every request; the proxy applies the
// same ones to a request for a paused sandbox, which may only wake for a
// request its agent would accept. It owns no tokens and no HTTP routing:
// callers pass the token and answer the refusals.
package envdauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Operations a /files signature grants.
const (
	OperationRead  = "read"
	OperationWrite = "write"
)

// UnauthorizedMessage is envd's answer to a request without a credential
// it accepts, on every path but /files.
const UnauthorizedMessage = "unauthorized access, please provide a valid access token or method signing if supported"

// Error is a request refused for its credentials. Its text is the message
// envd answers, always with 401.
type Error string

func (e Error) Error() string { return string(e) }

// Signature is the signature of a /files URL without expiry, as the SDK
// computes it: path is the raw `path` query value, username "" when the URL
// names none.
func Signature(path, operation, username, accessToken string) string {
	return sign(path + ":" + operation + ":" + username + ":" + accessToken)
}

// SignatureWithExpiration is Signature for a URL valid until expiration
// (unix seconds).
func SignatureWithExpiration(path, operation, username, accessToken string, expiration int64) string {
	return sign(path + ":" + operation + ":" + username + ":" + accessToken + ":" + strconv.FormatInt(expiration, 10))
}

func sign(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// Check applies envd's rules to r for a sandbox whose access token is
// token ("" = none: everything is let in): GET /health needs nothing, GET
// and POST /files the token or a URL signed for reading or writing, any
// other request the token. CORS preflights are not judged here: see
// Preflight. The agent's own paths (/init, its tunnel) are not covered.
func Check(r *http.Request, token string, now time.Time) error {
	switch {
	case token == "":
		return nil
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		return nil
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		return CheckFiles(r, OperationRead, token, now)
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		return CheckFiles(r, OperationWrite, token, now)
	case equal(r.Header.Get("X-Access-Token"), token):
		return nil
	}
	return Error(UnauthorizedMessage)
}

// CheckFiles lets a /files request for op through when no token is set,
// when it carries the token, or when its URL is signed for op and, if the
// signature has an expiry, unexpired at now.
func CheckFiles(r *http.Request, op, token string, now time.Time) error {
	if token == "" {
		return nil
	}
	if got := r.Header.Get("X-Access-Token"); got != "" {
		if equal(got, token) {
			return nil
		}
		return Error("access token present in header but does not match")
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return Error("missing signature query parameter")
	}
	raw := q.Get("signature_expiration")
	if raw == "" {
		if !equal(sig, Signature(q.Get("path"), op, q.Get("username"), token)) {
			return Error("invalid signature")
		}
		return nil
	}
	exp, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return Error("invalid signature expiration '" + raw + "'")
	}
	if !equal(sig, SignatureWithExpiration(q.Get("path"), op, q.Get("username"), token, exp)) {
		return Error("invalid signature")
	}
	// The URL stays valid through its expiration second.
	if now.Unix() > exp {
		return Error("signature is already expired")
	}
	return nil
}

// Signed reports whether r, a GET or POST of /files with a signature, is
// let through by token, its expiry aside: the sandbox whose token it is
// is the one a URL carrying no sandbox ID was made for (CheckFiles then
// judges it, expiry included).
func Signed(r *http.Request, token string) bool {
	op := OperationRead
	switch {
	case token == "" || r.URL.Path != "/files" || r.URL.Query().Get("signature") == "":
		return false
	case r.Method == http.MethodPost:
		op = OperationWrite
	case r.Method != http.MethodGet:
		return false
	}
	return CheckFiles(r, op, token, time.Unix(0, 0)) == nil
}

// equal compares in constant time, so that the comparison leaks nothing
// about how much of a guess was right.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Preflight answers r as envd answers a CORS preflight, and reports
// whether it was one: every origin, method and requested header is
// allowed, because the access token, not the origin, protects the agent
// (and the SDK runs in browsers). A preflight carries no credentials, so
// it needs none.
func Preflight(w http.ResponseWriter, r *http.Request) bool {
	if !IsPreflight(r) {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "HEAD, GET, POST, PUT, PATCH, DELETE")
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "7200")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// IsPreflight reports whether r is a CORS preflight: an OPTIONS request
// with an Origin, asking whether a method may be used.
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}
