package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/proto/filesystem"
	"github.com/warrenhq/warren/proto/filesystem/filesystemconnect"
)

// FileEntry is one entry of a directory in a sandbox.
type FileEntry struct {
	Name     string
	Path     string
	Dir      bool
	Symlink  bool
	Size     int64
	Mode     string // as ls shows it, e.g. -rw-r--r--
	Modified time.Time
}

// ListDir lists the directory path in the sandbox whose agent is at
// addr, as user sees it.
func (c *Client) ListDir(ctx context.Context, addr, accessToken, user, path string) ([]FileEntry, error) {
	fs := filesystemconnect.NewFilesystemClient(c.http, "http://"+addr)
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: 1})
	setAuth(req.Header(), accessToken, user)
	res, err := fs.ListDir(ctx, req)
	if err != nil {
		return nil, fileError(err)
	}
	out := make([]FileEntry, 0, len(res.Msg.GetEntries()))
	for _, e := range res.Msg.GetEntries() {
		out = append(out, FileEntry{Name: e.GetName(), Path: e.GetPath(), Dir: e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY,
			Symlink: e.GetType() == filesystem.FileType_FILE_TYPE_SYMLINK, Size: e.GetSize(), Mode: e.GetPermissions(),
			Modified: e.GetModifiedTime().AsTime()})
	}
	return out, nil
}

// fileError keeps the agent's answer to a bad path (not found, not a
// directory, denied) as an invalid or missing request, not a failure of
// the server.
func fileError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return sandbox.Errorf(sandbox.KindNotFound, "%s", ce.Message())
		case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
			return sandbox.Errorf(sandbox.KindInvalid, "%s", ce.Message())
		case connect.CodePermissionDenied:
			return sandbox.Errorf(sandbox.KindForbidden, "%s", ce.Message())
		}
		return sandbox.Wrap(sandbox.KindInternal, err, "agent: "+ce.Message())
	}
	return sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's agent did not answer")
}

func filesURL(addr, user, path string) string {
	q := url.Values{"path": {path}, "username": {user}}
	return "http://" + addr + "/files?" + q.Encode()
}

// agentError turns a refused files request into an error of its kind,
// with the agent's message.
func agentError(resp *http.Response) error {
	var body struct {
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := resp.Status
	if json.Unmarshal(data, &body) == nil && body.Message != "" {
		msg = body.Message
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return sandbox.Errorf(sandbox.KindNotFound, "%s", msg)
	case http.StatusBadRequest:
		return sandbox.Errorf(sandbox.KindInvalid, "%s", msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return sandbox.Errorf(sandbox.KindForbidden, "%s", msg)
	case http.StatusInsufficientStorage:
		return sandbox.Errorf(sandbox.KindUnavailable, "%s", msg)
	}
	return sandbox.Errorf(sandbox.KindInternal, "agent answered %s: %s", resp.Status, msg)
}

// ReadFile opens the file path in the sandbox for reading; the caller
// closes it.
func (c *Client) ReadFile(ctx context.Context, addr, accessToken, user, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, filesURL(addr, user, path), nil)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "invalid path")
	}
	setAuth(req.Header, accessToken, "")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's agent did not answer")
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, agentError(resp)
	}
	return resp.Body, nil
}

// WriteFile writes body to path in the sandbox, making its directories.
func (c *Client) WriteFile(ctx context.Context, addr, accessToken, user, path string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, filesURL(addr, user, path), body)
	if err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "invalid path")
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	setAuth(req.Header, accessToken, "")
	resp, err := c.http.Do(req)
	if err != nil {
		return sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's agent did not answer")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return agentError(resp)
	}
	return nil
}
