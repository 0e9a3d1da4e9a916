package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// CodeInterpreterTemplate is the template whose sandboxes serve RunCode (a Jupyter server
// behind E2B's code-interpreter API on port 49999).
const CodeInterpreterTemplate = "code-interpreter-v1"

const codeInterpreterPort = 49999

// RunCodeOptions configures RunCode. Language and Context are exclusive; with neither the
// code runs in the default Python context.
type RunCodeOptions struct {
	// Language is python (default), javascript, typescript, r, java or bash.
	Language string
	// Context runs the code in a context made by CreateCodeContext.
	Context *CodeContext
	// Envs are set for this execution only.
	Envs map[string]string
	// OnStdout and OnStderr receive output as it arrives; OnResult each result, OnError the
	// error of the code. They are called from the calling goroutine, in order.
	OnStdout, OnStderr func(OutputMessage)
	OnResult           func(Result)
	OnError            func(ExecutionError)
	// Timeout bounds the execution once it has started: 0 means DefaultCommandTimeout,
	// NoTimeout none. Config.RequestTimeout bounds the wait for it to start.
	Timeout time.Duration
}

// OutputMessage is a chunk of output of running code.
type OutputMessage struct {
	Line      string
	Timestamp time.Time
	Error     bool // from stderr
}

// Result is one result of running code: the value of its last expression (IsMainResult) or
// something it displayed, in the formats it has.
type Result struct {
	IsMainResult bool           `json:"is_main_result"`
	Text         string         `json:"text,omitempty"`
	HTML         string         `json:"html,omitempty"`
	Markdown     string         `json:"markdown,omitempty"`
	SVG          string         `json:"svg,omitempty"`
	PNG          string         `json:"png,omitempty"` // base64
	JPEG         string         `json:"jpeg,omitempty"`
	PDF          string         `json:"pdf,omitempty"`
	LaTeX        string         `json:"latex,omitempty"`
	JavaScript   string         `json:"javascript,omitempty"`
	JSON         map[string]any `json:"json,omitempty"`
	Data         map[string]any `json:"data,omitempty"`
	Chart        map[string]any `json:"chart,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// ExecutionError is an error the code raised.
type ExecutionError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func (e *ExecutionError) Error() string { return e.Name + ": " + e.Value }

// Execution is what running code produced.
type Execution struct {
	Results []Result
	Logs    struct{ Stdout, Stderr []string }
	// Error is the error the code raised, nil when it raised none.
	Error          *ExecutionError
	ExecutionCount int
}

// Text is the text of the main result, "" when there is none.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// CodeContext is an interpreter state (a kernel) of its own: variables, imports, cwd.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// CodeContextOptions configures CreateCodeContext.
type CodeContextOptions struct {
	Language string `json:"language,omitempty"` // default python
	Cwd      string `json:"cwd,omitempty"`      // default /home/user
}

// RunCode runs code in the sandbox's code interpreter (sandboxes of CodeInterpreterTemplate)
// and returns what it produced; an error the code raised is in Execution.Error, not err.
func (s *Sandbox) RunCode(ctx context.Context, code string, opts RunCodeOptions) (*Execution, error) {
	if opts.Context != nil && opts.Language != "" {
		return nil, invalidArg("You can provide context or language, but not both at the same time.")
	}
	body := map[string]any{"code": code}
	if opts.Context != nil {
		body["context_id"] = opts.Context.ID
	}
	if opts.Language != "" {
		body["language"] = opts.Language
	}
	if opts.Envs != nil {
		body["env_vars"] = opts.Envs
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultCommandTimeout
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	res, err := s.jupyter(ctx, http.MethodPost, "/execute", body, true)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	exec := &Execution{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if err := exec.add(sc.Bytes(), &opts); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if running, herr := s.envd.health(context.Background()); herr == nil && !running {
			return nil, &TimeoutError{sandboxErr(0, "The sandbox was killed while the request was in progress", err)}
		}
		return nil, transportError(ctx, err)
	}
	return exec, nil
}

// add takes one line of the interpreter's NDJSON stream into the execution.
func (e *Execution) add(line []byte, opts *RunCodeOptions) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	var msg struct {
		Type  string `json:"type"`
		Text  string `json:"text"`
		Stamp string `json:"timestamp"`
		Count int    `json:"execution_count"`
		ExecutionError
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return &SandboxError{Message: "decoding the interpreter's output: " + err.Error(), Err: err}
	}
	out := func(isErr bool, logs *[]string, cb func(OutputMessage)) {
		*logs = append(*logs, msg.Text)
		if cb != nil {
			ts, _ := time.Parse(time.RFC3339Nano, msg.Stamp)
			cb(OutputMessage{Line: msg.Text, Timestamp: ts, Error: isErr})
		}
	}
	switch msg.Type {
	case "stdout":
		out(false, &e.Logs.Stdout, opts.OnStdout)
	case "stderr":
		out(true, &e.Logs.Stderr, opts.OnStderr)
	case "result":
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			return &SandboxError{Message: "decoding a result: " + err.Error(), Err: err}
		}
		e.Results = append(e.Results, r)
		if opts.OnResult != nil {
			opts.OnResult(r)
		}
	case "error":
		ee := msg.ExecutionError
		e.Error = &ee
		if opts.OnError != nil {
			opts.OnError(ee)
		}
	case "number_of_executions":
		e.ExecutionCount = msg.Count
	}
	return nil
}

// CreateCodeContext starts a new interpreter context.
func (s *Sandbox) CreateCodeContext(ctx context.Context, opts CodeContextOptions) (*CodeContext, error) {
	var c CodeContext
	return &c, s.jupyterJSON(ctx, http.MethodPost, "/contexts", opts, &c)
}

// ListCodeContexts lists the interpreter contexts.
func (s *Sandbox) ListCodeContexts(ctx context.Context) ([]CodeContext, error) {
	var cs []CodeContext
	return cs, s.jupyterJSON(ctx, http.MethodGet, "/contexts", nil, &cs)
}

// RestartCodeContext restarts a context's kernel, dropping its state.
func (s *Sandbox) RestartCodeContext(ctx context.Context, id string) error {
	return s.jupyterJSON(ctx, http.MethodPost, "/contexts/"+url.PathEscape(id)+"/restart", nil, nil)
}

// RemoveCodeContext removes a context.
func (s *Sandbox) RemoveCodeContext(ctx context.Context, id string) error {
	return s.jupyterJSON(ctx, http.MethodDelete, "/contexts/"+url.PathEscape(id), nil, nil)
}

func (s *Sandbox) jupyterJSON(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := withTimeout(ctx, s.client.cfg.RequestTimeout)
	defer cancel()
	res, err := s.jupyter(ctx, method, path, in, false)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return &SandboxError{Message: "decoding the interpreter's answer: " + err.Error(), Err: err}
	}
	return nil
}

// jupyter sends a request to the code interpreter; the response is 2xx (its body the caller's
// to close) or an error.
func (s *Sandbox) jupyter(ctx context.Context, method, path string, in any, withToken bool) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, invalidArg("%v", err)
		}
		body = bytes.NewReader(b)
	}
	u := s.client.cfg.directURL(s.ID, s.Domain, codeInterpreterPort) + path
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("E2b-Sandbox-Id", s.ID)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(codeInterpreterPort))
	if s.TrafficAccessToken != "" {
		req.Header.Set("E2B-Traffic-Access-Token", s.TrafficAccessToken)
	}
	if withToken && s.envd.token != "" {
		req.Header.Set("X-Access-Token", s.envd.token)
	}
	res, err := s.envd.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if res.StatusCode < 300 {
		return res, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	switch res.StatusCode {
	case http.StatusBadGateway:
		return nil, &TimeoutError{sandboxErr(res.StatusCode, string(b)+": This error is likely due to sandbox timeout. You can modify the sandbox timeout by passing a timeout when creating the sandbox or calling SetTimeout on the sandbox.", nil)}
	case http.StatusNotFound:
		return nil, &NotFoundError{sandboxErr(res.StatusCode, string(b), nil)}
	}
	return nil, &SandboxError{Message: fmt.Sprintf("%d %s: %s", res.StatusCode, http.StatusText(res.StatusCode), b), StatusCode: res.StatusCode}
}
