package filesystem

import (
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"strconv"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/state"
	"github.com/warrenhq/warren/internal/warrentest"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
)

// codecs are the two wire formats the SDKs use: JSON (JS) and binary
// protobuf (Python).
var codecs = []struct {
	name string
	opts []connect.ClientOption
}{
	{"json", []connect.ClientOption{connect.WithProtoJSON()}},
	{"binary", nil},
}

type fixture struct {
	svc    *Service
	st     *state.State
	client filesystemconnect.FilesystemClient
	dir    string // a fresh directory the test may fill
}

// newFixture serves a Service over HTTP with the current user as the
// default user, so the tests work as root and as anyone else.
func newFixture(t *testing.T, opts ...connect.ClientOption) *fixture {
	t.Helper()
	cur, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	st := state.New()
	st.SetDefaultUser(cur.Username)
	svc := New(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(svc.Close)
	mux := http.NewServeMux()
	mux.Handle(filesystemconnect.NewFilesystemHandler(svc))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dir := warrentest.TempDir(t)
	return &fixture{
		svc:    svc,
		st:     st,
		client: filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL, opts...),
		dir:    dir,
	}
}

// forEachCodec runs fn once per wire format.
func forEachCodec(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) { fn(t, newFixture(t, c.opts...)) })
	}
}

// as names the user of a request the way the SDK does.
func as[T any](msg *T, name string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":")))
	return req
}

func wantCode(t *testing.T, err error, code connect.Code, msg string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want connect code %v", err, code)
	}
	if ce.Code() != code {
		t.Fatalf("code = %v (%s), want %v", ce.Code(), ce.Message(), code)
	}
	if msg != "" && ce.Message() != msg {
		t.Fatalf("message = %q, want %q", ce.Message(), msg)
	}
}

func strconvFormat(u uint32) string { return strconv.FormatUint(uint64(u), 10) }

// writeMetadata stores md on the file at path, as an upload does.
func writeMetadata(path string, md map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return WriteMetadataFile(f, md)
}
