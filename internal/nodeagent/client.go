package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Client calls node agents with the shared token.
type Client struct {
	token string
	http  *http.Client
	// bulk carries image imports, exports and commits, which move whole
	// images and take as long as their size: bounded by the caller's
	// context, not by a fixed timeout.
	bulk *http.Client
}

// NewClient returns a client presenting token, over TLS to node agents
// holding token's key (see ServerTLS).
func NewClient(token string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = clientTLS(token)
	tr.MaxIdleConnsPerHost = 8
	return &Client{token: token, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}, bulk: &http.Client{Transport: tr}}
}

// Image is an image in a node's containerd (namespace k8s.io, where the
// kubelet finds it), as the node agent reports it.
type Image struct {
	// Name is the image's name as containerd and the kubelet know it,
	// normalized: "warren/base" is "docker.io/warren/base:latest".
	Name string `json:"name"`
	// ID is the digest of the image's config, "sha256:...": the ID the
	// Docker engine gives the same image, so that the builder's image
	// and a node's copy of it compare equal, and a rebuilt one does not.
	ID string `json:"id"`
	// Labels are the labels of the image's config.
	Labels map[string]string `json:"labels,omitempty"`
	// Size is the bytes its layers take unpacked on the node.
	Size int64 `json:"size"`
}

// ImportImage loads the images of a tar stream (what `docker save` and
// ExportImage write) into the node's containerd, unpacked for its
// snapshotter so that a pod can run them without a pull, and returns them.
func (c *Client) ImportImage(ctx context.Context, addr string, tar io.Reader) ([]Image, error) {
	var out struct {
		Images []Image `json:"images"`
	}
	err := c.call(ctx, c.bulk, http.MethodPost, addr, "/v1/images", nil, tar, &out)
	return out.Images, err
}

// Images lists the node's images.
func (c *Client) Images(ctx context.Context, addr string) ([]Image, error) {
	var out struct {
		Images []Image `json:"images"`
	}
	err := c.call(ctx, c.http, http.MethodGet, addr, "/v1/images", nil, nil, &out)
	return out.Images, err
}

// Image returns the node's image ref names (normalized as Image.Name is);
// KindNotFound when the node does not have it.
func (c *Client) Image(ctx context.Context, addr, ref string) (Image, error) {
	var img Image
	err := c.call(ctx, c.http, http.MethodGet, addr, "/v1/image", url.Values{"ref": {ref}}, nil, &img)
	return img, err
}

// RemoveImage removes the node's image ref names, and the layers no other
// image uses; KindNotFound when the node does not have it.
func (c *Client) RemoveImage(ctx context.Context, addr, ref string) error {
	return c.call(ctx, c.http, http.MethodDelete, addr, "/v1/image", url.Values{"ref": {ref}}, nil, nil)
}

// ExportImage streams the node's image ref names as a tar that
// ImportImage (on another node) and `docker load` take. The caller closes
// it; KindNotFound when the node does not have it.
func (c *Client) ExportImage(ctx context.Context, addr, ref string) (io.ReadCloser, error) {
	res, err := c.send(ctx, c.bulk, http.MethodGet, addr, "/v1/image/export", url.Values{"ref": {ref}}, nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// Commit saves the filesystem of the container named container in the pod
// uid (its changes since it started, as one more layer on the image it
// runs) as an image named ref on the node, with labels added to its
// config's, unpacked so that a pod can run it at once. The container may
// be running or frozen; it is left as it was.
func (c *Client) Commit(ctx context.Context, addr, uid, container, ref string, labels map[string]string) (Image, error) {
	var img Image
	in := map[string]any{"container": container, "ref": ref, "labels": labels}
	err := c.call(ctx, c.bulk, http.MethodPost, addr, "/v1/pods/"+uid+"/commit", nil, jsonBody(in), &img)
	return img, err
}

// Freeze freezes the pod uid through the agent at addr (host:port).
func (c *Client) Freeze(ctx context.Context, addr, uid string) error {
	return c.do(ctx, http.MethodPost, addr, uid, "freeze", nil, nil)
}

// Thaw thaws the pod uid.
func (c *Client) Thaw(ctx context.Context, addr, uid string) error {
	return c.do(ctx, http.MethodPost, addr, uid, "thaw", nil, nil)
}

// Frozen reports whether the pod uid is frozen.
func (c *Client) Frozen(ctx context.Context, addr, uid string) (bool, error) {
	var out struct {
		Frozen bool `json:"frozen"`
	}
	err := c.do(ctx, http.MethodGet, addr, uid, "frozen", nil, &out)
	return out.Frozen, err
}

// SetPidsLimit caps the processes of the pod uid.
func (c *Client) SetPidsLimit(ctx context.Context, addr, uid string, limit int) error {
	return c.do(ctx, http.MethodPut, addr, uid, "pids-limit", map[string]int{"limit": limit}, nil)
}

// SpareAgent has the OOM killer take the pod uid's users' processes
// before its sandbox's init and agent (Cgroups.SpareAgent).
func (c *Client) SpareAgent(ctx context.Context, addr, uid string) error {
	return c.do(ctx, http.MethodPost, addr, uid, "spare-agent", nil, nil)
}

// Stats samples the pod uid's CPU and memory.
func (c *Client) Stats(ctx context.Context, addr, uid string) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, addr, uid, "stats", nil, &s)
	return s, err
}

func (c *Client) do(ctx context.Context, method, addr, uid, op string, in, out any) error {
	var body io.Reader
	if in != nil {
		body = jsonBody(in)
	}
	return c.call(ctx, c.http, method, addr, "/v1/pods/"+uid+"/"+op, nil, body, out)
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// call sends a request and decodes its JSON answer into out (nil: none).
func (c *Client) call(ctx context.Context, hc *http.Client, method, addr, path string, query url.Values, body io.Reader, out any) error {
	res, err := c.send(ctx, hc, method, addr, path, query, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(out); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "the node agent's answer is unreadable")
		}
	}
	return nil
}

// send sends a request and returns the answer when it is a success; the
// caller closes its body.
func (c *Client) send(ctx context.Context, hc *http.Client, method, addr, path string, query url.Values, body io.Reader) (*http.Response, error) {
	u := "https://" + addr + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "cannot call the node agent")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := hc.Do(req)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "the node agent of the sandbox's node is unreachable")
	}
	if res.StatusCode >= 300 {
		defer res.Body.Close()
		var e httpedge.Body
		_ = json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&e)
		kind := httpedge.KindOf(res.StatusCode)
		if kind == sandbox.KindUnauthenticated || kind == sandbox.KindForbidden {
			// The control plane's token is wrong: the operator's to fix.
			kind = sandbox.KindInternal
		}
		return nil, sandbox.Wrap(kind, fmt.Errorf("node agent %s %s %s: %d %s", addr, method, path, res.StatusCode, e.Message),
			"the node agent refused: "+e.Message)
	}
	return res, nil
}

// SetEgress replaces the egress rules of the node's sandbox pods (see
// Egress.Set).
func (c *Client) SetEgress(ctx context.Context, addr string, r EgressRules) error {
	return c.call(ctx, c.http, http.MethodPut, addr, "/v1/egress", nil, jsonBody(r), nil)
}

// Forward sends a request for path (with its raw query, header and body)
// and returns the node agent's answer whatever its status, for the caller
// to pass on: the volume content API, whose answers are already E2B's.
// The caller closes its body.
func (c *Client) Forward(ctx context.Context, addr, method, path, rawQuery string, header http.Header, body io.Reader) (*http.Response, error) {
	u := "https://" + addr + path
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "cannot call the node agent")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.bulk.Do(req)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "the node agent of the volume's node is unreachable")
	}
	return res, nil
}

// VolumeUsage is the size of the files of the node's volume name (a
// directory under the node agent's volumes directory), served at prefix
// (VolumesPrefix or SharedVolumesPrefix).
func (c *Client) VolumeUsage(ctx context.Context, addr, prefix, name string) (int64, error) {
	var out struct {
		UsedBytes int64 `json:"usedBytes"`
	}
	err := c.call(ctx, c.http, http.MethodGet, addr, prefix+url.PathEscape(name)+"/usage", nil, nil, &out)
	return out.UsedBytes, err
}
