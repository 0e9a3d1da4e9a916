package template_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/warrenhq/warren/internal/sandbox"
)

// fakeEngine "builds" by reading the Dockerfile from the context and
// printing the engine's step lines; a RUN containing "exit N" (N > 0)
// fails the way Docker reports it. With gate set, every build waits for
// a value on it (or for its context to end). It has the images in
// images, by their full reference, and no other.
type fakeEngine struct {
	gate   chan struct{}
	images map[string]sandbox.Image

	mu      sync.Mutex // guards the fields below
	builds  int
	context map[string][]byte // files of the last build context
	headers map[string]*tar.Header
	removed []string
}

var exitRE = regexp.MustCompile(`exit (\d+)`)

func (f *fakeEngine) Build(ctx context.Context, contextTar io.Reader, tag string, noCache bool, out func(string)) error {
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(contextTar)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
		headers[h.Name] = h
	}
	f.mu.Lock()
	f.builds++
	f.context = files
	f.headers = headers
	f.mu.Unlock()
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	lines := strings.Split(strings.TrimSpace(string(files["Dockerfile"])), "\n")
	for i, l := range lines {
		out(fmt.Sprintf("Step %d/%d : %s", i+1, len(lines), l))
		if m := exitRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(l, "RUN") && m[1] != "0" {
			out("output before failing")
			return &sandbox.BuildFailure{Message: "The command returned a non-zero code: " + m[1]}
		}
		out(fmt.Sprintf(" ---> %012x", i+1)) // layer i+1
	}
	return nil
}

func (f *fakeEngine) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	if img, ok := f.images[ref]; ok {
		return img, nil
	}
	return sandbox.Image{}, sandbox.Errorf(sandbox.KindNotFound, "image %s not found", ref)
}

func (f *fakeEngine) ImageEnv(ctx context.Context, ref string) ([]string, error) { return nil, nil }

func (f *fakeEngine) RemoveLayer(ctx context.Context, id string) error {
	return f.RemoveImage(ctx, "layer "+id)
}

func (f *fakeEngine) RemoveImage(ctx context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, ref)
	return nil
}
