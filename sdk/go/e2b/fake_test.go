package e2b_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/e2b"
	"github.com/warrenhq/warren/sdk/go/internal/envd/filesystem"
	"github.com/warrenhq/warren/sdk/go/internal/envd/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/sdk/go/internal/envd/process"
	"github.com/warrenhq/warren/sdk/go/internal/envd/process/processconnect"
)

const (
	testKey   = "e2b_0000000000000000000000000000000000000000"
	testToken = "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0"
)

// fake is a control plane and an agent on one httptest server, as Warren serves them when
// E2B_SANDBOX_URL points at it: every handler can be replaced by a test, every request is
// recorded.
type fake struct {
	*httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex // guards requests and bodies
	requests []*http.Request
	bodies   []string

	proc fakeProcess
	fs   fakeFS
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{mux: http.NewServeMux()}
	f.proc.f, f.fs.f = f, f
	f.mux.Handle(processconnect.NewProcessHandler(&f.proc))
	f.mux.Handle(filesystemconnect.NewFilesystemHandler(&f.fs))
	f.handleJSON("POST /v2/sandboxes", http.StatusCreated, map[string]any{
		"sandboxID": "isbx1", "templateID": "base", "clientID": "6532622b", "envdVersion": "0.6.13", "envdAccessToken": testToken,
	})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(context.Background()))
		f.bodies = append(f.bodies, string(b))
		f.mu.Unlock()
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// client is a client of the fake, configured by options only (no environment).
func (f *fake) client(opts ...e2b.Option) *e2b.Client {
	base := []e2b.Option{e2b.WithAPIKey(testKey), e2b.WithAPIURL(f.URL), e2b.WithSandboxURL(f.URL), e2b.WithDomain("test.local")}
	return e2b.NewClient(append(base, opts...)...)
}

func (f *fake) handleJSON(pattern string, status int, body any) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, status, body) })
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

// last returns the last request whose path starts with prefix, and its body.
func (f *fake) last(t *testing.T, prefix string) (*http.Request, string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if strings.HasPrefix(f.requests[i].URL.Path, prefix) {
			return f.requests[i], f.bodies[i]
		}
	}
	t.Fatalf("no request to %s", prefix)
	return nil, ""
}

func (f *fake) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r.URL.Path, prefix) {
			n++
		}
	}
	return n
}

// sandbox creates a sandbox on the fake.
func (f *fake) sandbox(t *testing.T, opts ...e2b.Option) *e2b.Sandbox {
	t.Helper()
	sbx, err := f.client(opts...).Create(context.Background(), e2b.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sbx
}

// fakeProcess runs scripted processes: start answers a StartRequest with events.
type fakeProcess struct {
	processconnect.UnimplementedProcessHandler
	f     *fake
	start func(context.Context, *connect.Request[process.StartRequest], *connect.ServerStream[process.StartResponse]) error
	input [][]byte
}

func (p *fakeProcess) Start(ctx context.Context, req *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
	return p.start(ctx, req, s)
}

func (p *fakeProcess) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	if req.Msg.GetProcess().GetPid() != 7 {
		return nil, connect.NewError(connect.CodeNotFound, nil)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (p *fakeProcess) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p.f.mu.Lock()
	p.input = append(p.input, req.Msg.GetInput().GetStdin())
	p.f.mu.Unlock()
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (p *fakeProcess) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	return connect.NewResponse(&process.ListResponse{Processes: []*process.ProcessInfo{
		{Pid: 7, Config: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "sleep 10"}}},
	}}), nil
}

func startEvent(pid uint32) *process.StartResponse {
	return &process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pid}}}}
}

func stdoutEvent(s string) *process.StartResponse {
	return &process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(s)}}}}}
}

func stderrEvent(s string) *process.StartResponse {
	return &process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: []byte(s)}}}}}
}

func endEvent(code int32, errText string) *process.StartResponse {
	end := &process.ProcessEvent_EndEvent{ExitCode: code, Exited: true, Status: "exit status"}
	if errText != "" {
		end.Error = &errText
	}
	return &process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}}
}

// fakeFS is a filesystem of one directory /home/user with one file a.txt.
type fakeFS struct {
	filesystemconnect.UnimplementedFilesystemHandler
	f *fake
}

func (fs *fakeFS) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	if req.Msg.GetPath() != "/home/user/a.txt" {
		return nil, connect.NewError(connect.CodeNotFound, errorString("path '"+req.Msg.GetPath()+"' does not exist"))
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: &filesystem.EntryInfo{Name: "a.txt", Path: "/home/user/a.txt", Type: filesystem.FileType_FILE_TYPE_FILE, Size: 3, Mode: 0o644, Permissions: "-rw-r--r--", Owner: "user", Group: "user"}}), nil
}

func (fs *fakeFS) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	if req.Msg.GetPath() == "/home/user" {
		return nil, connect.NewError(connect.CodeAlreadyExists, errorString("directory exists"))
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{}), nil
}

func (fs *fakeFS) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	return connect.NewResponse(&filesystem.ListDirResponse{Entries: []*filesystem.EntryInfo{
		{Name: "a.txt", Path: "/home/user/a.txt", Type: filesystem.FileType_FILE_TYPE_FILE},
		{Name: "dangling", Path: "/home/user/dangling", Type: filesystem.FileType_FILE_TYPE_UNSPECIFIED},
		{Name: "d", Path: "/home/user/d", Type: filesystem.FileType_FILE_TYPE_DIRECTORY},
	}}), nil
}

type errorString string

func (e errorString) Error() string { return string(e) }
