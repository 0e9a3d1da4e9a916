package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

// imageNameAnnotation is where containerd's export names an image in the
// archive's index.
const imageNameAnnotation = "io.containerd.image.name"

// LoadImage pushes the images of an OCI image layout archive (what a node
// agent exports: containerd's export, with its images named in the
// index) to the registry under their names. The archive is read once, in
// order: its blobs go to the registry as they come, and its manifests,
// which must follow their blobs in the registry, last.
//
// A layer the archive lacks is mounted from a repository of this registry
// that the index names as the image's source (containerd's
// distribution-source annotation): a node exports a commit on a pulled
// image without the base's layers, which it dropped once unpacked and
// which are in the registry it pulled them from.
func (s *Store) LoadImage(ctx context.Context, archive io.Reader) error {
	tr := tar.NewReader(archive)
	small := map[digest.Digest][]byte{} // blobs that may be manifests
	had := map[digest.Digest]bool{}     // the blobs of the archive
	var index []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sandbox.Wrap(sandbox.KindInvalid, err, "an unreadable image archive")
		}
		name := path.Clean(h.Name)
		switch {
		case name == "index.json":
			if index, err = io.ReadAll(io.LimitReader(tr, maxManifest)); err != nil {
				return sandbox.Wrap(sandbox.KindInvalid, err, "an unreadable image archive")
			}
		case strings.HasPrefix(name, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			d := digest.NewDigestFromEncoded(digest.SHA256, path.Base(name))
			if d.Validate() != nil {
				continue
			}
			var body io.Reader = tr
			if h.Size <= maxManifest {
				b, err := io.ReadAll(tr)
				if err != nil {
					return sandbox.Wrap(sandbox.KindInvalid, err, "an unreadable image archive")
				}
				small[d], body = b, bytes.NewReader(b)
			}
			if err := s.blobs(ctx, d, h.Size, body); err != nil {
				return err
			}
			had[d] = true
		}
	}
	if index == nil {
		return sandbox.Errorf(sandbox.KindInvalid, "the image archive has no index.json")
	}
	var idx ocispec.Index
	if err := json.Unmarshal(index, &idx); err != nil {
		return sandbox.Wrap(sandbox.KindInvalid, err, "the image archive's index.json is unreadable")
	}
	pushed := 0
	for _, m := range idx.Manifests {
		ref := m.Annotations[imageNameAnnotation]
		if ref == "" {
			continue
		}
		if err := s.putManifests(ctx, ref, m, small, s.fromFor(had, m.Annotations)); err != nil {
			return err
		}
		pushed++
	}
	if pushed == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "the image archive names no image")
	}
	return nil
}

// staging is the repository an archive's blobs are uploaded to as they
// are read, before its manifests (read last) say which repository each
// belongs in: they are mounted from there.
const staging = "warren-staging"

// blobs uploads one blob of the archive to the staging repository, from
// which putManifests mounts it into the image's.
func (s *Store) blobs(ctx context.Context, d digest.Digest, size int64, body io.Reader) error {
	return s.upload(ctx, s.repoOf(staging), d, size, body)
}

func (s *Store) repoOf(p string) string {
	if s.prefix != "" {
		return s.prefix + "/" + p
	}
	return p
}

// sourceAnnotation starts the annotations (and containerd's content
// labels) naming the repositories an image was pulled from: the
// registry's host name (no port) follows it, and its value is a
// comma-separated list of repositories.
const sourceAnnotation = "containerd.io/distribution.source."

// fromFor returns where putManifests mounts a blob from: the staging
// repository when the archive had it (had), else this registry's
// repositories that the image's index entry (annotations) names as its
// sources.
func (s *Store) fromFor(had map[digest.Digest]bool, annotations map[string]string) func(digest.Digest) []string {
	host := s.host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	var sources []string
	for _, repo := range strings.Split(annotations[sourceAnnotation+host], ",") {
		if repo != "" {
			sources = append(sources, repo)
		}
	}
	return func(d digest.Digest) []string {
		if had[d] {
			return []string{s.repoOf(staging)}
		}
		return sources
	}
}

// putManifests puts the manifest m (an image's or an index's) as ref,
// with the manifests an index names first, after mounting every blob they
// name into ref's repository from the repositories from names.
func (s *Store) putManifests(ctx context.Context, ref string, m ocispec.Descriptor, small map[digest.Digest][]byte, from func(digest.Digest) []string) error {
	n, err := reference.ParseDockerRef(ref)
	if err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "the image archive names %q", ref)
	}
	repo, tag, err := s.Repo(n.String())
	if err != nil {
		return err
	}
	var put func(d ocispec.Descriptor, as string) error
	put = func(d ocispec.Descriptor, as string) error {
		body, ok := small[d.Digest]
		if !ok {
			return sandbox.Errorf(sandbox.KindInvalid, "the image archive lacks manifest %s", d.Digest)
		}
		var v struct {
			Config    *ocispec.Descriptor  `json:"config"`
			Layers    []ocispec.Descriptor `json:"layers"`
			Manifests []ocispec.Descriptor `json:"manifests"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return sandbox.Wrap(sandbox.KindInvalid, err, "an unreadable manifest in the image archive")
		}
		for _, c := range v.Manifests {
			if _, ok := small[c.Digest]; !ok {
				continue // another platform's, which the node did not keep
			}
			if err := put(c, c.Digest.String()); err != nil {
				return err
			}
		}
		blobs := v.Layers
		if v.Config != nil {
			blobs = append(blobs, *v.Config)
		}
		for _, b := range blobs {
			if err := s.mount(ctx, repo, b.Digest, from(b.Digest)); err != nil {
				return err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.url(repo, "manifests", as), bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", d.MediaType)
		res, err := s.do(req, http.StatusCreated)
		if err != nil {
			return err
		}
		res.Body.Close()
		return nil
	}
	return put(m, tag)
}

// mount makes repo have blob d, mounted from the first repository of
// from that has it (a cross-repository mount). A registry that cannot
// mount it answers with an upload session instead (202), which is
// cancelled.
func (s *Store) mount(ctx context.Context, repo string, d digest.Digest, from []string) error {
	if ok, err := s.hasBlob(ctx, repo, d); err != nil || ok {
		return err
	}
	if len(from) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "the image archive lacks blob %s and names no repository of registry %s it came from", d, s.host)
	}
	for _, src := range from {
		u := s.scheme + "://" + s.host + "/v2/" + repo + "/blobs/uploads/?mount=" + url.QueryEscape(d.String()) + "&from=" + url.QueryEscape(src)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
		if err != nil {
			return err
		}
		res, err := s.hc.Do(req)
		if err != nil {
			return sandbox.Wrap(sandbox.KindUnavailable, err, "the registry "+s.host+" does not answer")
		}
		res.Body.Close()
		if res.StatusCode == http.StatusCreated {
			return nil
		}
		if loc, err := res.Location(); err == nil && res.StatusCode == http.StatusAccepted {
			s.cancelUpload(ctx, loc.String())
		}
	}
	return sandbox.Errorf(sandbox.KindUnavailable, "the registry %s did not mount blob %s into %s from %s", s.host, d, repo, strings.Join(from, " or "))
}

// cancelUpload ends the upload session at loc, which a mount that failed
// opened; the registry purges sessions left behind anyway.
func (s *Store) cancelUpload(ctx context.Context, loc string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc, nil)
	if err != nil {
		return
	}
	if res, err := s.hc.Do(req); err == nil {
		res.Body.Close()
	}
}

// hasBlob reports whether repo has blob d.
func (s *Store) hasBlob(ctx context.Context, repo string, d digest.Digest) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.url(repo, "blobs", d.String()), nil)
	if err != nil {
		return false, err
	}
	res, err := s.do(req, http.StatusOK)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	res.Body.Close()
	return true, nil
}

// upload puts blob d of size bytes from body into repo, unless it has it.
func (s *Store) upload(ctx context.Context, repo string, d digest.Digest, size int64, body io.Reader) error {
	if ok, err := s.hasBlob(ctx, repo, d); err != nil || ok {
		if ok {
			_, err = io.Copy(io.Discard, body)
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.scheme+"://"+s.host+"/v2/"+repo+"/blobs/uploads/", nil)
	if err != nil {
		return err
	}
	res, err := s.do(req, http.StatusAccepted)
	if err != nil {
		return err
	}
	res.Body.Close()
	loc, err := res.Location()
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "the registry "+s.host+" opened an upload without a location")
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if res, err = s.do(req, http.StatusCreated); err != nil {
		return fmt.Errorf("uploading blob %s: %w", d, err)
	}
	res.Body.Close()
	return nil
}
