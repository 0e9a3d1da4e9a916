package e2b

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/filesystem"
)

// Filesystem reads and writes files in a sandbox.
type Filesystem struct{ e *envdConn }

// FileType is the type of a filesystem entry.
type FileType string

// The types of filesystem entries.
const (
	FileTypeFile    FileType = "file"
	FileTypeDir     FileType = "dir"
	FileTypeSymlink FileType = "symlink"
)

// WriteInfo describes a file written.
type WriteInfo struct {
	Name     string            `json:"name"`
	Type     FileType          `json:"type,omitempty"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// EntryInfo describes a filesystem entry.
type EntryInfo struct {
	WriteInfo
	Size        int64
	Mode        fs.FileMode // permission bits only
	Permissions string      // as ls shows them: -rw-r--r--
	Owner       string
	Group       string
	ModTime     time.Time
	// SymlinkTarget is the resolved target of a symlink, "" for other entries; Type and
	// Mode are then the target's.
	SymlinkTarget string
}

// FileOptions names the user of a file operation; default the sandbox's default user.
type FileOptions struct {
	User string
}

// ReadOptions configures a read.
type ReadOptions struct {
	User string
	// Gzip asks for the file gzip-compressed on the wire (it is returned decompressed).
	Gzip bool
}

// WriteOptions configures a write.
type WriteOptions struct {
	User string
	// Gzip compresses the upload on the wire.
	Gzip bool
	// Metadata is stored with the file (replacing what it had); needs envd 0.6.2.
	Metadata map[string]string
}

// WriteEntry is one file of WriteFiles.
type WriteEntry struct {
	// Path is absolute, or relative to the user's home.
	Path string
	Data io.Reader
}

// Read returns the content of a file. A missing file is a *FileNotFoundError.
func (f *Filesystem) Read(ctx context.Context, path string, opts ReadOptions) ([]byte, error) {
	ctx, cancel := withTimeout(ctx, f.e.cfg.RequestTimeout)
	defer cancel()
	r, err := f.ReadStream(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return b, nil
}

// ReadStream returns the content of a file as a stream, which the caller must close. ctx
// bounds the whole read.
func (f *Filesystem) ReadStream(ctx context.Context, path string, opts ReadOptions) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.fileURL(path, opts.User), nil)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	f.e.setHeaders(req.Header)
	if opts.Gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	res, err := f.e.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if res.StatusCode >= 300 {
		defer res.Body.Close()
		return nil, restError(res)
	}
	if res.Header.Get("Content-Encoding") != "gzip" {
		return res.Body, nil
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		res.Body.Close()
		return nil, &SandboxError{Message: "reading the gzip stream: " + err.Error(), Err: err}
	}
	return gzipBody{zr, res.Body}, nil
}

type gzipBody struct {
	*gzip.Reader
	body io.Closer
}

func (g gzipBody) Close() error {
	g.Reader.Close()
	return g.body.Close()
}

// Write writes data to a file, creating its parent directories; it replaces the file when it
// exists.
func (f *Filesystem) Write(ctx context.Context, path string, data []byte, opts WriteOptions) (*WriteInfo, error) {
	ctx, cancel := withTimeout(ctx, f.e.cfg.RequestTimeout)
	defer cancel()
	return f.WriteStream(ctx, path, bytes.NewReader(data), opts)
}

// WriteStream writes what r yields to a file, streaming it. ctx bounds the whole upload.
func (f *Filesystem) WriteStream(ctx context.Context, path string, r io.Reader, opts WriteOptions) (*WriteInfo, error) {
	var (
		infos []WriteInfo
		err   error
	)
	if versionBefore(f.e.version, envdOctetStream) {
		infos, err = f.upload(ctx, f.fileURL(path, opts.User), []WriteEntry{{Path: path, Data: r}}, opts)
	} else {
		infos, err = f.uploadOctets(ctx, path, r, opts)
	}
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, &SandboxError{Message: "the agent reported no file written"}
	}
	return &infos[0], nil
}

// WriteFiles writes several files in one request; the result is in the order of files.
func (f *Filesystem) WriteFiles(ctx context.Context, files []WriteEntry, opts WriteOptions) ([]WriteInfo, error) {
	if len(files) == 0 {
		return nil, nil
	}
	ctx, cancel := withTimeout(ctx, f.e.cfg.RequestTimeout)
	defer cancel()
	return f.upload(ctx, f.fileURL("", opts.User), files, opts)
}

func (f *Filesystem) uploadOctets(ctx context.Context, path string, r io.Reader, opts WriteOptions) ([]WriteInfo, error) {
	body, encoding := r, ""
	if opts.Gzip {
		body, encoding = gzipped(r), "gzip"
	}
	return f.post(ctx, f.fileURL(path, opts.User), body, "application/octet-stream", encoding, opts.Metadata)
}

// upload sends files as one multipart request, each part named by the file's path.
func (f *Filesystem) upload(ctx context.Context, u string, files []WriteEntry, opts WriteOptions) ([]WriteInfo, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, file := range files {
			part, err := mw.CreateFormFile("file", file.Path)
			if err == nil {
				_, err = io.Copy(part, file.Data)
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	body, encoding := io.Reader(pr), ""
	if opts.Gzip {
		body, encoding = gzipped(pr), "gzip"
	}
	infos, err := f.post(ctx, u, body, mw.FormDataContentType(), encoding, opts.Metadata)
	pr.CloseWithError(io.ErrClosedPipe)
	return infos, err
}

func (f *Filesystem) post(ctx context.Context, u string, body io.Reader, contentType, encoding string, metadata map[string]string) ([]WriteInfo, error) {
	if len(metadata) > 0 && versionBefore(f.e.version, envdFileMetadata) {
		return nil, invalidArg("file metadata needs envd %s or newer (the sandbox has %s)", envdFileMetadata, f.e.version)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	f.e.setHeaders(req.Header)
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for k, v := range metadata {
		req.Header.Set("X-Metadata-"+k, v)
	}
	res, err := f.e.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		return nil, restError(res)
	}
	var infos []WriteInfo
	if err := json.NewDecoder(res.Body).Decode(&infos); err != nil {
		return nil, &SandboxError{Message: "decoding the agent's answer: " + err.Error(), Err: err}
	}
	return infos, nil
}

// gzipped compresses r as it is read.
func gzipped(r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		_, err := io.Copy(zw, r)
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// fileURL is the agent's /files URL for path ("" for multipart uploads that name each file).
func (f *Filesystem) fileURL(path, user string) string {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if u := f.e.user(user); u != "" {
		q.Set("username", u)
	}
	return f.e.baseURL + "/files?" + q.Encode()
}

// List lists a directory, depth levels deep (0 means 1).
func (f *Filesystem) List(ctx context.Context, path string, opts ListDirOptions) ([]EntryInfo, error) {
	if opts.Depth < 0 {
		return nil, invalidArg("depth should be at least one")
	}
	depth := uint32(opts.Depth)
	if depth == 0 {
		depth = 1
	}
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: depth})
	res, err := unary(ctx, f.e, opts.User, req, f.e.fs.ListDir)
	if err != nil {
		return nil, err
	}
	out := make([]EntryInfo, 0, len(res.GetEntries()))
	for _, e := range res.GetEntries() {
		if info, ok := entryInfo(e); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

// ListDirOptions configures List.
type ListDirOptions struct {
	User string
	// Depth is how many levels to list; 0 means 1.
	Depth int
}

// GetInfo returns what is at path. A missing path is a *FileNotFoundError.
func (f *Filesystem) GetInfo(ctx context.Context, path string, opts FileOptions) (*EntryInfo, error) {
	res, err := unary(ctx, f.e, opts.User, connect.NewRequest(&filesystem.StatRequest{Path: path}), f.e.fs.Stat)
	if err != nil {
		return nil, err
	}
	info, _ := entryInfo(res.GetEntry())
	return &info, nil
}

// Exists says whether something is at path.
func (f *Filesystem) Exists(ctx context.Context, path string, opts FileOptions) (bool, error) {
	_, err := f.GetInfo(ctx, path, opts)
	var missing *FileNotFoundError
	if errors.As(err, &missing) {
		return false, nil
	}
	return err == nil, err
}

// Rename moves oldPath to newPath, creating newPath's parent directories.
func (f *Filesystem) Rename(ctx context.Context, oldPath, newPath string, opts FileOptions) (*EntryInfo, error) {
	res, err := unary(ctx, f.e, opts.User, connect.NewRequest(&filesystem.MoveRequest{Source: oldPath, Destination: newPath}), f.e.fs.Move)
	if err != nil {
		return nil, err
	}
	info, _ := entryInfo(res.GetEntry())
	return &info, nil
}

// Remove removes a file or a directory with its content; a missing path is no error.
func (f *Filesystem) Remove(ctx context.Context, path string, opts FileOptions) error {
	_, err := unary(ctx, f.e, opts.User, connect.NewRequest(&filesystem.RemoveRequest{Path: path}), f.e.fs.Remove)
	return err
}

// MakeDir creates a directory and its parents; false when it already existed.
func (f *Filesystem) MakeDir(ctx context.Context, path string, opts FileOptions) (bool, error) {
	_, err := unary(ctx, f.e, opts.User, connect.NewRequest(&filesystem.MakeDirRequest{Path: path}), f.e.fs.MakeDir)
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return false, nil
	}
	return err == nil, err
}

// unary makes one filesystem RPC as user, bounded by the request timeout.
func unary[Req, Res any](ctx context.Context, e *envdConn, user string, req *connect.Request[Req], call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (*Res, error) {
	ctx, cancel := withTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	e.setUser(req.Header(), user)
	res, err := call(ctx, req)
	if err != nil {
		return nil, e.rpcError(err, fileNotFound)
	}
	return res.Msg, nil
}

// entryInfo converts an entry; ok is false for entries of no known type (which the official
// SDKs leave out of listings).
func entryInfo(e *filesystem.EntryInfo) (EntryInfo, bool) {
	info := EntryInfo{
		WriteInfo:     WriteInfo{Name: e.GetName(), Path: e.GetPath(), Metadata: e.GetMetadata()},
		Size:          e.GetSize(),
		Mode:          fs.FileMode(e.GetMode()),
		Permissions:   e.GetPermissions(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	if t := e.GetModifiedTime(); t != nil {
		info.ModTime = t.AsTime()
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_FILE:
		info.Type = FileTypeFile
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		info.Type = FileTypeDir
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		info.Type = FileTypeSymlink
	default:
		return info, false
	}
	return info, true
}

func invalidArg(format string, args ...any) error {
	return &InvalidArgumentError{sandboxErr(0, fmt.Sprintf(format, args...), nil)}
}
