package files

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/envdauth"
	"github.com/warrenhq/warren/internal/warrentest"
)

func TestAuthorization(t *testing.T) {
	const token = "secret-token"
	f := newFixture(t)
	file := filepath.Join(f.dir, "a.txt")
	warrentest.WriteFile(t, file, "content")
	future := strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	futureN, _ := strconv.ParseInt(future, 10, 64)
	pastN, _ := strconv.ParseInt(past, 10, 64)

	tests := []struct {
		name   string
		token  string // the sandbox's token; "" means none
		url    string
		header []string
		status int
		msg    string
	}{
		{"no token set is open", "", f.fileURL("path", file), nil, 200, ""},
		{"token header", token, f.fileURL("path", file), []string{"X-Access-Token", token}, 200, ""},
		{"wrong token header", token, f.fileURL("path", file), []string{"X-Access-Token", "nope"}, 401, "access token present in header but does not match"},
		{"wrong token beats a good signature", token, f.fileURL("path", file, "signature", envdauth.Signature(file, OperationRead, "", token)), []string{"X-Access-Token", "nope"}, 401, "access token present in header but does not match"},
		{"nothing", token, f.fileURL("path", file), nil, 401, "missing signature query parameter"},
		{"signature", token, f.fileURL("path", file, "signature", envdauth.Signature(file, OperationRead, "", token)), nil, 200, ""},
		{"signature for write used to read", token, f.fileURL("path", file, "signature", envdauth.Signature(file, OperationWrite, "", token)), nil, 401, "invalid signature"},
		{"signature for another path", token, f.fileURL("path", file, "signature", envdauth.Signature(file+"x", OperationRead, "", token)), nil, 401, "invalid signature"},
		{"signature with expiry", token, f.fileURL("path", file, "signature", envdauth.SignatureWithExpiration(file, OperationRead, "", token, futureN), "signature_expiration", future), nil, 200, ""},
		{"expired", token, f.fileURL("path", file, "signature", envdauth.SignatureWithExpiration(file, OperationRead, "", token, pastN), "signature_expiration", past), nil, 401, "signature is already expired"},
		{"expiry not covered by signature", token, f.fileURL("path", file, "signature", envdauth.Signature(file, OperationRead, "", token), "signature_expiration", future), nil, 401, "invalid signature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.st.SetAccessToken(tc.token)
			r := do(t, newRequest(t, http.MethodGet, tc.url, nil, tc.header...))
			if tc.status == 200 {
				if r.status != 200 || r.body != "content" {
					t.Fatalf("got %d %q, want 200 with the file", r.status, r.body)
				}
				return
			}
			wantError(t, r, tc.status, tc.msg)
		})
	}
}

func TestSignedUpload(t *testing.T) {
	const token = "tok"
	f := newFixture(t)
	f.st.SetAccessToken(token)
	dst := filepath.Join(f.dir, "up.txt")
	url := f.fileURL("path", dst, "signature", envdauth.Signature(dst, OperationWrite, "", token))
	r := do(t, newRequest(t, http.MethodPost, url, strings.NewReader("abc"), "Content-Type", "application/octet-stream"))
	if r.status != 200 || warrentest.ReadFile(t, dst) != "abc" {
		t.Fatalf("signed upload: %d %s", r.status, r.body)
	}
	url = f.fileURL("path", dst, "signature", envdauth.Signature(dst, OperationRead, "", token))
	wantError(t, do(t, newRequest(t, http.MethodPost, url, strings.NewReader("abc"), "Content-Type", "application/octet-stream")), 401, "invalid signature")
}

func TestUnknownUser(t *testing.T) {
	f := newFixture(t)
	r := do(t, newRequest(t, http.MethodGet, f.fileURL("path", f.dir, "username", "no-such-user-xyz"), nil))
	wantError(t, r, 401, "")
	const prefix = "error looking up user 'no-such-user-xyz': "
	if !strings.Contains(r.body, prefix) {
		t.Errorf("body %q does not contain %q", r.body, prefix)
	}
}
