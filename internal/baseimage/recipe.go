// Package baseimage builds warren/base, the default image sandboxes start from, without any
// container registry: debootstrap installs Debian into a directory, a script configures it in a
// chroot, and the tree is streamed into the Docker engine as an image import. Images layered on
// it (warren/code-interpreter, layer.go) are built by the engine's classic builder FROM the local
// base image, so they need no registry either.
//
// It owns the recipe (what goes into the image), finding a Debian mirror in the host's apt
// configuration, the download cache, and reusing an image built from the same recipe. It does not
// know about sandboxes, templates or the agent: any image can be a sandbox, this is just a good one.
package baseimage

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"runtime"
)

// RecipeLabel is the image label holding the recipe hash; an image carrying the hash of the
// current recipe is reused instead of rebuilt.
const RecipeLabel = "dev.warren.recipe"

//go:embed configure.sh
var configureScript string

// Recipe is everything that decides the image's content. The mirror is deliberately not part
// of it: the same packages from another mirror make the same image.
type Recipe struct {
	// Suite is the Debian release, e.g. "bookworm".
	Suite string
	// Variant is debootstrap's --variant, e.g. "minbase" (essential packages and apt only).
	Variant string
	// Arch is the Go architecture of the build host; debootstrap installs the host's architecture.
	Arch string
	// Packages are installed with apt on top of the variant, with their dependencies but not
	// their recommends.
	Packages []string
	// Configure is the shell script run in the chroot after installation.
	Configure string
	// Changes are Dockerfile instructions docker import applies to the image config.
	Changes []string
}

// DefaultRecipe is the recipe for warren/base: Debian bookworm with what agents expect to find
// (Python with pip and venv, also as `python`, Node with npm, git, curl, sudo) and E2B's user conventions.
// Locales are not installed: C.UTF-8 ships with libc6 since bookworm.
func DefaultRecipe() Recipe {
	return Recipe{
		Suite:   "bookworm",
		Variant: "minbase",
		Arch:    runtime.GOARCH,
		Packages: []string{
			"bash", "ca-certificates", "coreutils", "curl", "git", "iproute2", "less",
			"ncurses-bin", "nodejs", "npm", "procps", "python3", "python3-pip", "python3-venv",
			"python-is-python3", // `python`, as in E2B's base template
			"sudo", "unzip", "xz-utils",
		},
		Configure: configureScript,
		Changes: []string{
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV LANG=C.UTF-8",
			// So tput and curses programs work in commands run without a terminal too.
			"ENV TERM=xterm-256color",
			"WORKDIR /home/user",
			`CMD ["/bin/bash"]`,
		},
	}
}

// Hash identifies the recipe: equal recipes give equal hashes, any change gives another.
func (r Recipe) Hash() string {
	return shortHash(r)
}

// debsKey names the cached base system download: only what decides which .debs debootstrap fetches.
func (r Recipe) debsKey() string {
	return shortHash(struct{ Suite, Variant, Arch string }{r.Suite, r.Variant, r.Arch})
}

func shortHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only strings and slices of strings: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
