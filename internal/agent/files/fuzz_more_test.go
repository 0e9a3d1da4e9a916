package files

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/envdauth"
)

// fuzzHandler is a handler with the current user as default user.
func fuzzHandler(f *testing.F, token string) *Handler {
	cur, err := user.Current()
	if err != nil {
		f.Fatal(err)
	}
	st := state.New()
	st.SetDefaultUser(cur.Username)
	if token != "" {
		st.SetAccessToken(token)
	}
	return New(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// FuzzSignedRequest sends GET and POST /files with arbitrary queries to a
// sandbox with an access token. Invariants: the handler never answers 500;
// anything but a 401 needs the token or the signature the token gives the
// query's own path, operation, user and (unexpired) expiry; a 401 is
// E2B's JSON error and touches nothing. Uploads are refused before they
// write, so a fuzzed path cannot land anywhere.
func FuzzSignedRequest(f *testing.F) {
	const token = "fuzz-token"
	h := fuzzHandler(f, token)
	dir := f.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		f.Fatal(err)
	}
	sign := func(op, username string) string {
		return url.Values{"path": {file}, "username": {username}, "signature": {envdauth.Signature(file, op, username, token)}}.Encode()
	}
	f.Add(sign(OperationRead, ""), false, "")
	f.Add(sign(OperationWrite, ""), true, "")
	f.Add(sign(OperationRead, "root"), true, "")
	f.Add("path="+url.QueryEscape(file)+"&signature=v1_AAAA&signature_expiration=99999999999", false, "")
	f.Add("path="+url.QueryEscape(file)+"&path=/etc/shadow&signature=x", false, "nope")
	f.Add("path=%zz&signature=v1_", true, token)
	f.Fuzz(func(t *testing.T, rawQuery string, post bool, header string) {
		method, op := http.MethodGet, OperationRead
		if post {
			method, op = http.MethodPost, OperationWrite
		}
		req := httptest.NewRequest(method, "/files", strings.NewReader("overwritten"))
		req.URL.RawQuery = rawQuery
		req.Header.Set("Content-Type", "application/octet-stream")
		if header != "" {
			req.Header.Set("X-Access-Token", header)
		}
		q := req.URL.Query()
		authorised := header == token
		if header == "" && q.Get("signature") != "" {
			want := envdauth.Signature(q.Get("path"), op, q.Get("username"), token)
			if raw := q.Get("signature_expiration"); raw != "" {
				exp, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
				want = envdauth.SignatureWithExpiration(q.Get("path"), op, q.Get("username"), token, exp)
				if err != nil || time.Now().Unix() > exp {
					want = ""
				}
			}
			authorised = want != "" && q.Get("signature") == want
		}
		if authorised && post {
			return // a real upload to a fuzzed path: not on this machine
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusInternalServerError:
			t.Fatalf("500: %s", rec.Body)
		case rec.Code != http.StatusUnauthorized && !authorised:
			t.Fatalf("status %d without the token or a valid signature: %s", rec.Code, rec.Body)
		case rec.Code == http.StatusUnauthorized:
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != 401 || e.Message == "" {
				t.Fatalf("401 body %q", rec.Body)
			}
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "content" {
			t.Fatalf("file now %q (%v)", b, err)
		}
	})
}

// FuzzParseMetadata feeds arbitrary X-Metadata-* headers. Invariants: a
// refusal is a 400; what is accepted is printable ASCII, keyed by the
// lowercased header name after the prefix, within the key and total
// limits, with every value as sent.
func FuzzParseMetadata(f *testing.F) {
	f.Add("X-Metadata-Owner", "team a", "x-metadata-build", "42")
	f.Add("X-Metadata-", "empty key", "X-Other", "ignored")
	f.Add("X-METADATA-K\x7f", "v", "X-Metadata-K", "caf\xc3\xa9")
	f.Add("X-Metadata-"+strings.Repeat("k", 300), "v", "X-Metadata-A", strings.Repeat("v", 5000))
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		h := http.Header{}
		h.Add(n1, v1) // as a server reads them: canonical names where they are tokens
		h.Add(n2, v2)
		md, err := parseMetadata(h)
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		sent, names := map[string]string{}, map[string]int{}
		for n, vs := range h {
			if len(n) > len(metadataHeader) && strings.EqualFold(n[:len(metadataHeader)], metadataHeader) {
				k := strings.ToLower(n[len(metadataHeader):])
				sent[k] = strings.Join(vs, ", ")
				names[k]++
			}
		}
		if len(md) != len(sent) {
			t.Fatalf("kept %v of %v", md, sent)
		}
		total := 0
		for k, v := range md {
			if !printable(k) || !printable(v) || k != strings.ToLower(k) || k == "" || len(k) > maxMetadataKey {
				t.Fatalf("accepted key %q value %q", k, v)
			}
			total += len(k) + len(v)
			// Two header names of one key in different cases: either wins.
			if names[k] == 1 && sent[k] != v {
				t.Fatalf("key %q holds %q, sent %q", k, v, sent[k])
			}
		}
		if total > maxMetadataTotal {
			t.Fatalf("accepted %d bytes", total)
		}
	})
}

// FuzzChooseEncoding feeds arbitrary Accept-Encoding values. Invariants:
// the answer is gzip or identity, never one the client refused (q=0 or
// "*;q=0" without naming it), and only "no answer" when the client
// refused both.
func FuzzChooseEncoding(f *testing.F) {
	f.Add("gzip", false, int64(1<<20))
	f.Add("gzip;q=0, identity", true, int64(10))
	f.Add("*;q=0", false, int64(0))
	f.Add("identity;q=NaN, gzip;q=0", false, int64(5))
	f.Add("br;q=1, gzip;q=0.5, x-gzip;q=1e-400", false, int64(100_000))
	f.Fuzz(func(t *testing.T, value string, identityOnly bool, size int64) {
		enc, ok := chooseEncoding([]string{value}, identityOnly, size)
		if !ok {
			if enc != "" {
				t.Fatalf("no answer, yet %q", enc)
			}
			if acceptable(value, "identity") || (!identityOnly && acceptable(value, "gzip")) {
				t.Fatalf("%q accepts a coding, yet no answer", value)
			}
			return
		}
		switch {
		case enc != "gzip" && enc != "identity":
			t.Fatalf("answer %q", enc)
		case identityOnly && enc != "identity":
			t.Fatalf("%q for a request that needs identity", enc)
		case !acceptable(value, enc):
			t.Fatalf("%q answers %q, which it refused", value, enc)
		}
	})
}

// acceptable reports whether an Accept-Encoding value lets the coding
// through, read independently of chooseEncoding: its own entry (x-gzip
// stands for gzip) or else "*" decides, a malformed q counts as 1, and
// identity is acceptable unless refused.
func acceptable(value, coding string) bool {
	own, star := -1.0, -1.0
	for item := range strings.SplitSeq(value, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(item), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, found := strings.Cut(strings.TrimSpace(p), "=")
			if found && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
				break
			}
		}
		switch {
		case name == coding, coding == "gzip" && name == "x-gzip" && own < 0:
			own = q
		case name == "*":
			star = q
		}
	}
	switch {
	case own >= 0:
		return own > 0
	case star >= 0:
		return star > 0
	default:
		return coding == "identity"
	}
}

// FuzzUploadOctetStream posts arbitrary raw bodies, gzipped or claimed to
// be, to a temp file. Invariants: only 200 or 400; a 200 wrote exactly the
// decoded body; a 400 is E2B's JSON error.
func FuzzUploadOctetStream(f *testing.F) {
	h := fuzzHandler(f, "")
	dst := filepath.Join(f.TempDir(), "out")
	target := "/files?" + url.Values{"path": {dst}}.Encode()
	f.Add([]byte("hello"), false, false, "application/octet-stream")
	f.Add([]byte("hello"), true, true, "application/octet-stream; charset=binary")
	f.Add([]byte("\x1f\x8b\x08\x00broken"), true, false, "Application/Octet-Stream")
	f.Add([]byte{}, true, true, "application/octet-stream")
	f.Add(bytes.Repeat([]byte("z"), 1<<16), true, true, "application/octet-stream")
	f.Fuzz(func(t *testing.T, body []byte, claimGzip, compress bool, ctype string) {
		os.Remove(dst)
		sent := body
		if compress {
			sent = gzipped(t, string(body)).Bytes()
		}
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(sent))
		req.Header.Set("Content-Type", ctype)
		if claimGzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusBadRequest:
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("400 body %q", rec.Body)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		want := sent
		if claimGzip {
			zr, err := gzip.NewReader(bytes.NewReader(sent))
			if err != nil {
				t.Fatalf("accepted a body that is no gzip: %v", err)
			}
			if want, err = io.ReadAll(zr); err != nil {
				t.Fatalf("accepted a broken gzip body: %v", err)
			}
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("wrote %d bytes, want %d", len(got), len(want))
		}
	})
}
