package api

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestBulkMetricsLimit: GET /sandboxes/metrics takes at most 100 IDs, as
// E2B's spec says.
func TestBulkMetricsLimit(t *testing.T) {
	a := newAPI(t)
	ids := func(n int) string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("i%d", i))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name, query string
		status      int
		body        string
	}{
		{"none", "", 200, "{\"sandboxes\":{}}\n"},
		{"100", "?sandbox_ids=" + ids(100), 200, "{\"sandboxes\":{}}\n"},
		{"101", "?sandbox_ids=" + ids(101), 400, "{\"code\":400,\"message\":\"at most 100 sandbox IDs\"}\n"},
		{"101 over two parameters", "?sandbox_ids=" + ids(51) + "&sandbox_ids=" + ids(50), 400, "{\"code\":400,\"message\":\"at most 100 sandbox IDs\"}\n"},
		{"invalid ID", "?sandbox_ids=a,B", 400, "{\"code\":400,\"message\":\"Invalid sandbox ID\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(t, "GET", "/sandboxes/metrics"+tc.query, nil)
			if r.status != tc.status || string(r.body) != tc.body {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.body)
			}
		})
	}
}

// TestMetricsRange: start and end are Unix seconds the store can hold
// as nanoseconds (up to 2262), with start <= end.
func TestMetricsRange(t *testing.T) {
	a := newAPI(t)
	p := "/sandboxes/" + a.create(t, nil)["sandboxID"].(string) + "/metrics"
	now := strconv.FormatInt(time.Now().Unix(), 10)
	for _, tc := range []struct {
		name, query string
		status      int
		message     string
	}{
		{"none", "", 200, ""},
		{"start 0", "?start=0", 200, ""},
		{"start = end", "?start=" + now + "&end=" + now, 200, ""},
		{"largest", "?start=9223372036&end=9223372036", 200, ""},
		{"start past 2262", "?start=9300000000", 400, "invalid start '9300000000': must be a Unix time in seconds from 0 to 9223372036"},
		{"end past 2262", "?end=99999999999999999", 400, "invalid end '99999999999999999': must be a Unix time in seconds from 0 to 9223372036"},
		{"one past the largest", "?end=9223372037", 400, "invalid end '9223372037'"},
		{"negative", "?start=-1", 400, "invalid start '-1'"},
		{"beyond int64", "?start=99999999999999999999", 400, "invalid start '99999999999999999999'"},
		{"not a number", "?end=soon", 400, "invalid end 'soon'"},
		{"start after end", "?start=200&end=100", 400, "start (200) is after end (100)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAnswer(t, tc.name, a.do(t, "GET", p+tc.query, nil), tc.status, tc.message)
		})
	}
}

// TestLogsV2Parameters: level is a minimum, search a substring, cursor a
// Unix time in milliseconds; limit counts the entries that pass the
// filters.
func TestLogsV2Parameters(t *testing.T) {
	a := newAPI(t)
	id := a.create(t, nil)["sandboxID"].(string)
	var container string
	for _, c := range a.rt.Containers() {
		if c.SandboxID == id {
			container = c.ID
		}
	}
	base := time.Now().Add(time.Second).Truncate(time.Millisecond)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	a.rt.WriteLog(container,
		sandbox.LogLine{Time: at(1), Text: `{"level":"DEBUG","msg":"debug one"}`},
		sandbox.LogLine{Time: at(2), Text: `{"level":"INFO","msg":"info two"}`},
		sandbox.LogLine{Time: at(3), Text: `{"level":"WARN","msg":"warn three"}`},
		sandbox.LogLine{Time: at(4), Text: `{"level":"ERROR","msg":"error four"}`},
		sandbox.LogLine{Time: at(5), Text: `{"level":"INFO","msg":"info five"}`},
	)
	ms := func(s int) string { return strconv.FormatInt(at(s).UnixMilli(), 10) }
	p := "/v2/sandboxes/" + id + "/logs"
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"level debug", "?level=debug&cursor=" + ms(1), []string{"debug one", "info two", "warn three", "error four", "info five"}},
		{"level info", "?level=info&cursor=" + ms(1), []string{"info two", "warn three", "error four", "info five"}},
		{"level error", "?level=error", []string{"error four"}},
		{"search", "?search=+t", []string{"info two", "warn three"}},
		{"search nothing", "?search=nothing+like+it", []string{}},
		{"search and level", "?search=f&level=warn", []string{"error four"}},
		{"cursor forward", "?cursor=" + ms(3), []string{"warn three", "error four", "info five"}},
		{"cursor backward", "?cursor=" + ms(2) + "&direction=backward", []string{"info two", "debug one", "sandbox created"}},
		{"cursor in the future", "?cursor=" + ms(60), []string{}},
		{"limit after filters", "?level=warn&limit=1", []string{"warn three"}},
		{"limit 0", "?limit=0", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.do(t, "GET", p+tc.query, nil)
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			var out struct{ Logs []struct{ Message string } }
			r.decode(t, &out)
			got := []string{}
			for _, e := range out.Logs {
				got = append(got, e.Message)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, q := range []string{"?level=fatal", "?level=INFO", "?cursor=soon", "?cursor=-1", "?cursor=9223372036855", "?limit=1001", "?direction=sideways"} {
		wantError(t, "logs"+q, a.do(t, "GET", p+q, nil), 400)
	}
	wantError(t, "logs of an unknown sandbox", a.do(t, "GET", "/v2/sandboxes/nosuch/logs?level=info", nil), 404)
}

// TestMalformedQuery: a query the server cannot decode is refused, never
// read as if the broken parameter were absent (a list filter that would
// silently match everything).
func TestMalformedQuery(t *testing.T) {
	a := newAPI(t)
	a.create(t, nil)
	for _, tc := range []struct{ name, path, message string }{
		{"v2 list metadata", "/v2/sandboxes?metadata=%zz", "invalid query string: invalid URL escape"},
		{"v1 list metadata", "/sandboxes?metadata=%zz", "invalid query string: invalid URL escape"},
		{"semicolon", "/v2/sandboxes?state=running;x=1", "invalid query string"},
		{"snapshots", "/snapshots?limit=%", "invalid query string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAnswer(t, tc.name, a.do(t, "GET", tc.path, nil), 400, tc.message)
		})
	}
	if r := a.do(t, "GET", "/v2/sandboxes?metadata=a%3Db", nil); r.status != 200 {
		t.Fatalf("a good metadata filter: %d %s", r.status, r.body)
	}
}
