package nodeagent

import (
	"strings"

	"github.com/distribution/reference"

	"github.com/warrenhq/warren/internal/sandbox"
)

// maxRefLen bounds an image name: the registry grammar allows 255
// characters for the repository, plus a domain and a tag.
const maxRefLen = 512

// NormalizeRef returns the name the kubelet gives ref ("warren/base" is
// "docker.io/warren/base:latest"), which is the name of the image in the
// node's containerd. Digests ("name@sha256:..."), image IDs ("sha256:...",
// or their 64 hex digits) and malformed names are refused (KindInvalid):
// the image API names images, so that an image it writes has a name the
// kubelet can run it by.
func NormalizeRef(ref string) (string, error) {
	if ref == "" {
		return "", sandbox.Errorf(sandbox.KindInvalid, "an image name is required (ref, such as warren/base or docker.io/warren/base:latest)")
	}
	if len(ref) > maxRefLen {
		return "", sandbox.Errorf(sandbox.KindInvalid, "the image name is longer than %d characters", maxRefLen)
	}
	if strings.HasPrefix(ref, "sha256:") || strings.Contains(ref, "@") {
		return "", sandbox.Errorf(sandbox.KindInvalid, "%q is a digest or an image ID: name the image (NAME[:TAG])", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", sandbox.Errorf(sandbox.KindInvalid, "%q is not an image name (NAME[:TAG], lowercase): %v", ref, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// isNormalName reports whether name is an image name as NormalizeRef
// returns it: the names the image API lists, as opposed to the IDs and
// digests the kubelet's CRI adds beside them.
func isNormalName(name string) bool {
	n, err := NormalizeRef(name)
	return err == nil && n == name
}
