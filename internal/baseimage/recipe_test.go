package baseimage

import (
	"slices"
	"strings"
	"testing"
)

func TestRecipeHash(t *testing.T) {
	base := DefaultRecipe()
	if got, again := base.Hash(), DefaultRecipe().Hash(); got != again {
		t.Fatalf("Hash is not stable: %s then %s", got, again)
	}
	if len(base.Hash()) != 16 {
		t.Errorf("Hash %q: want 16 hex digits", base.Hash())
	}
	changes := map[string]func(r *Recipe){
		"suite":     func(r *Recipe) { r.Suite = "trixie" },
		"variant":   func(r *Recipe) { r.Variant = "buildd" },
		"arch":      func(r *Recipe) { r.Arch = "riscv64" },
		"packages":  func(r *Recipe) { r.Packages = append(slices.Clone(r.Packages), "vim") },
		"configure": func(r *Recipe) { r.Configure += "\ntrue\n" },
		"changes":   func(r *Recipe) { r.Changes = append(slices.Clone(r.Changes), "USER user") },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			r := DefaultRecipe()
			change(&r)
			if r.Hash() == base.Hash() {
				t.Errorf("changing the %s left the hash at %s", name, base.Hash())
			}
		})
	}
}

func TestDebsKey(t *testing.T) {
	r := DefaultRecipe()
	r.Configure += "\necho changed\n"
	r.Changes = nil
	r.Packages = append(slices.Clone(r.Packages), "vim") // installed by apt, not in the base system
	if r.debsKey() != DefaultRecipe().debsKey() {
		t.Error("changing packages, the configure script or image changes must not invalidate the downloaded base system")
	}
	r.Suite = "trixie"
	if r.debsKey() == DefaultRecipe().debsKey() {
		t.Error("changing the suite must change the base system's cache key")
	}
}

func TestDefaultRecipe(t *testing.T) {
	r := DefaultRecipe()
	for _, want := range []string{"python3", "python-is-python3", "python3-pip", "python3-venv", "nodejs", "npm", "git", "curl", "sudo", "ncurses-bin", "ca-certificates"} {
		if !slices.Contains(r.Packages, want) {
			t.Errorf("packages lack %s", want)
		}
	}
	for _, c := range r.Changes {
		if strings.HasPrefix(c, "USER") {
			t.Errorf("image sets %q: the agent must start as root", c)
		}
	}
	if !strings.Contains(r.Configure, "useradd --uid 1000") {
		t.Error("configure script does not create user 1000")
	}
}
