package envdauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignatureKnownVector(t *testing.T) {
	got := Signature("hello.txt", OperationRead, "user", "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0")
	if want := "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E"; got != want {
		t.Errorf("Signature = %q, want %q", got, want)
	}
}

func TestCheck(t *testing.T) {
	const token = "tok"
	now := time.Unix(1_800_000_000, 0)
	signed := func(op string, kv ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		exp := q.Get("signature_expiration")
		if exp == "" {
			q.Set("signature", Signature(q.Get("path"), op, q.Get("username"), token))
		} else {
			n, _ := strconv.ParseInt(exp, 10, 64)
			q.Set("signature", SignatureWithExpiration(q.Get("path"), op, q.Get("username"), token, n))
		}
		return "/files?" + q.Encode()
	}
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name, method, target, header string // header: X-Access-Token
		token                        string
		want                         string // "" = let in, else the refusal
	}{
		{"no token set", "POST", "/process.Process/List", "", "", ""},
		{"token", "POST", "/process.Process/List", token, token, ""},
		{"no token", "POST", "/process.Process/List", "", token, UnauthorizedMessage},
		{"wrong token", "GET", "/envs", "tok2", token, UnauthorizedMessage},
		{"health", "GET", "/health", "", token, ""},
		{"health HEAD", "HEAD", "/health", "", token, UnauthorizedMessage},
		{"health elsewhere", "GET", "/health/", "", token, UnauthorizedMessage},
		{"OPTIONS", "OPTIONS", "/process.Process/List", "", token, UnauthorizedMessage},
		{"files read", "GET", signed("read", "path", "/a"), "", token, ""},
		{"files write", "POST", signed("write", "path", "/a", "username", "root"), "", token, ""},
		{"files read signature to write", "POST", signed("read", "path", "/a"), "", token, "invalid signature"},
		{"files HEAD needs the token", "HEAD", signed("read", "path", "/a"), "", token, UnauthorizedMessage},
		{"files other path", "GET", signed("read", "path", "/a") + "&path=/b", "", token, ""}, // the first value counts, as in the agent
		{"files unexpired", "GET", signed("read", "path", "/a", "signature_expiration", at(0)), "", token, ""},
		{"files expired", "GET", signed("read", "path", "/a", "signature_expiration", at(-time.Second)), "", token, "signature is already expired"},
		{"files unsigned", "GET", "/files?path=/a", "", token, "missing signature query parameter"},
		{"files forged", "GET", "/files?path=/a&signature=v1_x", "", token, "invalid signature"},
		{"files bad expiry", "GET", "/files?path=/a&signature=v1_x&signature_expiration=x", "", token, "invalid signature expiration 'x'"},
		{"files token", "GET", "/files?path=/a", token, token, ""},
		{"files wrong token", "GET", signed("read", "path", "/a"), "nope", token, "access token present in header but does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			if tc.header != "" {
				r.Header.Set("X-Access-Token", tc.header)
			}
			err := Check(r, tc.token, now)
			var got string
			if err != nil {
				var e Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v is no Error", err)
				}
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		want    bool
	}{
		{"preflight", "OPTIONS", map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "PUT"}, true},
		{"no origin", "OPTIONS", map[string]string{"Access-Control-Request-Method": "PUT"}, false},
		{"no method asked", "OPTIONS", map[string]string{"Origin": "https://a.example"}, false},
		{"not OPTIONS", "POST", map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "PUT"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/x", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			if got := Preflight(w, r); got != tc.want {
				t.Fatalf("Preflight = %v, want %v", got, tc.want)
			}
			if tc.want && (w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "*") {
				t.Errorf("answer %d %v", w.Code, w.Header())
			}
			if !tc.want && len(w.Header()) != 0 {
				t.Errorf("a request that is no preflight got headers %v", w.Header())
			}
		})
	}
}

// Whatever the query, Check lets a /files request without the token in
// only when its signature is the one the token gives for its own path,
// operation, user and expiry.
func FuzzCheckFiles(f *testing.F) {
	const token = "tok"
	f.Add("path=%2Fa&signature="+url.QueryEscape(Signature("/a", OperationRead, "", token)), "GET")
	f.Add("path=/a&signature=v1_x&signature_expiration=99999999999", "POST")
	f.Add("path=a&path=b&username=root&signature=&signature_expiration=+1", "GET")
	f.Add("%zz&signature=v1_", "GET")
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, rawQuery, method string) {
		op := OperationRead
		switch method {
		case http.MethodGet:
		case http.MethodPost:
			op = OperationWrite
		default:
			return
		}
		r := httptest.NewRequest(method, "/files", nil)
		r.URL.RawQuery = rawQuery
		err := Check(r, token, now)
		if err != nil {
			if _, ok := err.(Error); !ok {
				t.Fatalf("error %v is no Error", err)
			}
			return
		}
		q := r.URL.Query()
		sig := q.Get("signature")
		want := Signature(q.Get("path"), op, q.Get("username"), token)
		if raw := q.Get("signature_expiration"); raw != "" {
			exp, perr := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
			if perr != nil || now.Unix() > exp {
				t.Fatalf("let in with expiry %q at %d", raw, now.Unix())
			}
			want = SignatureWithExpiration(q.Get("path"), op, q.Get("username"), token, exp)
		}
		if sig != want {
			t.Fatalf("let in with signature %q, want %q", sig, want)
		}
	})
}
