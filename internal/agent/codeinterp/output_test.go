package codeinterp

import (
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStreamKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := httptest.NewRecorder()
		s := newStream(rec, 5*time.Second)
		time.Sleep(4 * time.Second)
		s.Emit(stdoutLine("a", ""))
		time.Sleep(4 * time.Second) // 4 s since the last line: no keepalive yet
		synctest.Wait()
		s.mu.Lock() // the keepalive goroutine writes under it
		body := rec.Body.String()
		s.mu.Unlock()
		if strings.Contains(body, "keepalive") {
			t.Fatalf("keepalive after less than 5 s of silence: %q", body)
		}
		time.Sleep(1*time.Second + time.Millisecond)
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		s.Close()
		want := []string{
			`{"type":"stdout","text":"a"}`,
			`{"type":"keepalive"}`,
			`{"type":"keepalive"}`,
			`{"type":"end_of_execution"}`,
		}
		if diff := cmp.Diff(want, lines(rec.Body.String())); diff != "" {
			t.Errorf("stream (-want +got):\n%s", diff)
		}
	})
}

func TestResultLine(t *testing.T) {
	got := resultLine(map[string]any{
		"text/plain":           "'quoted'",
		"text/html":            []any{"<b>", "x</b>"},
		"image/png":            "iVBOR\n",
		"application/json":     map[string]any{"k": 1.0},
		"e2b/data":             map[string]any{"a": []any{1.0}},
		"application/x-custom": "v",
	}, false)
	want := Output{Type: typeResult, Text: "quoted", Result: &Result{
		HTML: "<b>x</b>", PNG: "iVBOR", JSON: map[string]any{"k": 1.0},
		Data: map[string]any{"a": []any{1.0}}, Extra: map[string]any{"application/x-custom": "v"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestMarkerReader(t *testing.T) {
	const marker = "\x1eEND"
	tests := []struct {
		name   string
		chunks []string
		text   string
		rest   []string
	}{
		{"whole", []string{"hi\n\x1eEND 0\n"}, "hi\n", []string{" 0"}},
		{"split marker", []string{"hi\x1eE", "ND 1", "\n"}, "hi", []string{" 1"}},
		{"no marker", []string{"a\x1eEx"}, "a\x1eEx", nil},
		{"split rune", []string{"\xc3", "\xa9\x1eEND\n"}, "é", []string{""}},
		{"two in one read", []string{"a\x1eEND 1\nb\x1eEND 2\n"}, "ab", []string{" 1", " 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &markerReader{marker: []byte(marker)}
			var text string
			var rests []string
			for _, c := range tt.chunks {
				for p := []byte(c); ; p = nil {
					out, rest, found := m.feed(p)
					text += string(out)
					if !found {
						break
					}
					rests = append(rests, rest)
				}
			}
			if text != tt.text || !cmp.Equal(rests, tt.rest) {
				t.Errorf("text %q rests %q; want %q %q", text, rests, tt.text, tt.rest)
			}
		})
	}
}
