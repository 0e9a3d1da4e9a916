package api

import (
	"github.com/warrenhq/warren/internal/httpedge"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// errorBody is what a client sees of an error.
type errorBody struct {
	Code    int
	Message string
}

// decodeInto decodes body with decode (or decodeRequired when required)
// into v and returns what the client would see.
func decodeInto(body string, v any, required bool) errorBody {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	err := decode(r, v)
	if required {
		r = httptest.NewRequest("POST", "/", strings.NewReader(body))
		err = decodeRequired(r, v, `{"timeout": 60}`)
	}
	if err == nil {
		return errorBody{}
	}
	return errorBody(httpedge.ErrorOf(err))
}

func TestDecodeMessages(t *testing.T) {
	type timeoutBody struct {
		Timeout *int64 `json:"timeout"`
	}
	type forkBody struct {
		Count *int `json:"count"`
	}
	huge := `{"templateID":"` + strings.Repeat("a", maxBody) + `"}`
	for _, tc := range []struct {
		name, body string
		into       func() any
		required   bool
		want       errorBody // zero = no error
	}{
		{"valid", `{"timeout":60}`, func() any { return new(timeoutBody) }, false, errorBody{}},
		{"whitespace after the value", "{\"timeout\":60} \r\n\t", func() any { return new(timeoutBody) }, false, errorBody{}},
		{"unknown fields ignored", `{"timeout":60,"bogus":{"x":[1]}}`, func() any { return new(timeoutBody) }, false, errorBody{}},
		{"empty optional", "", func() any { return new(timeoutBody) }, false, errorBody{}},
		{"whitespace optional", " \n", func() any { return new(timeoutBody) }, false, errorBody{}},
		{"trailing word", `{"timeout":60} trailing`, func() any { return new(timeoutBody) }, false,
			errorBody{400, "invalid request body: unexpected data after the JSON value at offset 15"}},
		{"second value", `{"templateID":"base"}{"x":1}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, "invalid request body: unexpected data after the JSON value at offset 21"}},
		{"string for a number", `{"timeout":"60"}`, func() any { return new(timeoutBody) }, false,
			errorBody{400, `invalid request body: "timeout" must be a number`}},
		{"fraction for an integer", `{"timeout":1.5}`, func() any { return new(timeoutBody) }, false,
			errorBody{400, `invalid request body: "timeout" must be an integer`}},
		{"integer too large", `{"count":99999999999999999999}`, func() any { return new(forkBody) }, false,
			errorBody{400, `invalid request body: "count" is out of range`}},
		{"exponent too large", `{"timeout":1e30}`, func() any { return new(timeoutBody) }, false,
			errorBody{400, `invalid request body: "timeout" is out of range`}},
		{"array for the body", `[1,2]`, func() any { return new(timeoutBody) }, false,
			errorBody{400, "invalid request body: expected a JSON object"}},
		{"number for the body", `5`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, "invalid request body: expected a JSON object"}},
		{"metadata value", `{"metadata":{"a":1}}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "metadata.a" must be a string`}},
		{"metadata not an object", `{"metadata":["a"]}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "metadata" must be an object`}},
		{"port in an array", `{"network":{"httpsPorts":[443,"x"]}}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "network.httpsPorts[1]" must be a number`}},
		{"deep header", `{"network":{"rules":{"api":[{"transform":{"headers":{"k":5}}}]}}}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "network.rules.api[0].transform.headers.k" must be a string`}},
		{"bool", `{"templateID":"base","autoPause":"yes"}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "autoPause" must be a boolean`}},
		{"object for a string", `{"templateID":{}}`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, `invalid request body: "templateID" must be a string`}},
		{"syntax", `{"timeout":x}`, func() any { return new(timeoutBody) }, false,
			errorBody{400, "invalid request body: malformed JSON at offset 11: invalid character 'x' looking for beginning of value"}},
		{"truncated", `{"templateID":`, func() any { return new(newSandboxJSON) }, false,
			errorBody{400, "invalid request body: malformed JSON: the body ends at offset 14, in the middle of a value"}},
		{"empty required", "", func() any { return new(timeoutBody) }, true,
			errorBody{400, `invalid request body: the body is empty; send a JSON object such as {"timeout": 60}`}},
		{"too large", huge, func() any { return new(newSandboxJSON) }, false,
			errorBody{413, "request body is larger than the limit of 1048576 bytes (1 MiB)"}},
		{"too large after the value", `{}` + strings.Repeat(" ", maxBody), func() any { return new(newSandboxJSON) }, false,
			errorBody{413, "request body is larger than the limit of 1048576 bytes (1 MiB)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeInto(tc.body, tc.into(), tc.required); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTrailingDataChangesNothing: a body with data after its JSON value
// is refused before anything happens.
func TestTrailingDataChangesNothing(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)
	endAt := func() string {
		var d map[string]any
		a.do(t, "GET", "/sandboxes/"+id, nil).decode(t, &d)
		return d["endAt"].(string)
	}
	count := func() int {
		var list []any
		a.do(t, "GET", "/v2/sandboxes", nil).decode(t, &list)
		return len(list)
	}
	before, n := endAt(), count()
	time.Sleep(1100 * time.Millisecond) // so that a new end time would differ in RFC 3339
	for _, tc := range []struct{ name, method, path, body string }{
		{"timeout", "POST", "/sandboxes/" + id + "/timeout", `{"timeout":60} trailing`},
		{"create", "POST", "/v2/sandboxes", `{"templateID":"base"}{"x":1}`},
		{"create v1", "POST", "/sandboxes", `{"templateID":"base"},`},
		{"connect", "POST", "/sandboxes/" + id + "/connect", `{"timeout":3000}]`},
		{"refresh", "POST", "/sandboxes/" + id + "/refreshes", `{"duration":3000} {}`},
	} {
		r := a.do(t, tc.method, tc.path, tc.body)
		wantError(t, tc.name, r, http.StatusBadRequest)
		if !strings.Contains(string(r.body), "unexpected data after the JSON value") {
			t.Errorf("%s: %s", tc.name, r.body)
		}
	}
	if after := endAt(); after != before {
		t.Errorf("end time changed from %s to %s", before, after)
	}
	if after := count(); after != n {
		t.Errorf("%d sandboxes after the refused creates, want %d", after, n)
	}
}

// TestBodyErrorsOverHTTP checks what the client sees end to end, and that
// no message names Go.
func TestBodyErrorsOverHTTP(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, nil)["sandboxID"].(string)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		message                  string
	}{
		{"timeout as a string", "POST", "/sandboxes/" + id + "/timeout", `{"timeout":"60"}`, 400, `invalid request body: "timeout" must be a number`},
		{"timeout body an array", "POST", "/sandboxes/" + id + "/timeout", `[1,2]`, 400, "invalid request body: expected a JSON object"},
		{"metadata value a number", "POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"a":1}}`, 400, `invalid request body: "metadata.a" must be a string`},
		{"timeout without a body", "POST", "/sandboxes/" + id + "/timeout", ``, 400, `invalid request body: the body is empty; send a JSON object such as {"timeout": 60}`},
		{"v1 connect without a body", "POST", "/sandboxes/" + id + "/connect", ``, 400, `invalid request body: the body is empty; send a JSON object such as {"timeout": 300}`},
		{"v1 create without a body", "POST", "/sandboxes", ``, 400, `invalid request body: the body is empty; send a JSON object such as {"templateID": "base"}`},
		{"body too large", "POST", "/v2/sandboxes", `{"templateID":"` + strings.Repeat("a", maxBody) + `"}`, 413, "request body is larger than the limit of 1048576 bytes (1 MiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(t, tc.method, tc.path, tc.body)
			wantError(t, tc.name, r, tc.status)
			var e errorBody
			r.decode(t, &e)
			if e.Message != tc.message {
				t.Errorf("message %q, want %q", e.Message, tc.message)
			}
		})
	}
}
