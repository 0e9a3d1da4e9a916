// Package registry keeps images in an OCI distribution registry (the
// Registry HTTP API v2) for the Kubernetes engine when templates are built
// on BuildKit: there is no Docker engine beside the control plane then, so
// the registry is where the built images, the base images and the
// snapshots that templates are built on live, and what the nodes pull by
// digest. It answers for images (sandbox.Images), pushes the OCI archives
// the node agents export (snapshots), and names an image by digest.
//
// An image "warren/template/x:b" lives in the registry as
// PREFIX/warren/template/x:b, PREFIX being host[:port][/path]. An image
// ID is the digest of its config, as the node agents and Docker report
// it; the registry finds images by name only, never by ID.
//
// It does not build (internal/buildkit does) and keeps no state of its own.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Media types of manifests the store reads.
const (
	dockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// maxManifest bounds a manifest or an image config read into memory.
const maxManifest = 4 << 20

// Store is a registry as Warren's image store.
type Store struct {
	host   string // host[:port]
	prefix string // repository path before an image's own; "" = none
	scheme string // "http" or "https"
	hc     *http.Client
}

// New returns the store of the registry at prefix (host[:port][/path]),
// spoken to in plain HTTP when plainHTTP is set (a registry on loopback or
// a cluster's own network without TLS), else HTTPS.
func New(prefix string, plainHTTP bool) (*Store, error) {
	if _, err := reference.ParseNormalizedNamed(prefix + "/image:tag"); err != nil || strings.HasSuffix(prefix, "/") || !strings.Contains(prefix, "/") && !strings.ContainsAny(prefix, ".:") {
		return nil, fmt.Errorf("registry %q: want host[:port][/path]", prefix)
	}
	host, path, _ := strings.Cut(prefix, "/")
	s := &Store{host: host, prefix: path, scheme: "https", hc: &http.Client{Timeout: 10 * time.Minute}}
	if plainHTTP {
		s.scheme = "http"
	}
	return s, nil
}

// Host is the registry's host[:port].
func (s *Store) Host() string { return s.host }

// Repo returns the repository of the image ref in the registry (without
// its host) and its tag or digest.
func (s *Store) Repo(ref string) (repo, tagOrDigest string, err error) {
	n, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", "", sandbox.Errorf(sandbox.KindNotFound, "no image %s", ref)
	}
	repo = reference.Path(n)
	if s.prefix != "" {
		repo = s.prefix + "/" + repo
	}
	switch n := n.(type) {
	case reference.Digested:
		return repo, n.Digest().String(), nil
	case reference.Tagged:
		return repo, n.Tag(), nil
	}
	return repo, "latest", nil
}

// Name is the image ref's name in the registry, with its tag or digest.
func (s *Store) Name(ref string) (string, error) {
	repo, td, err := s.Repo(ref)
	if err != nil {
		return "", err
	}
	sep := ":"
	if strings.HasPrefix(td, "sha256:") {
		sep = "@"
	}
	return s.host + "/" + repo + sep + td, nil
}

// manifest is what the store reads of an image's manifest.
type manifest struct {
	Digest digest.Digest // of the manifest
	Config digest.Digest
}

// resolve reads the manifest of ref (for a list: its linux/amd64 image's).
func (s *Store) resolve(ctx context.Context, ref string) (manifest, string, error) {
	repo, td, err := s.Repo(ref)
	if err != nil {
		return manifest{}, "", err
	}
	for range 2 {
		body, dgst, mt, err := s.getManifest(ctx, repo, td)
		if err != nil {
			return manifest{}, repo, err
		}
		var m struct {
			MediaType string             `json:"mediaType"`
			Config    ocispec.Descriptor `json:"config"`
			Manifests []ocispec.Descriptor
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return manifest{}, repo, sandbox.Wrap(sandbox.KindUnavailable, err, "the registry sent an unreadable manifest")
		}
		if mt == ocispec.MediaTypeImageIndex || mt == dockerManifestList || len(m.Manifests) > 0 {
			td = ""
			for _, d := range m.Manifests {
				if d.Platform == nil || d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" {
					td = d.Digest.String()
					break
				}
			}
			if td == "" {
				return manifest{}, repo, sandbox.Errorf(sandbox.KindNotFound, "image %s has no linux/amd64 image", ref)
			}
			continue
		}
		return manifest{Digest: dgst, Config: m.Config.Digest}, repo, nil
	}
	return manifest{}, repo, sandbox.Errorf(sandbox.KindNotFound, "image %s: an index of indexes", ref)
}

// getManifest GETs repo's manifest td.
func (s *Store) getManifest(ctx context.Context, repo, td string) ([]byte, digest.Digest, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(repo, "manifests", td), nil)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Accept", strings.Join([]string{ocispec.MediaTypeImageManifest, dockerManifest, ocispec.MediaTypeImageIndex, dockerManifestList}, ", "))
	res, err := s.do(req, http.StatusOK)
	if err != nil {
		return nil, "", "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxManifest))
	if err != nil {
		return nil, "", "", sandbox.Wrap(sandbox.KindUnavailable, err, "reading a manifest from the registry")
	}
	return body, digest.FromBytes(body), res.Header.Get("Content-Type"), nil
}

// imageConfig is what the store reads of an image's config.
type imageConfig struct {
	Config struct {
		Env    []string          `json:"Env"`
		Labels map[string]string `json:"Labels"`
	} `json:"config"`
}

// config reads ref's manifest and config.
func (s *Store) config(ctx context.Context, ref string) (manifest, imageConfig, error) {
	m, repo, err := s.resolve(ctx, ref)
	if err != nil {
		return m, imageConfig{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(repo, "blobs", m.Config.String()), nil)
	if err != nil {
		return m, imageConfig{}, err
	}
	res, err := s.do(req, http.StatusOK)
	if err != nil {
		return m, imageConfig{}, err
	}
	defer res.Body.Close()
	var c imageConfig
	if err := json.NewDecoder(io.LimitReader(res.Body, maxManifest)).Decode(&c); err != nil {
		return m, c, sandbox.Wrap(sandbox.KindUnavailable, err, "the registry sent an unreadable image config")
	}
	return m, c, nil
}

// ImageExists reports whether the registry has the image ref.
func (s *Store) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, _, err := s.resolve(ctx, ref)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return false, nil
	}
	return err == nil, err
}

// ImageID returns the digest of the config of the image ref.
func (s *Store) ImageID(ctx context.Context, ref string) (string, error) {
	m, _, err := s.resolve(ctx, ref)
	return m.Config.String(), err
}

// ImageLabels returns the labels of the image ref.
func (s *Store) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	_, c, err := s.config(ctx, ref)
	return c.Config.Labels, err
}

// ImageEnv returns the environment of the image ref as KEY=value strings.
func (s *Store) ImageEnv(ctx context.Context, ref string) ([]string, error) {
	_, c, err := s.config(ctx, ref)
	return c.Config.Env, err
}

// InspectImage returns the image ref names; by name only.
func (s *Store) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	m, c, err := s.config(ctx, ref)
	if err != nil {
		return sandbox.Image{}, err
	}
	repo, _, _ := s.Repo(ref)
	img := sandbox.Image{ID: m.Config.String(), RepoDigests: []string{s.host + "/" + repo + "@" + m.Digest.String()}, Labels: c.Config.Labels}
	if n, err := reference.ParseDockerRef(ref); err == nil {
		if _, digested := n.(reference.Digested); !digested {
			img.RepoTags = []string{reference.FamiliarString(n)}
		}
	}
	return img, nil
}

// RemoveImage removes the image ref from the registry: its tag, not the
// manifest, which other tags may share (a rebuild from the cache makes
// the same manifest under a new tag); a ref by digest deletes the
// manifest. The registry's garbage collection frees what no tag names.
// KindNotFound when there is no such image.
func (s *Store) RemoveImage(ctx context.Context, ref string) error {
	m, repo, err := s.resolve(ctx, ref)
	if err != nil {
		return err
	}
	_, td, _ := s.Repo(ref)
	if strings.HasPrefix(td, "sha256:") {
		td = m.Digest.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url(repo, "manifests", td), nil)
	if err != nil {
		return err
	}
	res, err := s.do(req, http.StatusAccepted)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// PushImage returns the name by digest of the image ref, which is in the
// registry already: target must be its name there.
func (s *Store) PushImage(ctx context.Context, ref, target string) (string, error) {
	name, err := s.Name(ref)
	if err != nil {
		return "", err
	}
	if name != target {
		return "", sandbox.Errorf(sandbox.KindInternal, "image %s is %s in the registry, not %s", ref, name, target)
	}
	m, repo, err := s.resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	return s.host + "/" + repo + "@" + m.Digest.String(), nil
}

// SaveImage is refused: the nodes pull the registry's images themselves.
func (s *Store) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	return nil, sandbox.Errorf(sandbox.KindUnavailable, "image %s is in the registry %s: the nodes pull it from there", ref, s.host)
}

func (s *Store) url(repo, kind, ref string) string {
	return s.scheme + "://" + s.host + "/v2/" + repo + "/" + kind + "/" + ref
}

// do sends req and returns its response when its status is want; other
// statuses are errors of their kind.
func (s *Store) do(req *http.Request, want int) (*http.Response, error) {
	res, err := s.hc.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "the registry "+s.host+" does not answer")
	}
	if res.StatusCode == want {
		return res, nil
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	err = fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, res.Status, strings.TrimSpace(string(body)))
	switch res.StatusCode {
	case http.StatusNotFound:
		return nil, sandbox.Wrap(sandbox.KindNotFound, err, "no such image in the registry")
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "the registry "+s.host+" refused Warren")
	}
	return nil, sandbox.Wrap(sandbox.KindUnavailable, errors.Join(err), "the registry "+s.host+" failed")
}

// PlainHTTP reports whether the registry at prefix is spoken to without
// TLS: one on a loopback or private address (the address of a cluster's
// own registry), or localhost, as Docker and containerd take such
// registries to be.
func PlainHTTP(prefix string) bool {
	host, _, _ := strings.Cut(prefix, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && (a.IsLoopback() || a.IsPrivate())
}
