package codeinterp

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Output line types of the /execute stream (E2B protocol D.2).
const (
	typeStdout     = "stdout"
	typeStderr     = "stderr"
	typeResult     = "result"
	typeError      = "error"
	typeCount      = "number_of_executions"
	typeKeepalive  = "keepalive"
	typeEndOfExecu = "end_of_execution"
)

// Error names the server itself reports, as E2B's server does.
const (
	errContextRestarting = "ContextRestarting"
	errUnexpectedEnd     = "UnexpectedEndOfExecution"
	errExecutionAborted  = "ExecutionAborted"
)

// Output is one NDJSON line of an execution. Which fields are set depends
// on Type; unset fields are left out of the JSON.
type Output struct {
	Type           string `json:"type"`
	Text           string `json:"text,omitempty"`      // stdout, stderr; text/plain of a result
	Timestamp      string `json:"timestamp,omitempty"` // stdout, stderr
	*Result               // result
	*ExecError            // error
	ExecutionCount *int   `json:"execution_count,omitempty"` // number_of_executions
}

// Result is a display_data or execute_result in E2B's shape: one field per
// well-known MIME type, the rest in Extra. Its text/plain goes in Output.Text.
type Result struct {
	IsMainResult bool           `json:"is_main_result"`
	HTML         string         `json:"html,omitempty"`
	Markdown     string         `json:"markdown,omitempty"`
	SVG          string         `json:"svg,omitempty"`
	PNG          string         `json:"png,omitempty"`  // base64
	JPEG         string         `json:"jpeg,omitempty"` // base64
	PDF          string         `json:"pdf,omitempty"`  // base64
	LaTeX        string         `json:"latex,omitempty"`
	JSON         any            `json:"json,omitempty"`
	JavaScript   string         `json:"javascript,omitempty"`
	Data         any            `json:"data,omitempty"`  // e2b/data
	Chart        any            `json:"chart,omitempty"` // e2b/chart
	Extra        map[string]any `json:"extra,omitempty"`
}

// ExecError is an error raised by the code, or one the server reports.
type ExecError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func stdoutLine(text, ts string) Output { return Output{Type: typeStdout, Text: text, Timestamp: ts} }
func stderrLine(text, ts string) Output { return Output{Type: typeStderr, Text: text, Timestamp: ts} }
func countLine(n int) Output            { return Output{Type: typeCount, ExecutionCount: &n} }
func errorLine(name, value, traceback string) Output {
	return Output{Type: typeError, ExecError: &ExecError{Name: name, Value: value, Traceback: traceback}}
}

// stream writes the NDJSON response of one execution: every line flushed
// as it comes, a keepalive line after each interval of silence, and
// end_of_execution last. Write errors (a client gone) end the writing but
// not the execution.
type stream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	every time.Duration

	mu     sync.Mutex
	failed bool      // guarded by mu; the client stopped reading
	last   time.Time // guarded by mu; when the last line went out

	stop chan struct{}
	wg   sync.WaitGroup
}

// newStream sends the response headers and starts the keepalive ticker.
func newStream(w http.ResponseWriter, keepalive time.Duration) *stream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w), every: keepalive, stop: make(chan struct{}), last: time.Now()}
	s.rc.Flush()
	s.wg.Go(s.keepalive)
	return s
}

// Emit writes one line. Safe for concurrent use.
func (s *stream) Emit(o Output) {
	raw, err := json.Marshal(o)
	if err != nil { // only unencodable kernel JSON; report it instead
		raw, _ = json.Marshal(errorLine("EncodingError", err.Error(), ""))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = time.Now()
	if s.failed {
		return
	}
	if _, err := s.w.Write(append(raw, '\n')); err != nil {
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}

// Close stops the keepalives and writes end_of_execution.
func (s *stream) Close() {
	close(s.stop)
	s.wg.Wait()
	s.Emit(Output{Type: typeEndOfExecu})
}

func (s *stream) keepalive() {
	t := time.NewTimer(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		idle := time.Since(s.last)
		s.mu.Unlock()
		if idle >= s.every {
			s.Emit(Output{Type: typeKeepalive})
			idle = 0
		}
		t.Reset(s.every - idle)
	}
}
