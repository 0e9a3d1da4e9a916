package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCrossTeamTemplateByImage: a team cannot create a sandbox from, or
// build on, another team's snapshot or private template through the image
// behind it: not by an image ID prefix, a whole ID or the image's name. A
// local image by its full reference still works.
func TestCrossTeamTemplateByImage(t *testing.T) {
	a, _ := newTemplateAPI(t)
	ctx := context.Background()
	a.rt.Rebuild("python:3.12")
	// Team "other" snapshots a sandbox and builds a private template.
	var src sandboxJSON
	r := a.doKey(t, a.otherKey, "POST", "/v2/sandboxes", map[string]any{"templateID": "base"})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r.decode(t, &src)
	var snap snapshotJSON
	r = a.doKey(t, a.otherKey, "POST", "/sandboxes/"+src.SandboxID+"/snapshots", map[string]any{"name": "theirs"})
	if r.status != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", r.status, r.body)
	}
	r.decode(t, &snap)
	snaps, err := a.m.Snapshots(ctx, "other", "", "")
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots of other: %v %v", snaps, err)
	}
	snapImage := snaps[0].Image
	a.key, a.otherKey = a.otherKey, a.key
	a.build(t, "private", map[string]any{"fromImage": "warren/base"})
	a.key, a.otherKey = a.otherKey, a.key
	var tplImage string
	for _, im := range a.rt.Images() {
		if strings.HasPrefix(im, "warren-template/") {
			tplImage = im
		}
	}
	a.rt.Tag(snapImage, "mirror:1") // the operator named it plainly
	var refs []string
	for _, im := range []string{snapImage, tplImage} {
		id, ok := a.rt.ImageIDOf(im)
		if !ok {
			t.Fatalf("image %s is not on the engine", im)
		}
		hex := strings.TrimPrefix(id, "sha256:")
		for n := 2; n <= 12; n++ {
			if got, ok := a.rt.ImageIDOf(hex[:n]); ok && got == id {
				refs = append(refs, hex[:n]) // the shortest prefix the engine takes for it
				break
			}
		}
		refs = append(refs, hex[:12], id, hex, im, "docker.io/"+im)
	}
	refs = append(refs, "mirror:1", snap.SnapshotID, "theirs", "private")
	for _, ref := range refs {
		r := a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": ref})
		if r.status != http.StatusNotFound && r.status != http.StatusBadRequest {
			t.Errorf("create from %q: %d %s, want 404 or 400", ref, r.status, r.body)
			continue
		}
		wantError(t, "create from "+ref, r, r.status)
	}
	r = a.do(t, "POST", "/v3/templates", map[string]any{"name": "thief"})
	var req struct{ TemplateID, BuildID string }
	r.decode(t, &req)
	for _, ref := range []string{"mirror:1", snapImage, "sha256:" + strings.Repeat("ab", 32)} {
		wantAnswer(t, "build from "+ref, a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID,
			map[string]any{"fromImage": ref}), http.StatusBadRequest, "fromImage")
	}
	r = a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "python:3.12"})
	if r.status != http.StatusCreated {
		t.Errorf("create from local image python:3.12: %d %s", r.status, r.body)
	}
}

// TestTemplateMaxima: a template build asking for more CPUs or memory than
// the server's maxima is refused with 400 naming the limit, on every
// build API, and makes no template; the maxima themselves are accepted.
func TestTemplateMaxima(t *testing.T) {
	a, _ := newTemplateAPI(t)
	mc := a.m.Settings()
	dockerfile := "FROM warren/base\nRUN true\n"
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		limit      string
	}{
		{"v3 audit", "/v3/templates", map[string]any{"name": "big", "cpuCount": 100000, "memoryMB": 99999999}, "--max-cpu-count"},
		{"v3 cpu", "/v3/templates", map[string]any{"name": "big", "cpuCount": mc.MaxCPUCount + 1}, "--max-cpu-count"},
		{"v3 memory", "/v3/templates", map[string]any{"name": "big", "memoryMB": mc.MaxMemoryMB + 1}, "--max-memory-mb"},
		{"v2 memory", "/v2/templates", map[string]any{"alias": "big", "memoryMB": 99999999}, "--max-memory-mb"},
		{"v1 cpu", "/templates", map[string]any{"alias": "big", "dockerfile": dockerfile, "cpuCount": 100000}, "--max-cpu-count"},
	} {
		wantAnswer(t, tc.name, a.do(t, "POST", tc.path, tc.body), http.StatusBadRequest, tc.limit)
	}
	wantError(t, "the refused template", a.do(t, "GET", "/templates/big", nil), http.StatusNotFound)

	r := a.do(t, "POST", "/v3/templates", map[string]any{"name": "max", "cpuCount": mc.MaxCPUCount, "memoryMB": mc.MaxMemoryMB})
	if r.status != http.StatusAccepted {
		t.Fatalf("template at the maxima: %d %s", r.status, r.body)
	}
	var req struct{ TemplateID, BuildID string }
	r.decode(t, &req)
	if r := a.do(t, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, map[string]any{"fromImage": "warren/base"}); r.status != http.StatusAccepted {
		t.Fatalf("start build: %d %s", r.status, r.body)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r = a.do(t, "POST", "/v2/sandboxes", map[string]any{"templateID": "max"}); r.status == http.StatusCreated {
			break
		}
	}
	var sb sandboxJSON
	r.decode(t, &sb)
	var got listedSandboxJSON
	a.do(t, "GET", "/sandboxes/"+sb.SandboxID, nil).decode(t, &got)
	if got.CPUCount != mc.MaxCPUCount || got.MemoryMB != mc.MaxMemoryMB {
		t.Errorf("sandbox of the template has %d CPUs, %d MiB; want %d, %d", got.CPUCount, got.MemoryMB, mc.MaxCPUCount, mc.MaxMemoryMB)
	}
}
