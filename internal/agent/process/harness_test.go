package process

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/rpctimeout"
	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/proto/process"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// variant is one way a client reaches the agent: the JS SDK uses JSON, the
// Python SDK binary protobuf, each over HTTP/1.1 or h2c.
type variant struct {
	name string
	h2c  bool
	json bool
}

var variants = []variant{
	{"http1-json", false, true},
	{"http1-proto", false, false},
	{"h2c-json", true, true},
	{"h2c-proto", true, false},
}

type harness struct {
	svc    *Service
	st     *state.State
	client processconnect.ProcessClient
	url    string
	http2  atomic.Int32 // requests the server saw over HTTP/2
}

// newHarness serves a fresh Service; JSON over HTTP/1.1 unless v says more.
func newHarness(t testing.TB, v ...variant) *harness {
	t.Helper()
	vr := variants[0]
	if len(v) > 0 {
		vr = v[0]
	}
	h := &harness{st: state.New()}
	h.st.SetDefaultUser(currentUser(t))
	h.svc = New(h.st, slog.New(slog.DiscardHandler))
	path, handler := processconnect.NewProcessHandler(h.svc)
	handler = rpctimeout.Unbounded(handler)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h.http2.Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	client := &http.Client{}
	if vr.h2c {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		client.Transport = tr
		t.Cleanup(tr.CloseIdleConnections)
	}
	srv.Start()
	var opts []connect.ClientOption
	if vr.json {
		opts = append(opts, connect.WithProtoJSON())
	}
	h.url = srv.URL
	h.client = processconnect.NewProcessClient(client, srv.URL, opts...)
	t.Cleanup(srv.Close)
	t.Cleanup(h.svc.Close) // runs first: ends the streams srv.Close waits for
	return h
}

func currentUser(t testing.TB) string {
	t.Helper()
	if os.Geteuid() == 0 {
		return "root"
	}
	name := os.Getenv("USER")
	if name == "" {
		t.Skip("running as non-root without $USER: cannot name the user to run processes as")
	}
	return name
}

func bash(script string) *process.StartRequest {
	return &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", script}},
		Stdin:   new(false),
	}
}

func basicAuth(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// result is what a client saw on a process stream.
type result struct {
	pid        uint32
	stdout     string
	stderr     string
	pty        string
	chunks     []int // sizes of data events
	keepalives int
	end        *process.ProcessEvent_EndEvent
	err        error
}

type eventMsg interface {
	GetEvent() *process.ProcessEvent
}

// collect reads a stream to its end, insisting that start comes first and
// end comes last.
func collect[T any, P interface {
	*T
	eventMsg
}](t *testing.T, s *connect.ServerStreamForClient[T]) result {
	t.Helper()
	return collectFrom[T, P](t, s, true)
}

// rest is collect for a stream whose start event was already read.
func rest[T any, P interface {
	*T
	eventMsg
}](t *testing.T, s *connect.ServerStreamForClient[T]) result {
	t.Helper()
	return collectFrom[T, P](t, s, false)
}

func collectFrom[T any, P interface {
	*T
	eventMsg
}](t *testing.T, s *connect.ServerStreamForClient[T], first bool) result {
	t.Helper()
	var r result
	for s.Receive() {
		ev := P(s.Msg()).GetEvent()
		if first != (ev.GetStart() != nil) {
			t.Fatalf("start must be exactly the first event, got %v (first=%v)", ev, first)
		}
		if r.end != nil {
			t.Fatalf("event after end: %v", ev)
		}
		first = false
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			r.pid = e.Start.GetPid()
		case *process.ProcessEvent_Data:
			r.stdout += string(e.Data.GetStdout())
			r.stderr += string(e.Data.GetStderr())
			r.pty += string(e.Data.GetPty())
			r.chunks = append(r.chunks, len(e.Data.GetStdout())+len(e.Data.GetStderr())+len(e.Data.GetPty()))
		case *process.ProcessEvent_Keepalive:
			r.keepalives++
		case *process.ProcessEvent_End:
			r.end = e.End
		default:
			t.Fatalf("unexpected event %v", ev)
		}
	}
	r.err = s.Err()
	_ = s.Close()
	return r
}

// run starts req and collects its whole stream, failing the test on an RPC
// error.
func (h *harness) run(t *testing.T, req *process.StartRequest, header ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r := collect(t, h.start(t, ctx, req, header...))
	if r.err != nil {
		t.Fatalf("Start %v: %v", req.GetProcess(), r.err)
	}
	if r.end == nil {
		t.Fatalf("Start %v: stream closed without an end event", req.GetProcess())
	}
	return r
}

// start opens a Start stream; header holds name/value pairs.
func (h *harness) start(t *testing.T, ctx context.Context, req *process.StartRequest, header ...string) *connect.ServerStreamForClient[process.StartResponse] {
	t.Helper()
	creq := connect.NewRequest(req)
	for i := 0; i+1 < len(header); i += 2 {
		creq.Header().Set(header[i], header[i+1])
	}
	s, err := h.client.Start(ctx, creq)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// started opens a Start stream and reads its start event.
func (h *harness) started(t *testing.T, ctx context.Context, req *process.StartRequest, header ...string) (*connect.ServerStreamForClient[process.StartResponse], uint32) {
	t.Helper()
	s := h.start(t, ctx, req, header...)
	if !s.Receive() {
		t.Fatalf("no start event: %v", s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		t.Fatalf("first event is not start{pid}: %v", s.Msg())
	}
	return s, pid
}

// wantCode fails unless err is a Connect error with code and a message
// containing msg.
func wantCode(t *testing.T, err error, code connect.Code, msg string) {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got error %v, want a Connect error %v %q", err, code, msg)
	}
	if cerr.Code() != code || !strings.Contains(cerr.Message(), msg) {
		t.Fatalf("got %v %q, want %v containing %q", cerr.Code(), cerr.Message(), code, msg)
	}
}

func pidSel(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func tagSel(tag string) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attached counts the streams following pid; tests use it to know the
// agent has noticed a client leaving.
func (h *harness) attached(pid uint32) int {
	h.svc.mu.Lock()
	p := h.svc.procs[pid]
	h.svc.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subs)
}
