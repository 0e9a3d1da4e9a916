package files

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Operations a signature grants.
const (
	OperationRead  = "read"
	OperationWrite = "write"
)

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

// authorize lets a request through when no token is set, when it carries
// the token, or when its URL is signed for op and unexpired.
func authorize(r *http.Request, op, token string) error {
	if token == "" {
		return nil
	}
	if got := r.Header.Get("X-Access-Token"); got != "" {
		if equal(got, token) {
			return nil
		}
		return errorf(http.StatusUnauthorized, "access token present in header but does not match")
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return errorf(http.StatusUnauthorized, "missing signature query parameter")
	}
	want := Signature(q.Get("path"), op, q.Get("username"), token)
	raw := q.Get("signature_expiration")
	if raw == "" {
		if !equal(sig, want) {
			return errorf(http.StatusUnauthorized, "invalid signature")
		}
		return nil
	}
	exp, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return errorf(http.StatusUnauthorized, "invalid signature expiration '%s'", raw)
	}
	if !equal(sig, SignatureWithExpiration(q.Get("path"), op, q.Get("username"), token, exp)) {
		return errorf(http.StatusUnauthorized, "invalid signature")
	}
	// The URL stays valid through its expiration second.
	if time.Now().Unix() > exp {
		return errorf(http.StatusUnauthorized, "signature is already expired")
	}
	return nil
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
