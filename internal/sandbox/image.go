package sandbox

import (
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// Image is an image as the engine describes it.
type Image struct {
	ID string // "sha256:" and 64 hex digits
	// RepoTags are the references that name it ("python:3.12"), in any
	// form ParseImageRef reads.
	RepoTags []string
	// RepoDigests are its "name@sha256:…" references, which only images
	// pulled from or pushed to a registry have.
	RepoDigests []string
	Labels      map[string]string
}

// BuildFailure is an image build the engine ran and that failed: a
// command that exited non-zero, a missing file, an image it could not
// pull. Message is the engine's account of it, for the build's log.
type BuildFailure struct{ Message string }

func (e *BuildFailure) Error() string { return e.Message }

// ParseImageRef parses a client's reference to a local image: a name with
// a tag or a digest, or neither (":latest" then). It returns it in full
// ("docker.io/library/python:3.12", a tag dropped when a digest is given),
// the form the engine can only resolve by name: a bare "39" is also an
// image ID prefix to the engine, "docker.io/library/39:latest" is not. An
// image ID, whole or "sha256:"-prefixed, is no reference: KindInvalid.
func ParseImageRef(ref string) (reference.Named, error) {
	if strings.HasPrefix(ref, "sha256:") {
		return nil, Errorf(KindInvalid, "'%s' is an image ID: name a local image by its reference (name:tag or name@sha256:digest)", ref)
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return nil, Errorf(KindInvalid, "invalid image reference '%s': %v", ref, err)
	}
	return named, nil
}

// NamedBy reports whether ref, from ParseImageRef, is one of the image's
// own references: what tells an image the client named from one the
// engine found by ID prefix.
func (img Image) NamedBy(ref reference.Named) bool {
	for _, r := range slices.Concat(img.RepoTags, img.RepoDigests) {
		if n, err := reference.ParseDockerRef(r); err == nil && n.String() == ref.String() {
			return true
		}
	}
	return false
}

// Warrens reports whether img is an image Warren made for a snapshot, a
// fork or a template, which a team reaches only by that snapshot's or
// template's ID or name: one with a reference in Warren's repositories
// (OwnImage), or labelled with a team (a committed sandbox keeps its
// container's LabelTeam), whatever other name it was given.
func (img Image) Warrens() bool {
	if img.Labels[LabelTeam] != "" {
		return true
	}
	for _, r := range slices.Concat(img.RepoTags, img.RepoDigests) {
		if n, err := reference.ParseNormalizedNamed(r); err == nil && OwnImage(reference.FamiliarName(n)) {
			return true
		}
	}
	return false
}
