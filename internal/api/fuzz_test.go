package api

import (
	"github.com/warrenhq/warren/internal/httpedge"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bodyTargets are the request types handlers decode bodies into.
var bodyTargets = map[string]func() any{
	"create":  func() any { return new(newSandboxJSON) },
	"network": func() any { return new(networkJSON) },
	"timeout": func() any { return new(struct{ Timeout *int64 }) },
	"fork": func() any {
		return new(struct {
			Timeout *int64 `json:"timeout"`
			Count   *int   `json:"count"`
		})
	},
	"build": func() any { return new(buildRequestJSON) },
	"tags": func() any {
		return new(struct {
			Target string   `json:"target"`
			Tags   []string `json:"tags"`
		})
	},
}

// FuzzDecode: whatever the body, decoding never panics, and a refused
// body is a 400 or 413 whose message speaks JSON, not Go.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"templateID":"base","timeout":60,"metadata":{"a":"b"},"network":{"httpsPorts":[443],"rules":{"x":[{"transform":{"headers":{"k":"v"}}}]}}}`,
		`{"timeout":"60"}`, `[1,2]`, `{"metadata":{"a":1}}`, `{"timeout":60} trailing`, `{"a":1}{"b":2}`,
		`{"network":{"httpsPorts":[1,"x"]}}`, `{"timeout":1e400}`, `{"count":-1.5}`, `{"tags":[1]}`, `"x"`, `null`, ``, `{`, "\xff",
		`{"a":[[[[[[[[[[{"b":[1,2,{"c":null}]}]]]]]]]]]]}`, `{"metadata":{"\u00e9":{}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for name, target := range bodyTargets {
			r := httptest.NewRequest("POST", "/", strings.NewReader(body))
			err := decode(r, target())
			if err == nil {
				continue
			}
			e := httpedge.ErrorOf(err)
			if e.Code != http.StatusBadRequest && e.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: %q: status %d (%s)", name, body, e.Code, e.Message)
			}
			if e.Message == "" || strings.Contains(e.Message, "Go ") || strings.Contains(e.Message, "struct") || strings.Contains(e.Message, "unmarshal") {
				t.Errorf("%s: %q: message %q", name, body, e.Message)
			}
		}
	})
}

// FuzzBodyOverHTTP sends any body to endpoints that decode one: the
// answer is never a 5xx, and an error always has E2B's shape.
func FuzzBodyOverHTTP(f *testing.F) {
	f.Add(`{"timeout":60}`)
	f.Add(`{"timeout":60} x`)
	f.Add(`{"allowOut":["10.0.0.0/8"],"egressProxy":{"address":"p:1"}}`)
	f.Add(`{"memory":false}`)
	a := newAPI(f)
	id := a.create(f, nil)["sandboxID"].(string)
	h := a.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		for _, ep := range []struct{ method, path string }{
			{"POST", "/sandboxes/" + id + "/timeout"},
			{"PUT", "/sandboxes/" + id + "/network"},
			{"POST", "/v2/sandboxes/" + id + "/connect"},
			{"POST", "/sandboxes/nosuch/pause"},
			{"POST", "/sandboxes/nosuch/fork"},
		} {
			req := httptest.NewRequest(ep.method, ep.path, strings.NewReader(body))
			req.Header.Set("X-API-Key", a.key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code >= 500 {
				t.Fatalf("%s %s %q: %d %s", ep.method, ep.path, body, w.Code, w.Body)
			}
			if w.Code >= 400 && !strings.HasPrefix(w.Body.String(), `{"code":`+strconv.Itoa(w.Code)+`,"message":"`) {
				t.Errorf("%s %s %q: body %s", ep.method, ep.path, body, w.Body)
			}
		}
	})
}

// FuzzListNextToken: any nextToken is a page or a 400, never a panic or
// a 5xx, on every paged list.
func FuzzListNextToken(f *testing.F) {
	a := newAPI(f)
	for range 3 {
		a.create(f, nil)
	}
	a.do(f, "POST", "/sandboxes/"+a.create(f, nil)["sandboxID"].(string)+"/snapshots", map[string]any{})
	r := a.do(f, "GET", "/v2/sandboxes?limit=1", nil)
	f.Add(r.header.Get("X-Next-Token"))
	f.Add("!!")
	f.Add("MTIzLmFi") // "123.ab"
	f.Add("LTEuYQ")   // "-1.a"
	f.Add("OTk5OTk5") // no '.'
	f.Add("Lg")       // "."
	f.Add("MS4")      // "1."
	h := a.srv.Config.Handler
	f.Fuzz(func(t *testing.T, token string) {
		for _, path := range []string{"/v2/sandboxes?limit=1&nextToken=", "/snapshots?limit=1&nextToken="} {
			req := httptest.NewRequest("GET", path+url.QueryEscape(token), nil)
			req.Header.Set("X-API-Key", a.key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
				t.Fatalf("%s%q: %d %s", path, token, w.Code, w.Body)
			}
		}
	})
}

// FuzzIntParam: a parsed value is always within bounds, and every
// in-range decimal parses to itself.
func FuzzIntParam(f *testing.F) {
	for _, s := range []string{"", "0", "100", "101", "-1", "+5", "1e3", " 1", "99999999999999999999"} {
		f.Add(s, 1, 100)
	}
	f.Fuzz(func(t *testing.T, v string, lo, hi int) {
		n, err := intParam(v, lo, lo, hi, "limit")
		if err != nil {
			if httpedge.ErrorOf(err).Code != http.StatusBadRequest {
				t.Errorf("%q: %v is not a 400", v, err)
			}
			return
		}
		if v != "" && (n < lo || n > hi) {
			t.Errorf("intParam(%q, [%d, %d]) = %d, out of bounds", v, lo, hi, n)
		}
		if m, err := strconv.Atoi(v); err == nil && m != n {
			t.Errorf("intParam(%q) = %d, want %d", v, n, m)
		}
	})
}

// FuzzUnixParam: an accepted time converts to nanoseconds and back
// without overflow; a refused one is a 400.
func FuzzUnixParam(f *testing.F) {
	for _, s := range []string{"", "0", "1700000000", "9223372036", "9223372037", "9300000000", "99999999999999999", "-1", "1e9", "+1"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, v string, ms bool) {
		got, err := unixParam(v, "start", ms)
		if err != nil {
			if e := httpedge.ErrorOf(err); e.Code != http.StatusBadRequest || !strings.Contains(e.Message, "start") {
				t.Errorf("%q: %+v", v, e)
			}
			return
		}
		if v == "" {
			if !got.IsZero() {
				t.Errorf("empty: %v, want zero", got)
			}
			return
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		unit := int64(time.Second)
		if ms {
			unit = int64(time.Millisecond)
		}
		if n < 0 || n > math.MaxInt64/unit {
			t.Fatalf("unixParam(%q, ms=%v) accepted a time whose nanoseconds overflow", v, ms)
		}
		if got.UnixNano() != n*unit {
			t.Errorf("unixParam(%q, ms=%v) = %v (%d ns), want %d ns", v, ms, got, got.UnixNano(), n*unit)
		}
	})
}
