package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// fakeImages is an ImageStore in memory. A "tar" is the image's name on
// its first line; the pod uid has a container "main" running the image
// docker.io/library/base:latest.
type fakeImages struct {
	mu     sync.Mutex
	images map[string]Image
	calls  []string
}

func newFakeImages() *fakeImages {
	return &fakeImages{images: map[string]Image{
		"docker.io/library/base:latest": {Name: "docker.io/library/base:latest", ID: "sha256:" + strings.Repeat("b", 64), Size: 10, Labels: map[string]string{"a": "1"}},
	}}
}

func (f *fakeImages) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeImages) Import(_ context.Context, r io.Reader) ([]Image, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	name, _, _ := strings.Cut(string(b), "\n")
	if !isNormalName(name) {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "not an image archive")
	}
	f.record("import " + name)
	img := Image{Name: name, ID: "sha256:" + strings.Repeat("1", 64), Size: int64(len(b))}
	f.mu.Lock()
	f.images[name] = img
	f.mu.Unlock()
	return []Image{img}, nil
}

func (f *fakeImages) List(context.Context) ([]Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(maps.Values(f.images), func(a, b Image) int { return strings.Compare(a.Name, b.Name) }), nil
}

func (f *fakeImages) Get(_ context.Context, ref string) (Image, error) {
	f.record("get " + ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[ref]
	if !ok {
		return Image{}, sandbox.Errorf(sandbox.KindNotFound, "the node has no image %s", ref)
	}
	return img, nil
}

func (f *fakeImages) Remove(ctx context.Context, ref string) error {
	if _, err := f.Get(ctx, ref); err != nil {
		return err
	}
	f.record("remove " + ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, ref)
	return nil
}

func (f *fakeImages) Export(ctx context.Context, ref string, w io.Writer) error {
	if _, err := f.Get(ctx, ref); err != nil {
		return err
	}
	_, err := io.WriteString(w, ref+"\n")
	return err
}

func (f *fakeImages) Commit(_ context.Context, podUID, container, ref string, labels map[string]string) (Image, error) {
	if podUID != uid || container != "main" {
		return Image{}, sandbox.Errorf(sandbox.KindNotFound, "the node has no container %q of pod %s", container, podUID)
	}
	f.record(fmt.Sprintf("commit %s %s %s %v", podUID, container, ref, labels))
	img := Image{Name: ref, ID: "sha256:" + strings.Repeat("c", 64), Labels: map[string]string{"a": "1"}}
	maps.Copy(img.Labels, labels)
	f.mu.Lock()
	f.images[ref] = img
	f.mu.Unlock()
	return img, nil
}

func imageServer(t *testing.T) (*fakeImages, *httptest.Server) {
	t.Helper()
	srv := newTestServer(t)
	f := newFakeImages()
	srv.ServeImages(f)
	ts := tlsServer(t, srv)
	t.Cleanup(ts.Close)
	return f, ts
}

func TestNormalizeRef(t *testing.T) {
	for in, want := range map[string]string{
		"warren/base":                          "docker.io/warren/base:latest",
		"busybox":                              "docker.io/library/busybox:latest",
		"busybox:1.36":                         "docker.io/library/busybox:1.36",
		"docker.io/warren/base:latest":         "docker.io/warren/base:latest",
		"localhost/busybox:warren":             "localhost/busybox:warren",
		"registry.k8s.io/pause:3.10":           "registry.k8s.io/pause:3.10",
		"registry.example:5000/a/b/c:v1.2-rc3": "registry.example:5000/a/b/c:v1.2-rc3",
	} {
		got, err := NormalizeRef(in)
		if err != nil || got != want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", in, got, err, want)
		}
		if !isNormalName(want) {
			t.Errorf("%q is not taken for a normal name", want)
		}
	}
	hex := strings.Repeat("ab", 32)
	for _, bad := range []string{
		"", "sha256:" + hex, hex, "busybox@sha256:" + hex, "busybox:1@sha256:" + hex,
		"Warren/Base", "warren/base:", ":latest", "warren//base", "-x", "a b", "warren/base:la/test",
		"http://docker.io/warren/base", strings.Repeat("a", 600), "warren/base\n",
	} {
		if got, err := NormalizeRef(bad); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("NormalizeRef(%q) = %q, %v; want KindInvalid", bad, got, err)
		}
	}
	for _, notNormal := range []string{"warren/base", "sha256:" + hex, "docker.io/warren/base@sha256:" + hex} {
		if isNormalName(notNormal) {
			t.Errorf("%q taken for a normal name", notNormal)
		}
	}
}

func TestImageAPI(t *testing.T) {
	f, ts := imageServer(t)
	addr := strings.TrimPrefix(ts.URL, "https://")
	c := NewClient(token)
	ctx := t.Context()

	imgs, err := c.ImportImage(ctx, addr, strings.NewReader("docker.io/warren/t:v1\nlayers"))
	if err != nil || len(imgs) != 1 || imgs[0].Name != "docker.io/warren/t:v1" {
		t.Fatalf("ImportImage: %+v, %v", imgs, err)
	}
	if _, err := c.ImportImage(ctx, addr, strings.NewReader("no image")); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("importing what is not an archive: %v", err)
	}
	list, err := c.Images(ctx, addr)
	if err != nil || len(list) != 2 || list[1].Name != "docker.io/warren/t:v1" {
		t.Errorf("Images: %+v, %v", list, err)
	}
	// Names are normalized as the kubelet does.
	if img, err := c.Image(ctx, addr, "warren/t:v1"); err != nil || img.Name != "docker.io/warren/t:v1" {
		t.Errorf("Image: %+v, %v", img, err)
	}
	if _, err := c.Image(ctx, addr, "warren/t:v2"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("Image of a missing image: %v", err)
	}

	r, err := c.ExportImage(ctx, addr, "warren/t:v1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "docker.io/warren/t:v1\n" {
		t.Errorf("export: %q", b)
	}
	if _, err := c.ExportImage(ctx, addr, "warren/none"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("export of a missing image: %v", err)
	}

	img, err := c.Commit(ctx, addr, uid, "main", "warren/snap:s1", map[string]string{"dev.warren.snapshot": "s1"})
	if err != nil || img.Name != "docker.io/warren/snap:s1" || img.Labels["dev.warren.snapshot"] != "s1" || img.Labels["a"] != "1" {
		t.Errorf("Commit: %+v, %v", img, err)
	}
	if _, err := c.Commit(ctx, addr, uid, "other", "warren/snap:s2", nil); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("commit of a missing container: %v", err)
	}
	if _, err := c.Commit(ctx, addr, "11111111-2222-4333-8444-555555555555", "main", "warren/snap:s2", nil); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("commit of a missing pod: %v", err)
	}

	if err := c.RemoveImage(ctx, addr, "warren/t:v1"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveImage(ctx, addr, "warren/t:v1"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("a second removal: %v", err)
	}
	want := []string{
		"import docker.io/warren/t:v1", "get docker.io/warren/t:v1", "get docker.io/warren/t:v2",
		"get docker.io/warren/t:v1", "get docker.io/warren/none:latest",
		"commit " + uid + " main docker.io/warren/snap:s1 map[dev.warren.snapshot:s1]",
		"get docker.io/warren/t:v1", "remove docker.io/warren/t:v1", "get docker.io/warren/t:v1",
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestImageAPIRefusals: without the token nothing is done; bad refs,
// bodies and UIDs are 400s in Warren's error shape, and reach no store.
func TestImageAPIRefusals(t *testing.T) {
	f, ts := imageServer(t)
	hex := strings.Repeat("ab", 32)
	for name, c := range map[string]struct {
		method, path, body string
		auth               string
		want               int
	}{
		"import without token":   {http.MethodPost, "/v1/images", "docker.io/a/b:c\n", "", 401},
		"list with a wrong one":  {http.MethodGet, "/v1/images", "", strings.Repeat("y", 32), 401},
		"export without token":   {http.MethodGet, "/v1/image/export?ref=base", "", "", 401},
		"remove without token":   {http.MethodDelete, "/v1/image?ref=base", "", "", 401},
		"commit without token":   {http.MethodPost, "/v1/pods/" + uid + "/commit", `{"container":"main","ref":"x"}`, "", 401},
		"no ref":                 {http.MethodGet, "/v1/image", "", token, 400},
		"two refs":               {http.MethodGet, "/v1/image?ref=a&ref=b", "", token, 400},
		"an ID for a ref":        {http.MethodDelete, "/v1/image?ref=sha256:" + hex, "", token, 400},
		"a digest for a ref":     {http.MethodGet, "/v1/image/export?ref=" + url.QueryEscape("base@sha256:"+hex), "", token, 400},
		"bare hex for a ref":     {http.MethodGet, "/v1/image?ref=" + hex, "", token, 400},
		"uppercase ref":          {http.MethodGet, "/v1/image?ref=Base", "", token, 400},
		"commit not JSON":        {"", "", "{", token, 400},
		"commit unknown field":   {"", "", `{"container":"main","ref":"x","lables":{}}`, token, 400},
		"commit no container":    {"", "", `{"ref":"x"}`, token, 400},
		"commit bad container":   {"", "", `{"container":"../main","ref":"x"}`, token, 400},
		"commit digest ref":      {"", "", `{"container":"main","ref":"x@sha256:` + hex + `"}`, token, 400},
		"commit no ref":          {"", "", `{"container":"main"}`, token, 400},
		"commit empty label":     {"", "", `{"container":"main","ref":"x","labels":{"":"v"}}`, token, 400},
		"commit bad uid":         {http.MethodPost, "/v1/pods/..%2Fx/commit", `{"container":"main","ref":"x"}`, token, 400},
		"commit body too large":  {"", "", `{"container":"main","ref":"x","labels":{"k":"` + strings.Repeat("v", maxCommitBody) + `"}}`, token, 413},
		"commit of missing pod":  {http.MethodPost, "/v1/pods/11111111-2222-4333-8444-555555555555/commit", `{"container":"main","ref":"x"}`, token, 404},
		"missing image":          {http.MethodGet, "/v1/image?ref=none", "", token, 404},
		"missing image's export": {http.MethodGet, "/v1/image/export?ref=none", "", token, 404},
	} {
		t.Run(name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" { // a commit of the pod's container
				method, path = http.MethodPost, "/v1/pods/"+uid+"/commit"
			}
			req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(c.body))
			if c.auth != "" {
				req.Header.Set("Authorization", "Bearer "+c.auth)
			}
			res, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var e httpedge.Body
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode != c.want || e.Code != c.want || e.Message == "" {
				t.Errorf("%s %s: %d %+v (%v), want %d in Warren's error shape", method, path, res.StatusCode, e, err, c.want)
			}
		})
	}
	for _, call := range f.calls {
		if !strings.HasPrefix(call, "get docker.io/library/none:latest") {
			t.Errorf("a refused request reached the store: %s", call)
		}
	}
}

// FuzzImageAPI: whatever a caller with the token sends to the image API,
// the agent answers without panicking, in Warren's error shape when it
// refuses, and the store is only ever given normalized names.
func FuzzImageAPI(f *testing.F) {
	f.Add("GET", "/v1/image?ref=warren/base", "")
	f.Add("DELETE", "/v1/image?ref=docker.io/library/base:latest", "")
	f.Add("GET", "/v1/image/export?ref=base", "")
	f.Add("POST", "/v1/images", "docker.io/a/b:c\nx")
	f.Add("POST", "/v1/pods/"+uid+"/commit", `{"container":"main","ref":"warren/s:1","labels":{"k":"v"}}`)
	f.Add("POST", "/v1/pods/"+uid+"/commit", `{"container":"main","ref":"a@sha256:00"}`)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		cg, err := NewCgroups(v1Tree(t))
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := NewServer(cg, token, nil)
		st := newFakeImages()
		srv.ServeImages(st)
		req, err := http.NewRequest(method, "http://node"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 400 && rec.Code != 404 && rec.Code != 405 {
			var e httpedge.Body
			if err := json.NewDecoder(bytes.NewReader(rec.Body.Bytes())).Decode(&e); err != nil || e.Code != rec.Code {
				t.Errorf("%s %s: %d %q, not Warren's error shape", method, path, rec.Code, rec.Body.String())
			}
		}
		for _, call := range st.calls {
			fields := strings.Fields(call)
			ref := fields[1]
			if fields[0] == "commit" {
				ref = fields[3]
			}
			if !isNormalName(ref) {
				t.Errorf("the store was given %q", ref)
			}
		}
	})
}

// TestCommitConfig: a commit's config is the base's with one more layer
// and history entry, the labels merged, and what it does not know (Docker's
// fields) kept as it was.
func TestCommitConfig(t *testing.T) {
	base := `{"architecture":"amd64","os":"linux","docker_version":"20.10.24","container_config":{"Hostname":"x"},
		"config":{"Env":["PATH=/bin"],"Healthcheck":{"Test":["CMD","true"]},"Labels":{"a":"1","b":"2"}},
		"rootfs":{"type":"layers","diff_ids":["sha256:` + strings.Repeat("1", 64) + `"]},
		"history":[{"created":"2020-01-01T00:00:00Z","created_by":"COPY x"}]}`
	diffID := "sha256:" + strings.Repeat("2", 64)
	created, _ := time.Parse(time.RFC3339, "2026-12-02T06:00:00Z")
	b, err := commitConfig([]byte(base), digest.Digest(diffID), created, "warren commit", map[string]string{"b": "3", "c": "4"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		DockerVersion   string          `json:"docker_version"`
		ContainerConfig json.RawMessage `json:"container_config"`
		Created         time.Time       `json:"created"`
		Config          struct {
			Env         []string
			Healthcheck json.RawMessage
			Labels      map[string]string
		} `json:"config"`
		RootFS  ocispec.RootFS    `json:"rootfs"`
		History []ocispec.History `json:"history"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.DockerVersion != "20.10.24" || string(got.ContainerConfig) != `{"Hostname":"x"}` || string(got.Config.Healthcheck) != `{"Test":["CMD","true"]}` ||
		!slices.Equal(got.Config.Env, []string{"PATH=/bin"}) {
		t.Errorf("fields lost: %s", b)
	}
	if !maps.Equal(got.Config.Labels, map[string]string{"a": "1", "b": "3", "c": "4"}) {
		t.Errorf("labels %v", got.Config.Labels)
	}
	if len(got.RootFS.DiffIDs) != 2 || got.RootFS.DiffIDs[1].String() != diffID || len(got.History) != 2 ||
		got.History[1].CreatedBy != "warren commit" || !got.History[1].Created.Equal(created) || !got.Created.Equal(created) {
		t.Errorf("layers or history: %s", b)
	}
	// A config with no run config and no history (FROM scratch, by hand).
	b, err = commitConfig([]byte(`{"rootfs":{"type":"layers","diff_ids":[]}}`), digest.Digest(diffID), created, "warren commit", map[string]string{"k": "v"})
	if err != nil || !strings.Contains(string(b), `"Labels":{"k":"v"}`) {
		t.Errorf("minimal config: %s, %v", b, err)
	}
	if _, err := commitConfig([]byte(`[]`), digest.Digest(diffID), created, "x", nil); err == nil {
		t.Error("a config that is not an object extended")
	}
}

// FuzzCommitConfig: whatever config an imported image has, extending it
// fails cleanly or gives a config whose last layer is the commit's.
func FuzzCommitConfig(f *testing.F) {
	f.Add(`{"config":{"Labels":{"a":"1"}},"rootfs":{"type":"layers","diff_ids":[]},"history":[]}`)
	f.Add(`{"config":null,"history":null}`)
	f.Add(`{"config":{"Labels":null}}`)
	f.Add(`{"rootfs":{"diff_ids":"x"}}`)
	diffID := digest.Digest("sha256:" + strings.Repeat("2", 64))
	f.Fuzz(func(t *testing.T, base string) {
		b, err := commitConfig([]byte(base), diffID, time.Unix(0, 0), "x", map[string]string{"k": "v"})
		if err != nil {
			return
		}
		var got struct { // the fields it writes; the others are the base's
			Config struct{ Labels map[string]string } `json:"config"`
			RootFS ocispec.RootFS                     `json:"rootfs"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s gave %s: %v", base, b, err)
		}
		if n := len(got.RootFS.DiffIDs); n == 0 || got.RootFS.DiffIDs[n-1] != diffID || got.Config.Labels["k"] != "v" {
			t.Errorf("%s gave %s", base, b)
		}
	})
}
