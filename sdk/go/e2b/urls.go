package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"time"
)

// URLOptions configures UploadURL and DownloadURL.
type URLOptions struct {
	// User reads or writes as this user; default the sandbox's default user.
	User string
	// Expires limits the signature's validity to this long from now; 0 means it never
	// expires. Only secured sandboxes (the default) sign URLs.
	Expires time.Duration
}

// UploadURL returns a URL to which a program without credentials can POST a file (multipart,
// part "file") to path ("" for the user's home, with the part's file name). On a secured
// sandbox the URL carries a signature made with the sandbox's access token.
func (s *Sandbox) UploadURL(path string, opts URLOptions) (string, error) {
	return s.fileURL(path, "write", opts, time.Now())
}

// DownloadURL returns a URL from which a program without credentials can GET a file, signed
// as UploadURL's.
func (s *Sandbox) DownloadURL(path string, opts URLOptions) (string, error) {
	return s.fileURL(path, "read", opts, time.Now())
}

func (s *Sandbox) fileURL(path, operation string, opts URLOptions, now time.Time) (string, error) {
	token := s.envd.token
	if token == "" && opts.Expires != 0 {
		return "", invalidArg("Signature expiration can be used only when sandbox is created as secured.")
	}
	user := s.envd.user(opts.User)
	q := url.Values{}
	if user != "" {
		q.Set("username", user)
	}
	if path != "" {
		q.Set("path", path)
	}
	if token != "" {
		var expiration int64
		if opts.Expires != 0 {
			expiration = now.Add(opts.Expires).Unix()
		}
		q.Set("signature", signature(path, operation, user, token, expiration))
		if expiration != 0 {
			q.Set("signature_expiration", strconv.FormatInt(expiration, 10))
		}
	}
	return s.client.cfg.directURL(s.ID, s.Domain, envdPort) + "/files?" + q.Encode(), nil
}

// FileSignature is what GetSignature returns: the signature, and its expiry in Unix seconds
// (0: it never expires).
type FileSignature struct {
	Signature  string
	Expiration int64
}

// GetSignature signs a file URL of a secured sandbox whose access token is accessToken (its
// EnvdAccessToken), as UploadURL and DownloadURL do, for a program that builds the URL
// itself: operation is "read" or "write", user the user who reads or writes ("" for the
// default), expires 0 for a signature that never expires.
func GetSignature(path, operation, user, accessToken string, expires time.Duration) (FileSignature, error) {
	if accessToken == "" {
		return FileSignature{}, invalidArg("Access token is not set and signature cannot be generated!")
	}
	if operation != "read" && operation != "write" {
		return FileSignature{}, invalidArg("operation %q: want read or write", operation)
	}
	var expiration int64
	if expires != 0 {
		expiration = time.Now().Add(expires).Unix()
	}
	return FileSignature{signature(path, operation, user, accessToken, expiration), expiration}, nil
}

// signature signs a file URL as envd checks it: v1_ and the unpadded base64 of the SHA-256 of
// path:operation:user:token[:expiration].
func signature(path, operation, user, token string, expiration int64) string {
	raw := path + ":" + operation + ":" + user + ":" + token
	if expiration != 0 {
		raw += ":" + strconv.FormatInt(expiration, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}
