package httpedge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestKindStatusRoundTrip: a client reading an answer gets back the kind
// the server answered with, for every kind.
func TestKindStatusRoundTrip(t *testing.T) {
	for kind := sandbox.KindInternal; kind <= sandbox.KindLimited; kind++ {
		status := Status(sandbox.Errorf(kind, "x"))
		if got := KindOf(status); got != kind {
			t.Errorf("kind %d → status %d → kind %d", kind, status, got)
		}
	}
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"not found", sandbox.Errorf(sandbox.KindNotFound, "x"), 404},
		{"wrapped", fmt.Errorf("up: %w", sandbox.Errorf(sandbox.KindConflict, "x")), 409},
		{"invalid", sandbox.Errorf(sandbox.KindInvalid, "x"), 400},
		{"unauthenticated", sandbox.Errorf(sandbox.KindUnauthenticated, "x"), 401},
		{"forbidden", sandbox.Errorf(sandbox.KindForbidden, "x"), 403},
		{"unavailable", sandbox.Errorf(sandbox.KindUnavailable, "x"), 503},
		{"plain error", errors.New("boom"), 500},
		{"body too large", sandbox.Wrap(sandbox.KindInvalid, &http.MaxBytesError{Limit: 1}, "x"), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Status(tc.err); got != tc.want {
				t.Errorf("Status = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestKindOfUnknownStatus(t *testing.T) {
	for _, status := range []int{418, 502, 504} {
		if got := KindOf(status); got != sandbox.KindInternal {
			t.Errorf("KindOf(%d) = %d, want internal", status, got)
		}
	}
}

// TestWriteError: the body is {code, message} with the status as code,
// and an internal error's detail stays out.
func TestWriteError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Body
	}{
		{"kind", sandbox.Errorf(sandbox.KindNotFound, "sandbox x not found"), Body{Code: 404, Message: "sandbox x not found"}},
		{"plain", errors.New("secret detail"), Body{Code: 500, Message: "internal error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, tc.err)
			var got Body
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.want.Code || got != tc.want || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("answer %d %s %q, want %d %+v", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.want.Code, tc.want)
			}
		})
	}
}

type keyStore map[string]sandbox.APIKey

func (s keyStore) APIKeyByHash(_ context.Context, hash string) (sandbox.APIKey, error) {
	if k, ok := s[hash]; ok {
		return k, nil
	}
	if _, broken := s["broken"]; broken {
		return sandbox.APIKey{}, errors.New("database is locked")
	}
	return sandbox.APIKey{}, sandbox.Errorf(sandbox.KindNotFound, "no such key")
}

func TestKeysTeam(t *testing.T) {
	stored, extra, unknown := sandbox.NewAPIKey(), sandbox.NewAPIKey(), sandbox.NewAPIKey()
	keys := NewKeys(keyStore{sandbox.HashAPIKey(stored): {TeamID: "team-a"}}, []string{extra})
	broken := NewKeys(keyStore{"broken": {}}, nil)
	for _, tc := range []struct {
		name     string
		keys     *Keys
		key      string
		want     string
		wantKind sandbox.Kind // of the error; KindInternal with want set = no error
	}{
		{"stored", keys, stored, "team-a", sandbox.KindInternal},
		{"extra", keys, extra, sandbox.DefaultTeamID, sandbox.KindInternal},
		{"unknown", keys, unknown, "", sandbox.KindUnauthenticated},
		{"malformed", keys, "not-a-key", "", sandbox.KindUnauthenticated},
		{"store fails", broken, unknown, "", sandbox.KindInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			team, err := tc.keys.Team(t.Context(), tc.key)
			if team != tc.want || (err == nil) != (tc.want != "") || sandbox.KindOf(err) != tc.wantKind {
				t.Errorf("Team = %q, %v (kind %d); want %q, kind %d", team, err, sandbox.KindOf(err), tc.want, tc.wantKind)
			}
		})
	}
}

func TestReader(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name string
		rd   Reader
		body string
		want Body // zero = no error
	}{
		{"unknown field ignored", Reader{Limit: 1 << 10}, `{"name":"a","x":1}`, Body{}},
		{"unknown field refused when strict", Reader{Limit: 1 << 10, Strict: true}, `{"name":"a","x":1}`,
			Body{Code: 400, Message: `invalid request body: unknown field "x"`}},
		{"over the limit in KiB", Reader{Limit: 64 << 10}, `{"name":"` + strings.Repeat("a", 64<<10) + `"}`,
			Body{Code: 413, Message: "request body is larger than the limit of 65536 bytes (64 KiB)"}},
		{"over a limit of bytes", Reader{Limit: 10}, `{"name":"abcdefghijk"}`,
			Body{Code: 413, Message: "request body is larger than the limit of 10 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
			var got Body
			if err := tc.rd.Decode(r, new(body)); err != nil {
				got = ErrorOf(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWriteErrorRetryAfter: an error that says when to retry is
// answered with Retry-After in whole seconds, at least 1; others without.
func TestWriteErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		header string
	}{
		{"quota", sandbox.Limited("team 'x' has 2 of 2 sandboxes running", 1500*time.Millisecond), http.StatusTooManyRequests, "2"},
		{"under a second", sandbox.Limited("rate", 200*time.Millisecond), http.StatusTooManyRequests, "1"},
		{"busy", sandbox.Busy("full", 5*time.Second), http.StatusServiceUnavailable, "5"},
		{"plain", sandbox.Errorf(sandbox.KindUnavailable, "x"), http.StatusServiceUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteError(w, fmt.Errorf("wrapped: %w", tc.err))
			var body Body
			json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tc.status || body.Code != tc.status || w.Header().Get("Retry-After") != tc.header {
				t.Errorf("status %d, body %+v, Retry-After %q; want %d, %q", w.Code, body, w.Header().Get("Retry-After"), tc.status, tc.header)
			}
		})
	}
}
