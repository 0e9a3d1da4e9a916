package sandbox

import (
	"strings"
	"testing"
)

func TestParseImageRef(t *testing.T) {
	id := strings.Repeat("39", 32)
	for _, tc := range []struct{ ref, want string }{
		{"python:3.12", "docker.io/library/python:3.12"},
		{"python", "docker.io/library/python:latest"},
		{"39", "docker.io/library/39:latest"},
		{"localhost:5000/a/b:1", "localhost:5000/a/b:1"},
		{"busybox:1@sha256:" + id, "docker.io/library/busybox@sha256:" + id},
		{"sha256:" + id, ""},
		{"sha256:39", ""},
		{id, ""},
		{"Upper", ""},
		{"", ""},
	} {
		n, err := ParseImageRef(tc.ref)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseImageRef(%q) = %s, want an error", tc.ref, n)
		case tc.want == "" && KindOf(err) != KindInvalid:
			t.Errorf("ParseImageRef(%q): %v, want KindInvalid", tc.ref, err)
		case tc.want != "" && (err != nil || n.String() != tc.want):
			t.Errorf("ParseImageRef(%q) = %v, %v; want %s", tc.ref, n, err, tc.want)
		}
	}
}

func TestImageNamedByAndWarrens(t *testing.T) {
	ref := func(s string) string { n, _ := ParseImageRef(s); return n.String() }
	python := Image{ID: "sha256:" + strings.Repeat("ab", 32), RepoTags: []string{"python:3.12"}, RepoDigests: []string{"python@sha256:" + strings.Repeat("cd", 32)}}
	for _, tc := range []struct {
		img  Image
		ref  string
		want bool
	}{
		{python, "python:3.12", true},
		{python, "docker.io/library/python:3.12", true},
		{python, "python@sha256:" + strings.Repeat("cd", 32), true},
		{python, "python", false},
		{python, "ab", false}, // an ID prefix is no name
		{Image{ID: python.ID}, "ab", false},
	} {
		n, err := ParseImageRef(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.img.NamedBy(n); got != tc.want {
			t.Errorf("%v.NamedBy(%s) = %v, want %v", tc.img.RepoTags, ref(tc.ref), got, tc.want)
		}
	}
	for _, tc := range []struct {
		img  Image
		want bool
	}{
		{python, false},
		{Image{RepoTags: []string{"mirror:1", "warren/snapshot:s1"}}, true},
		{Image{RepoTags: []string{"docker.io/warren-template/t1:b1"}}, true},
		{Image{RepoTags: []string{"stolen:1"}, Labels: map[string]string{LabelTeam: "b"}}, true},
		{Image{RepoTags: []string{"plain:1"}, Labels: map[string]string{LabelTeam: "", LabelRuntime: "gvisor"}}, false},
	} {
		if got := tc.img.Warrens(); got != tc.want {
			t.Errorf("%+v.Warrens() = %v, want %v", tc.img, got, tc.want)
		}
	}
}

// FuzzParseImageRef: what ParseImageRef accepts comes out in a form the
// engine can only resolve by name (a domain and a tag or digest, never
// bare hex), reads back the same, and names an image with that reference
// but no image it would only match by ID.
func FuzzParseImageRef(f *testing.F) {
	for _, s := range []string{"python:3.12", "39", "sha256:39", strings.Repeat("a", 64), "a/b/c:d@sha256:" + strings.Repeat("e", 64),
		"localhost:5000/x", "[::1]:5000/x:y", "warren/snapshot:s1", "docker.io/library/x", "x@sha256:ab"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseImageRef(s)
		if err != nil {
			if KindOf(err) != KindInvalid {
				t.Fatalf("ParseImageRef(%q): %v, want KindInvalid", s, err)
			}
			return
		}
		full := n.String()
		if !strings.Contains(full, "/") || !strings.ContainsAny(full, ":@") {
			t.Fatalf("ParseImageRef(%q) = %q: not a full reference", s, full)
		}
		if strings.HasPrefix(s, "sha256:") {
			t.Fatalf("ParseImageRef(%q) accepted an image ID", s)
		}
		again, err := ParseImageRef(full)
		if err != nil || again.String() != full {
			t.Fatalf("ParseImageRef(%q) = %v, %v; want %s again", full, again, err, full)
		}
		if !(Image{RepoTags: []string{s}}).NamedBy(n) && !(Image{RepoDigests: []string{s}}).NamedBy(n) {
			t.Fatalf("an image with reference %q is not named by it", s)
		}
		hex := strings.Repeat("0", 64)
		if (Image{ID: "sha256:" + hex}).NamedBy(n) {
			t.Fatalf("an image with no reference is named by %q", s)
		}
	})
}
