package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Commit saves a container's filesystem as the image ref and returns ref.
// The container is paused while it is copied. The agent is a bind mount, so
// it is not part of the image. The settings Warren imposed on the container
// are turned back into the source image's: its entrypoint, command and user,
// the agent secret blanked, Warren's labels emptied. One is left: when the
// source image has no entrypoint the engine keeps the agent's (an empty
// ENTRYPOINT is not a change to it); Warren always sets its own, so only a
// plain `docker run` of the snapshot notices.
func (r *Runtime) Commit(ctx context.Context, id, ref string) (string, error) {
	if ref == "" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "a snapshot needs an image reference")
	}
	ci, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", classify(err, "cannot inspect the sandbox's container")
	}
	img, err := r.cli.ImageInspect(ctx, ci.Container.Image)
	if err != nil {
		return "", classify(err, "cannot inspect the sandbox's image")
	}
	var entrypoint, cmd []string
	var user string
	if c := img.Config; c != nil {
		entrypoint, cmd, user = c.Entrypoint, c.Cmd, c.User
	}
	changes := []string{
		"CMD " + jsonArray(cmd),
		"ENV WARREN_AGENT_SECRET=",
		fmt.Sprintf("LABEL %s= %s= %s=", sandbox.LabelManaged, sandbox.LabelSandbox, sandbox.LabelPool),
	}
	if strings.HasPrefix(ref, sandbox.ForkRepo+":") {
		changes = append(changes, fmt.Sprintf("LABEL %s=%s", sandbox.LabelFork, r.cfg.Instance))
	}
	if len(entrypoint) > 0 {
		changes = append(changes, "ENTRYPOINT "+jsonArray(entrypoint))
	}
	if user != "" {
		changes = append(changes, "USER "+user)
	}
	defer r.imagesChanged()
	_, err = r.cli.ContainerCommit(ctx, id, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "warren snapshot of " + ci.Container.Name,
		Changes:   changes,
	})
	if err != nil {
		return "", classify(err, "cannot snapshot the sandbox")
	}
	return ref, nil
}

// jsonArray renders a Dockerfile exec-form argument list.
func jsonArray(args []string) string {
	if args == nil {
		args = []string{}
	}
	b, _ := json.Marshal(args) // []string always marshals
	return string(b)
}

// RemoveImage removes an image reference. An image still used by a
// container is a conflict.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	defer r.imagesChanged()
	return removeImage(ctx, r.cli, ref)
}

// removeImage removes an image reference and, with the image, its untagged
// parents no other image uses.
func removeImage(ctx context.Context, cli *client.Client, ref string) error {
	_, err := cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	return classify(err, "cannot remove the image")
}

// SaveImage streams the image ref names, with its name, as the tar
// `docker save` writes: how the Kubernetes engine brings images built here
// to its nodes. The caller closes it.
func (r *Runtime) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	rc, err := r.cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, classify(err, "cannot export the image")
	}
	return rc, nil
}

// LoadImage loads the images of a tar as SaveImage writes it (`docker
// load`): how the Kubernetes engine brings a snapshot committed on a node
// here, where templates are built on it.
func (r *Runtime) LoadImage(ctx context.Context, tar io.Reader) error {
	defer r.imagesChanged()
	res, err := r.cli.ImageLoad(ctx, tar, client.ImageLoadWithQuiet(true))
	if err != nil {
		return classify(err, "cannot load the image")
	}
	defer res.Close()
	// The engine reports a failure in the stream, after its 200.
	var msg struct {
		Error string `json:"error"`
	}
	dec := json.NewDecoder(res)
	for dec.Decode(&msg) == nil {
		if msg.Error != "" {
			return sandbox.Errorf(sandbox.KindInternal, "cannot load the image: %s", msg.Error)
		}
	}
	return nil
}

// PushImage pushes the image ref names to a registry as target (a name
// with a tag, in the registry's host) and returns target's name by digest,
// which names that very image however the tag moves later: how the
// Kubernetes engine's nodes pull an image built here. The push is
// anonymous (a registry of the cluster's own, or one that takes pushes
// from this host). target's tag is removed from the engine afterwards, so
// removing ref removes the image.
func (r *Runtime) PushImage(ctx context.Context, ref, target string) (string, error) {
	named, err := reference.ParseNormalizedNamed(target)
	if err != nil {
		return "", sandbox.Errorf(sandbox.KindInvalid, "cannot push image %s to %q: %v", ref, target, err)
	}
	if _, err := r.cli.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: target}); err != nil {
		return "", classify(err, "cannot tag the image for the registry")
	}
	defer func() {
		// An untag only: the image stays under ref.
		_, _ = r.cli.ImageRemove(context.WithoutCancel(ctx), target, client.ImageRemoveOptions{})
	}()
	anonymous := base64.URLEncoding.EncodeToString([]byte("{}"))
	res, err := r.cli.ImagePush(ctx, target, client.ImagePushOptions{RegistryAuth: anonymous})
	if err != nil {
		return "", classify(err, "cannot push the image to "+reference.Domain(named))
	}
	defer res.Close()
	// The engine reports the push's failure, and its digest, in the stream
	// after its 200.
	var digest string
	for msg, err := range res.JSONMessages(ctx) {
		if err != nil {
			return "", sandbox.Wrap(sandbox.KindUnavailable, err, "pushing image "+ref+" to "+target)
		}
		if msg.Error != nil {
			return "", sandbox.Errorf(sandbox.KindUnavailable, "cannot push image %s to %s: %s (can the Docker engine reach the registry? an http registry other than on 127.0.0.0/8 must be in its insecure-registries)",
				ref, target, msg.Error.Message)
		}
		var aux struct{ Digest string }
		if msg.Aux != nil && json.Unmarshal(*msg.Aux, &aux) == nil && aux.Digest != "" {
			digest = aux.Digest
		}
	}
	if digest == "" {
		return "", sandbox.Errorf(sandbox.KindUnavailable, "pushing image %s to %s: the engine reported no digest", ref, target)
	}
	return reference.TrimNamed(named).String() + "@" + digest, nil
}

// ImageExists reports whether an image is present on the engine.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := r.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, classify(err, "cannot inspect the image")
	}
}

// ImageLabels returns the labels of the image ref names.
func (r *Runtime) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	res, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, classify(err, "cannot inspect the image")
	}
	if res.Config == nil {
		return nil, nil
	}
	return res.Config.Labels, nil
}

// InspectImage implements sandbox.Runtime.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (sandbox.Image, error) {
	return inspectImage(ctx, r.cli, ref)
}

func inspectImage(ctx context.Context, cli *client.Client, ref string) (sandbox.Image, error) {
	res, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return sandbox.Image{}, classify(err, "cannot inspect the image")
	}
	img := sandbox.Image{ID: res.ID, RepoTags: res.RepoTags, RepoDigests: res.RepoDigests}
	if res.Config != nil {
		img.Labels = res.Config.Labels
	}
	return img, nil
}

// ForkImages returns the references of this server's fork images: those
// of repository sandbox.ForkRepo that Commit labelled with its instance.
func (r *Runtime) ForkImages(ctx context.Context) ([]string, error) {
	filters := client.Filters{}.Add("reference", sandbox.ForkRepo).Add("label", sandbox.LabelFork+"="+r.cfg.Instance)
	res, err := r.cli.ImageList(ctx, client.ImageListOptions{Filters: filters})
	if err != nil {
		return nil, classify(err, "cannot list images")
	}
	var out []string
	for _, img := range res.Items {
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, sandbox.ForkRepo+":") {
				out = append(out, tag)
			}
		}
	}
	return out, nil
}
