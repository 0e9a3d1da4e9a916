package template

import (
	"crypto/rand"
	"strings"

	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/sandbox"
)

// maxNameLen bounds names and tags, as E2B does.
const maxNameLen = 128

// validName reports whether s may be a template name or tag: lowercase
// letters and digits, then also '.', '_' and '-'. Names end up in image
// references and host names, hence the narrow alphabet.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ParseRef splits "name:tag" into name and tag, DefaultTag when none is
// given, and validates both.
func ParseRef(ref string) (name, tag string, err error) {
	name, tag, hasTag := strings.Cut(ref, ":")
	if !hasTag {
		tag = DefaultTag
	}
	if !validName(name) {
		return "", "", sandbox.Errorf(sandbox.KindInvalid,
			"invalid template name '%s': use 1 to %d lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", name, maxNameLen)
	}
	if !validName(tag) {
		return "", "", sandbox.Errorf(sandbox.KindInvalid,
			"invalid tag '%s': use 1 to %d lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", tag, maxNameLen)
	}
	return name, tag, nil
}

// checkTags validates tags.
func checkTags(tags []string) error {
	for _, t := range tags {
		if !validName(t) {
			return sandbox.Errorf(sandbox.KindInvalid,
				"invalid tag '%s': use 1 to %d lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", t, maxNameLen)
		}
	}
	return nil
}

// NewTemplateID returns a fresh template ID: "t" and 19 lowercase letters
// or digits, the shape of E2B's template IDs.
func NewTemplateID() string { return "t" + strings.ToLower(rand.Text()[:19]) }

// NewBuildID returns a fresh build ID (a UUID, as E2B's).
func NewBuildID() string { return uuid.NewString() }

// validID reports whether s has the shape of a template or build ID, so
// that it can go into an image reference or a file name.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
