package sandbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// randomLower returns 20 random lowercase letters and digits (100 bits).
func randomLower() string { return strings.ToLower(rand.Text()[:20]) }

// NewID returns a fresh sandbox ID: "i" and 20 lowercase letters or digits,
// the shape E2B's clients expect (no '-', which host routing splits on).
func NewID() string { return "i" + randomLower() }

// NewSnapshotID returns a fresh snapshot ID, usable as a template ID.
func NewSnapshotID() string { return "s" + randomLower() }

// NewToken returns a random 32-byte hex token for access and traffic tokens
// and agent secrets.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// NewAPIKey returns a fresh API key: "e2b_" and 40 hex digits, a shape
// every 2.x SDK accepts.
func NewAPIKey() string {
	b := make([]byte, 20)
	rand.Read(b)
	return "e2b_" + hex.EncodeToString(b)
}

// HashAPIKey returns the hex SHA-256 of key: what the store keeps.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// maxAPIKeyHex bounds the hex digits of an API key: Warren and E2B issue
// 40, and a header far longer than any key is not one.
const maxAPIKeyHex = 128

// ValidAPIKey reports whether key has the shape of a Warren API key:
// "e2b_" and 1 to maxAPIKeyHex lowercase hex digits, exactly what SDK
// 2.30-2.45 accept client-side (^e2b_[0-9a-f]+$). An odd count is fine
// (the digits are not read as bytes); uppercase is not.
func ValidAPIKey(key string) bool {
	digits, ok := strings.CutPrefix(key, "e2b_")
	if !ok || digits == "" || len(digits) > maxAPIKeyHex {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseID validates a sandbox ID from a client. It accepts E2B's
// composite "<id>-<clientID>" and drops the suffix. An ID must be lowercase
// letters and digits; anything else is KindInvalid.
func ParseID(s string) (string, error) {
	id, _, _ := strings.Cut(s, "-")
	if id == "" || len(id) > 64 {
		return "", Errorf(KindInvalid, "Invalid sandbox ID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "", Errorf(KindInvalid, "Invalid sandbox ID")
		}
	}
	return id, nil
}

// IDForKey returns the sandbox ID a create made under a call's key takes
// (internal/lifecycle's WithCallKey): the same for the same key, of
// NewID's shape.
func IDForKey(key string) string {
	sum := sha256.Sum256([]byte("warren: the sandbox of a keyed create\x00" + key))
	return "i" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:20]
}
