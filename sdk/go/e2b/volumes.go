package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// VolumeInfo describes a volume: persistent storage that sandboxes mount
// (SandboxOptions.VolumeMounts) and whose content the volume content API reaches without
// a sandbox.
type VolumeInfo struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
	// Token authorizes the content API (absent from ListVolumes).
	Token string `json:"token,omitempty"`
	// Domain, when set, is the domain of the content API.
	Domain string `json:"domain,omitempty"`
}

// Volume is a volume with its content API.
type Volume struct {
	VolumeInfo
	client *Client
}

// VolumeEntryStat describes an entry of a volume.
type VolumeEntryStat struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"` // file, directory, symlink or unknown
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"`
	UID    int       `json:"uid"`
	GID    int       `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"` // a symlink's target
}

// VolumeWriteOptions sets the owner and mode of what a write or MakeDir creates; nil fields
// leave the server's defaults. Force creates missing parents (MakeDir) or replaces (writes).
type VolumeWriteOptions struct {
	UID, GID *int
	Mode     *uint32
	Force    bool
}

func (o VolumeWriteOptions) query(q url.Values) {
	if o.UID != nil {
		q.Set("uid", strconv.Itoa(*o.UID))
	}
	if o.GID != nil {
		q.Set("gid", strconv.Itoa(*o.GID))
	}
	if o.Mode != nil {
		q.Set("mode", strconv.FormatUint(uint64(*o.Mode), 10))
	}
	if o.Force {
		q.Set("force", "true")
	}
}

func volumePath(id string) string { return "/volumes/" + url.PathEscape(id) }

// CreateVolume creates a volume.
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	var info VolumeInfo
	if err := c.volumeCall(ctx, http.MethodPost, "/volumes", "", map[string]string{"name": name}, &info); err != nil {
		return nil, err
	}
	return &Volume{VolumeInfo: info, client: c}, nil
}

// ConnectVolume returns a volume by ID, for its content API.
func (c *Client) ConnectVolume(ctx context.Context, volumeID string) (*Volume, error) {
	info, err := c.GetVolumeInfo(ctx, volumeID)
	if err != nil {
		return nil, err
	}
	return &Volume{VolumeInfo: *info, client: c}, nil
}

// GetVolumeInfo describes a volume. A missing one is a *VolumeNotFoundError.
func (c *Client) GetVolumeInfo(ctx context.Context, volumeID string) (*VolumeInfo, error) {
	var info VolumeInfo
	return &info, c.volumeCall(ctx, http.MethodGet, volumePath(volumeID), volumeID, nil, &info)
}

// ListVolumes lists the volumes.
func (c *Client) ListVolumes(ctx context.Context) ([]VolumeInfo, error) {
	var out []VolumeInfo
	return out, c.volumeCall(ctx, http.MethodGet, "/volumes", "", nil, &out)
}

// DestroyVolume deletes a volume and its content; false when there was no such volume.
func (c *Client) DestroyVolume(ctx context.Context, volumeID string) (bool, error) {
	err := c.volumeCall(ctx, http.MethodDelete, volumePath(volumeID), volumeID, nil, nil)
	var missing *VolumeNotFoundError
	if errors.As(err, &missing) {
		return false, nil
	}
	return err == nil, err
}

func (c *Client) volumeCall(ctx context.Context, method, path, volumeID string, in, out any) error {
	r, err := c.call(ctx, method, path, nil, in)
	if err != nil {
		return err
	}
	if r.ok() {
		return r.decode(out)
	}
	if r.status == http.StatusNotFound && volumeID != "" {
		return &VolumeNotFoundError{VolumeError{Message: "Volume " + volumeID + " not found", StatusCode: r.status}}
	}
	return volumeError(r)
}

func volumeError(r *apiResponse) error {
	switch r.status {
	case http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return r.err()
	}
	return &VolumeError{Message: fmt.Sprintf("%d: %s", r.status, r.message()), StatusCode: r.status}
}

// List lists a directory of the volume, depth levels deep (0: the server's default).
func (v *Volume) List(ctx context.Context, path string, depth int) ([]VolumeEntryStat, error) {
	q := url.Values{"path": {path}}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out []VolumeEntryStat
	return out, v.content(ctx, http.MethodGet, "/dir", path, q, nil, &out)
}

// MakeDir creates a directory in the volume.
func (v *Volume) MakeDir(ctx context.Context, path string, opts VolumeWriteOptions) (*VolumeEntryStat, error) {
	q := url.Values{"path": {path}}
	opts.query(q)
	var st VolumeEntryStat
	return &st, v.content(ctx, http.MethodPost, "/dir", path, q, nil, &st)
}

// GetInfo describes an entry of the volume. A missing path is a *VolumePathNotFoundError.
func (v *Volume) GetInfo(ctx context.Context, path string) (*VolumeEntryStat, error) {
	var st VolumeEntryStat
	return &st, v.content(ctx, http.MethodGet, "/path", path, url.Values{"path": {path}}, nil, &st)
}

// Exists says whether something is at path in the volume.
func (v *Volume) Exists(ctx context.Context, path string) (bool, error) {
	_, err := v.GetInfo(ctx, path)
	var missing *VolumePathNotFoundError
	if errors.As(err, &missing) {
		return false, nil
	}
	return err == nil, err
}

// UpdateMetadata changes an entry's owner and mode.
func (v *Volume) UpdateMetadata(ctx context.Context, path string, opts VolumeWriteOptions) (*VolumeEntryStat, error) {
	body := map[string]any{}
	if opts.UID != nil {
		body["uid"] = *opts.UID
	}
	if opts.GID != nil {
		body["gid"] = *opts.GID
	}
	if opts.Mode != nil {
		body["mode"] = *opts.Mode
	}
	b, _ := json.Marshal(body)
	var st VolumeEntryStat
	return &st, v.content(ctx, http.MethodPatch, "/path", path, url.Values{"path": {path}}, bytes.NewReader(b), &st)
}

// Remove removes an entry of the volume.
func (v *Volume) Remove(ctx context.Context, path string) error {
	return v.content(ctx, http.MethodDelete, "/path", path, url.Values{"path": {path}}, nil, nil)
}

// ReadFile returns the content of a file of the volume.
func (v *Volume) ReadFile(ctx context.Context, path string) ([]byte, error) {
	r, err := v.ReadFileStream(ctx, path)
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

// ReadFileStream returns the content of a file of the volume as a stream to close.
func (v *Volume) ReadFileStream(ctx context.Context, path string) (io.ReadCloser, error) {
	res, err := v.send(ctx, http.MethodGet, "/file", path, url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// WriteFile writes what r yields to a file of the volume, streaming it.
func (v *Volume) WriteFile(ctx context.Context, path string, r io.Reader, opts VolumeWriteOptions) (*VolumeEntryStat, error) {
	q := url.Values{"path": {path}}
	opts.query(q)
	var st VolumeEntryStat
	return &st, v.content(ctx, http.MethodPut, "/file", path, q, r, &st)
}

// content makes one call of the content API and decodes its JSON answer into out.
func (v *Volume) content(ctx context.Context, method, sub, path string, q url.Values, body io.Reader, out any) error {
	res, err := v.send(ctx, method, sub, path, q, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return &VolumeError{Message: "decoding the answer: " + err.Error()}
	}
	return nil
}

// send makes one call of the content API; the response is 2xx (its body the caller's to
// close) or an error.
func (v *Volume) send(ctx context.Context, method, sub, path string, q url.Values, body io.Reader) (*http.Response, error) {
	cfg := v.client.cfg
	u := cfg.VolumeAPIURL + "/volumecontent/" + url.PathEscape(v.VolumeID) + sub + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Authorization", "Bearer "+v.Token)
	switch {
	case method == http.MethodPut:
		req.Header.Set("Content-Type", "application/octet-stream")
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if res.StatusCode < 300 {
		return res, nil
	}
	defer res.Body.Close()
	r, err := readResponse(res)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if r.status == http.StatusNotFound {
		return nil, &VolumePathNotFoundError{VolumeError{Message: "Path " + path + " not found", StatusCode: r.status}}
	}
	return nil, volumeError(r)
}
