package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/sandbox"
)

func TestRepoAndName(t *testing.T) {
	s, err := New("127.0.0.1:15000/e2e", true)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"warren/base":                 "127.0.0.1:15000/e2e/warren/base:latest",
		"docker.io/warren/base:1":     "127.0.0.1:15000/e2e/warren/base:1",
		"warren-template/abc:b1":      "127.0.0.1:15000/e2e/warren-template/abc:b1",
		"python@sha256:" + hex64('a'): "127.0.0.1:15000/e2e/library/python@sha256:" + hex64('a'),
	} {
		if got, err := s.Name(ref); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:15000/", "Bad Name"} {
		if _, err := New(bad, true); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestPlainHTTP(t *testing.T) {
	for prefix, want := range map[string]bool{
		"127.0.0.1:15000/x": true, "10.246.1.1:15000": true, "localhost:5000": true,
		"registry.example.com/warren": false, "203.0.113.5:5000": false,
	} {
		if got := PlainHTTP(prefix); got != want {
			t.Errorf("PlainHTTP(%q) = %v, want %v", prefix, got, want)
		}
	}
}

func hex64(c byte) string { return string(bytes.Repeat([]byte{c}, 64)) }

// testRegistry is the test cluster's registry (scripts/kube.sh up), or
// WARREN_TEST_REGISTRY; the test skips without one.
func testRegistry(t *testing.T) string {
	addr := os.Getenv("WARREN_TEST_REGISTRY")
	if addr == "" {
		addr = "127.0.0.1:15000"
	}
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + addr + "/v2/")
	if err != nil {
		t.Skipf("no registry at %s (scripts/kube.sh up starts one; or set WARREN_TEST_REGISTRY): %v", addr, err)
	}
	res.Body.Close()
	return addr
}

// An image exported the way a node agent exports one (an OCI layout with
// its name in the index) is pushed, then read back, named by digest and
// removed.
func TestLoadInspectRemove(t *testing.T) {
	addr := testRegistry(t)
	var nonce [6]byte
	rand.Read(nonce[:])
	s, err := New(addr+"/go-test-"+hex.EncodeToString(nonce[:]), true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref := "warren/snapshot:s1"
	archive, configDigest := ociArchive(t, "docker.io/"+ref)
	if err := s.LoadImage(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	img, err := s.InspectImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.ID != configDigest.String() || img.Labels["dev.warren.test"] != "yes" {
		t.Errorf("image = %+v, want ID %s and its label", img, configDigest)
	}
	env, err := s.ImageEnv(ctx, ref)
	if diff := cmp.Diff([]string{"A=b"}, env); err != nil || diff != "" {
		t.Errorf("env (-want +got): %s %v", diff, err)
	}
	target, _ := s.Name(ref)
	pull, err := s.PushImage(ctx, ref, target)
	if err != nil || pull != img.RepoDigests[0] {
		t.Errorf("PushImage = %q, %v; want %q", pull, err, img.RepoDigests[0])
	}
	// A second tag of the same manifest, as a rebuild from the cache
	// makes: removing the first leaves it.
	archive2, _ := ociArchive(t, "docker.io/warren/snapshot:s2")
	if err := s.LoadImage(ctx, bytes.NewReader(archive2)); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ImageExists(ctx, "warren/snapshot:s2"); !ok || err != nil {
		t.Errorf("the other tag of the manifest: exists %v, %v", ok, err)
	}
	if ok, err := s.ImageExists(ctx, ref); ok || err != nil {
		t.Errorf("after the removal: exists %v, %v", ok, err)
	}
	if err := s.RemoveImage(ctx, ref); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("second removal: %v, want not found", err)
	}
}

// A commit on a pulled image, exported by a node that dropped the base's
// layers once unpacked, names the repository it was pulled from: the
// missing layer is mounted from there, and without a source the push
// fails saying which blob is missing.
func TestLoadImageMountsMissingLayers(t *testing.T) {
	addr := testRegistry(t)
	var nonce [6]byte
	rand.Read(nonce[:])
	prefix := "go-test-" + hex.EncodeToString(nonce[:])
	s, err := New(addr+"/"+prefix, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The base is pushed by another (BuildKit): not staged by this store.
	builder, err := New(addr+"/"+prefix+"-builder", true)
	if err != nil {
		t.Fatal(err)
	}
	baseLayer := tarOf(t, "base.txt", "base "+prefix)
	base, _ := ociArchiveOf(t, "docker.io/warren/base:latest", nil, baseLayer)
	if err := builder.LoadImage(ctx, bytes.NewReader(base)); err != nil {
		t.Fatal(err)
	}
	host, _, _ := strings.Cut(addr, ":")
	source := map[string]string{sourceAnnotation + host: "elsewhere/x," + prefix + "-builder/warren/base"}
	commit, cfg := ociArchiveOf(t, "docker.io/warren/snapshot:s1", source, baseLayer, tarOf(t, "new.txt", "new"))
	commit = withoutBlob(t, commit, digest.FromBytes(baseLayer))
	if err := s.LoadImage(ctx, bytes.NewReader(commit)); err != nil {
		t.Fatal(err)
	}
	img, err := s.InspectImage(ctx, "warren/snapshot:s1")
	if err != nil || img.ID != cfg.String() {
		t.Fatalf("the commit in the registry: %+v, %v; want ID %s", img, err, cfg)
	}
	res, err := http.Head("http://" + addr + "/v2/" + prefix + "/warren/snapshot/blobs/" + digest.FromBytes(baseLayer).String())
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("the base layer in the commit's repository: %v %v", res, err)
	}

	orphan, _ := ociArchiveOf(t, "docker.io/warren/snapshot:s2", nil, tarOf(t, "other.txt", "not pushed "+prefix), tarOf(t, "new.txt", "new"))
	orphan = withoutBlob(t, orphan, digest.FromBytes(tarOf(t, "other.txt", "not pushed "+prefix)))
	err = s.LoadImage(ctx, bytes.NewReader(orphan))
	if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(err.Error(), "names no repository") {
		t.Errorf("a missing layer without a source: %v, want invalid naming it", err)
	}
}

// ociArchive is an OCI layout of one image named name, one empty layer.
func ociArchive(t *testing.T, name string) ([]byte, digest.Digest) {
	var layer bytes.Buffer
	tar.NewWriter(&layer).Close()
	return ociArchiveOf(t, name, nil, layer.Bytes())
}

// ociArchiveOf is an OCI layout of one image named name of layers, its
// index entry annotated with annotations too.
func ociArchiveOf(t *testing.T, name string, annotations map[string]string, layers ...[]byte) ([]byte, digest.Digest) {
	t.Helper()
	var diffIDs []string
	var descs []ocispec.Descriptor
	for _, l := range layers {
		diffIDs = append(diffIDs, digest.FromBytes(l).String())
		descs = append(descs, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(l), Size: int64(len(l))})
	}
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"A=b"}, "Labels": map[string]string{"dev.warren.test": "yes"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}})
	man, _ := json.Marshal(ocispec.Manifest{Versioned: ocispecVersioned(), MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))},
		Layers: descs})
	ann := map[string]string{imageNameAnnotation: name}
	maps.Copy(ann, annotations)
	idx, _ := json.Marshal(ocispec.Index{Versioned: ocispecVersioned(), MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man)),
			Annotations: ann}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	put := func(name string, body []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write(body)
	}
	put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	for _, b := range append(slices.Clone(layers), cfg, man) {
		put("blobs/sha256/"+digest.FromBytes(b).Encoded(), b)
	}
	put("index.json", idx)
	tw.Close()
	return out.Bytes(), digest.FromBytes(cfg)
}

// tarOf is a layer of one file.
func tarOf(t *testing.T, name, content string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	tw.Write([]byte(content))
	tw.Close()
	return b.Bytes()
}

// withoutBlob is the archive without blob d, as a node that dropped it
// exports it.
func withoutBlob(t *testing.T, archive []byte, d digest.Digest) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		body, _ := io.ReadAll(tr)
		if h.Name == "blobs/sha256/"+d.Encoded() {
			continue
		}
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	return out.Bytes()
}

func ocispecVersioned() specs.Versioned { return specs.Versioned{SchemaVersion: 2} }
