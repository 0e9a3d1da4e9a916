package template

import (
	"strings"
	"testing"
)

// FuzzParseRef: a template reference that parses is a name and a tag of
// the narrow alphabet (they go into image references and host names),
// the default tag when none is given, and reads back the same.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"name", "name:tag", "a:b:c", ":tag", "name:", "Up:per", "a/b:c", "x@sha256:ab", "39", "..", "a.b_c-d:v1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		name, tag, err := ParseRef(ref)
		if err != nil {
			return
		}
		for _, s := range []string{name, tag} {
			if !validName(s) || strings.ContainsAny(s, ":/@ ") || strings.ToLower(s) != s {
				t.Fatalf("ParseRef(%q) = %q, %q: %q is no valid name", ref, name, tag, s)
			}
		}
		if !strings.Contains(ref, ":") && tag != DefaultTag {
			t.Fatalf("ParseRef(%q) tag %q, want %q", ref, tag, DefaultTag)
		}
		n2, t2, err := ParseRef(name + ":" + tag)
		if err != nil || n2 != name || t2 != tag {
			t.Fatalf("ParseRef(%q) = %q, %q, %v; want %q, %q", name+":"+tag, n2, t2, err, name, tag)
		}
	})
}
