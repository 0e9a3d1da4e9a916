package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
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

// ociArchive is an OCI layout of one image named name, one empty layer.
func ociArchive(t *testing.T, name string) ([]byte, digest.Digest) {
	var layer bytes.Buffer
	tar.NewWriter(&layer).Close()
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"A=b"}, "Labels": map[string]string{"dev.warren.test": "yes"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest.FromBytes(layer.Bytes()).String()}}})
	man, _ := json.Marshal(ocispec.Manifest{Versioned: ocispecVersioned(), MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(layer.Bytes()), Size: int64(layer.Len())}}})
	idx, _ := json.Marshal(ocispec.Index{Versioned: ocispecVersioned(), MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man)),
			Annotations: map[string]string{imageNameAnnotation: name}}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"blobs/sha256/" + digest.FromBytes(layer.Bytes()).Encoded(), layer.Bytes()},
		{"blobs/sha256/" + digest.FromBytes(cfg).Encoded(), cfg},
		{"blobs/sha256/" + digest.FromBytes(man).Encoded(), man},
		{"index.json", idx},
	} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		tw.Write(f.body)
	}
	tw.Close()
	return out.Bytes(), digest.FromBytes(cfg)
}

func ocispecVersioned() specs.Versioned { return specs.Versioned{SchemaVersion: 2} }
