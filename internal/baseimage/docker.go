package baseimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

func (b *Builder) pingDocker(ctx context.Context) error { return ping(ctx, b.docker) }

func ping(ctx context.Context, docker *client.Client) error {
	_, err := docker.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return fmt.Errorf("cannot reach the Docker engine at %s: %w; start it (scripts/ensure-docker.sh installs and starts Debian's docker.io; "+
			"or systemctl start docker, or dockerd &) or point DOCKER_HOST at one", docker.DaemonHost(), err)
	}
	return nil
}

func (b *Builder) reuse(ctx context.Context, hash string) (Result, bool, error) {
	return reuse(ctx, b.docker, b.out, b.cfg.Tag, hash)
}

// reuse tags and reports an existing image built from the recipe with this hash, if any.
func reuse(ctx context.Context, docker *client.Client, out *progress, tag, hash string) (Result, bool, error) {
	list, err := docker.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", RecipeLabel+"="+hash),
	})
	if err != nil {
		return Result{}, false, fmt.Errorf("list images: %w", err)
	}
	if len(list.Items) == 0 {
		out.step("no image from recipe %s yet: building", hash)
		return Result{}, false, nil
	}
	res := Result{Tag: tag, Recipe: hash, Reused: true}
	for _, img := range list.Items {
		if slices.Contains(img.RepoTags, tag) {
			res.ImageID = img.ID
			out.step("%s (%s) is already built from recipe %s: nothing to do (--force rebuilds)", tag, shortID(img.ID), hash)
			return res, true, nil
		}
	}
	res.ImageID = list.Items[0].ID
	if _, err := docker.ImageTag(ctx, client.ImageTagOptions{Source: res.ImageID, Target: tag}); err != nil {
		return Result{}, false, fmt.Errorf("tag %s as %s: %w", shortID(res.ImageID), tag, err)
	}
	out.step("image %s is already built from recipe %s: tagged it %s (--force rebuilds)", shortID(res.ImageID), hash, tag)
	return res, true, nil
}

// importRootfs streams dir as a tar into the engine (docker import) under the configured tag,
// then removes the image the tag named before, unless containers still use it.
func (b *Builder) importRootfs(ctx context.Context, dir, hash string) (string, error) {
	previous := ""
	if img, err := b.docker.ImageInspect(ctx, b.cfg.Tag); err == nil {
		previous = img.ID
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect %s: %w", b.cfg.Tag, err)
	}

	b.out.step("importing into the Docker engine as %s", b.cfg.Tag)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// GNU tar keeps hard links, xattrs (file capabilities) and numeric owners; /dev, /proc and
	// /sys are provided by the engine at run time.
	tar := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*",
		"--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "-C", dir, "-cf", "-", ".")
	var tarErr bytes.Buffer
	tar.Stderr = &tarErr
	stdout, err := tar.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("run tar: %w", err)
	}
	if err := tar.Start(); err != nil {
		return "", fmt.Errorf("run tar: %w", err)
	}
	counted := &countingReader{r: stdout}
	id, importErr := b.sendImport(ctx, counted, hash)
	if importErr != nil {
		cancel() // tar may be blocked writing to a pipe nobody reads
	}
	if err := tar.Wait(); err != nil && importErr == nil {
		return "", fmt.Errorf("tar %s: %w: %s", dir, err, strings.TrimSpace(tarErr.String()))
	}
	if importErr != nil {
		return "", importErr
	}
	b.out.step("imported %d MB as %s", counted.n.Load()>>20, shortID(id))

	if previous != "" && previous != id {
		if _, err := b.docker.ImageRemove(ctx, previous, client.ImageRemoveOptions{}); err != nil {
			b.out.step("kept the previous %s (%s): %v", b.cfg.Tag, shortID(previous), err)
		} else {
			b.out.step("removed the previous %s (%s)", b.cfg.Tag, shortID(previous))
		}
	}
	return id, nil
}

// sendImport posts the tar and reads the engine's JSON message stream, whose last status is
// the new image's ID.
func (b *Builder) sendImport(ctx context.Context, tar io.Reader, hash string) (string, error) {
	opts := client.ImageImportOptions{
		Message: "warren image build",
		Changes: append(slices.Clone(b.recipe.Changes), "LABEL "+RecipeLabel+"="+hash),
	}
	resp, err := b.docker.ImageImport(ctx, client.ImageImportSource{Source: tar, SourceName: "-"}, b.cfg.Tag, opts)
	if err != nil {
		return "", fmt.Errorf("docker import: %w", err)
	}
	defer resp.Close()
	id := ""
	dec := json.NewDecoder(resp)
	for {
		var msg jsonstream.Message
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("docker import: read the engine's answer: %w", err)
		}
		if msg.Error != nil {
			return "", fmt.Errorf("docker import: %s", msg.Error.Message)
		}
		if strings.HasPrefix(msg.Status, "sha256:") {
			id = strings.TrimSpace(msg.Status)
		}
	}
	if id == "" {
		return "", errors.New("docker import: the engine answered without an image ID; check its log")
	}
	return id, nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// shortID is an image ID as docker images shows it.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
