package users

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolvePath checks what callers rely on for any input: a NUL byte is
// refused, everything else becomes a clean absolute path (".." is resolved
// lexically, never refused), and resolving again changes nothing.
func FuzzResolvePath(f *testing.F) {
	for _, seed := range [][3]string{
		{"hello.txt", "", "/home/user"},
		{"~/a/../../etc/passwd", "", "/home/user"},
		{"", "~/work", "/home/user"},
		{"", "", "/"},
		{"/abs//x/./y/", "/w", "/root"},
		{"~user/x", "rel", "/home/user"},
		{"a\x00b", "", "/home/user"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, p, workdir, home string) {
		if strings.ContainsRune(home, 0) {
			t.Skip("homes come from the account database and hold no NUL")
		}
		u := &User{Name: "user", Home: filepath.Join("/", home)}
		got, err := u.ResolvePath(p, workdir)
		effective := p
		if p == "" {
			effective = workdir
		}
		if strings.ContainsRune(effective, 0) {
			if err == nil {
				t.Fatalf("ResolvePath(%q, %q) = %q, want an error for the NUL byte", p, workdir, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("ResolvePath(%q, %q): %v", p, workdir, err)
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("ResolvePath(%q, %q) = %q, want a clean absolute path", p, workdir, got)
		}
		if again, err := u.ResolvePath(got, ""); err != nil || again != got {
			t.Fatalf("resolving %q again gave %q, %v", got, again, err)
		}
		if rest, ok := strings.CutPrefix(p, "~/"); ok && got != filepath.Join(u.Home, rest) {
			t.Fatalf("ResolvePath(%q) = %q, want it under home %q", p, got, u.Home)
		}
	})
}
