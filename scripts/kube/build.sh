#!/usr/bin/env bash
# build.sh — the test cluster's binaries, built from the Go module proxy and cached.
#
#   scripts/kube/build.sh [COMPONENT...]     kubernetes kube-proxy etcd containerd gvisor pause registry helm
#                                            buildkit (default: all)
#
# Each component is cached as $KUBE_CACHE/<component>-<version>-r<recipe>.tar.zst and unpacked
# into $KUBE_CACHE/bin. A cache hit restores in about a second; a miss builds (a cold
# Kubernetes takes 10+ minutes on 2 cores, everything ~16 minutes, 2.6 GB peak RSS) with a
# scratch GOCACHE and GOMODCACHE that the components built in one run share (kube-proxy then
# compiles only its own packages, not Kubernetes' libraries again) and that are deleted at its
# end (they grow to ~5 GB; only the binaries are worth keeping). Builds run under `nice -n 10`
# with `go build -p 1` (KUBE_BUILD_P to change) so they do not starve a shared machine.
#
# Bump a component's recipe number (the *_REV below) whenever its recipe changes, so stale
# caches are not restored.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

KUBERNETES_REV=1
KUBE_PROXY_REV=1
ETCD_REV=1
CONTAINERD_REV=1
GVISOR_REV=1
PAUSE_REV=1
REGISTRY_REV=1
HELM_REV=1
BUILDKIT_REV=1

P=${KUBE_BUILD_P:-1}

version_of() {
	case $1 in
	kubernetes) echo "$KUBE_VERSION-r$KUBERNETES_REV" ;;
	kube-proxy) echo "$KUBE_VERSION-r$KUBE_PROXY_REV" ;;
	etcd) echo "$ETCD_VERSION-r$ETCD_REV" ;;
	containerd) echo "$CONTAINERD_VERSION-r$CONTAINERD_REV" ;;
	gvisor) echo "$GVISOR_VERSION-r$GVISOR_REV" ;;
	# The pause binary is built from this repository's source: its hash is its version.
	pause) echo "$(sha256sum "$KUBE_SCRIPTS/pause/main.go" | cut -c1-12)-r$PAUSE_REV" ;;
	registry) echo "$DISTRIBUTION_VERSION-r$REGISTRY_REV" ;;
	helm) echo "$HELM_VERSION-r$HELM_REV" ;;
	buildkit) echo "$BUILDKIT_VERSION-r$BUILDKIT_REV" ;;
	*) kube_die "unknown component '$1' (known: kubernetes kube-proxy etcd containerd gvisor pause registry helm buildkit)" ;;
	esac
}

binaries_of() {
	case $1 in
	kubernetes) echo kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl ;;
	kube-proxy) echo kube-proxy ;;
	etcd) echo etcd ;;
	containerd) echo containerd containerd-shim-runc-v2 ctr ;;
	gvisor) echo runsc containerd-shim-runsc-v1 ;;
	pause) echo pause ;;
	registry) echo registry ;;
	helm) echo helm ;;
	buildkit) echo buildkitd ;;
	esac
}

# gobuild ARGS...: go, niced, with the run's own caches under $CACHES, static binaries,
# the local toolchain only.
gobuild() {
	nice -n 10 env GOCACHE="$CACHES/gocache" GOMODCACHE="$CACHES/gomod" GOFLAGS=-mod=mod \
		GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off go "$@"
}

# tidy: go mod tidy in the current directory, its download chatter kept in a log that is
# shown when it fails.
tidy() {
	gobuild mod tidy >"$SCRATCH/tidy.log" 2>&1 || {
		grep -v '^go: downloading' "$SCRATCH/tidy.log" | tail -n 30 >&2
		kube_die "go mod tidy failed in $PWD (above): check the network and GOPROXY ($(go env GOPROXY))"
	}
}

# scratch_module DIR MODULE VERSION IMPORT...: a throwaway module requiring MODULE@VERSION
# with a tools file importing the main packages to build, so `go mod tidy` resolves the
# graph the way the module's own go.mod says (go install refuses modules with replaces).
scratch_module() {
	local dir=$1 mod=$2 ver=$3 pkg
	shift 3
	mkdir -p "$dir"
	printf 'module warren.local/kubebuild\n\ngo 1.25\n\nrequire %s %s\n' "$mod" "$ver" >"$dir/go.mod"
	{
		printf '//go:build tools\n\npackage tools\n\nimport (\n'
		for pkg in "$@"; do printf '\t_ "%s"\n' "$pkg"; done
		printf ')\n'
	} >"$dir/tools.go"
}

# build_k8s COMPONENT: the commands of k8s.io/kubernetes that are COMPONENT's binaries.
build_k8s() {
	local dir=$SCRATCH/kubernetes gomod line pkgs=() b minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	for b in $(binaries_of "$1"); do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	scratch_module "$dir" k8s.io/kubernetes "$KUBE_VERSION" "${pkgs[@]}"
	kube_log "$1: downloading k8s.io/kubernetes@$KUBE_VERSION's go.mod"
	gomod=$(cd "$dir" && gobuild mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
	[ -f "$gomod" ] || kube_die "$1: could not download k8s.io/kubernetes@$KUBE_VERSION from the Go module proxy (check GOPROXY and the network)"
	# Kubernetes' go.mod points its k8s.io/* libraries at ./staging; the proxy has each as
	# its own module, tagged v0.<minor>.<patch>. Modules without tags are skipped.
	local staging_ver=v0.${KUBE_VERSION#v1.}
	while read -r line; do
		case $line in
		k8s.io/sample-cli-plugin* | k8s.io/sample-controller*) continue ;;
		esac
		echo "replace $line => $line $staging_ver" >>"$dir/go.mod"
	done < <(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod")
	grep -q '^replace k8s.io/api ' "$dir/go.mod" ||
		kube_die "$1: found no staging replaces in $gomod: the recipe no longer matches this Kubernetes version"
	kube_log "$1: resolving the module graph ($(grep -c '^replace' "$dir/go.mod") staging modules; ~600 MB download)"
	(cd "$dir" && with_heartbeat "resolving kubernetes modules" tidy)
	local x=k8s.io/component-base/version c=k8s.io/client-go/pkg/version flags="-s -w" v
	for v in "$x" "$c"; do
		flags+=" -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor"
		flags+=" -X $v.gitTreeState=clean -X $v.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	done
	kube_log "$1: compiling ${pkgs[*]##*/}"
	(cd "$dir" && with_heartbeat "compiling ${pkgs[*]##*/}" gobuild build -p "$P" -trimpath -ldflags "$flags" -o "$OUT/" "${pkgs[@]}")
}

# The control plane and kubelet (cold: ~11 min on 2 cores).
build_kubernetes() { build_k8s kubernetes; }

# kube-proxy is a component of its own so that adding it to a machine whose cache holds the
# other Kubernetes binaries builds only it (cold: ~6.5 min on 2 shared cores, 1.6 GB RSS).
build_kube-proxy() { build_k8s kube-proxy; }

build_etcd() {
	local dir=$SCRATCH/etcd
	scratch_module "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3
	kube_log "etcd: resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
	(cd "$dir" && tidy)
	kube_log "etcd: compiling (~1.5 min)"
	(cd "$dir" && with_heartbeat "compiling etcd" gobuild build -p "$P" -trimpath \
		-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" -o "$OUT/etcd" go.etcd.io/etcd/server/v3)
}

build_containerd() {
	local dir=$SCRATCH/containerd m=github.com/containerd/containerd/v2
	scratch_module "$dir" "$m" "$CONTAINERD_VERSION" "$m/cmd/containerd" "$m/cmd/containerd-shim-runc-v2" "$m/cmd/ctr"
	kube_log "containerd: resolving $m@$CONTAINERD_VERSION"
	(cd "$dir" && tidy)
	kube_log "containerd: compiling containerd, containerd-shim-runc-v2, ctr (~1.5 min)"
	(cd "$dir" && with_heartbeat "compiling containerd" gobuild build -p "$P" -trimpath \
		-ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION -X $m/version.Revision=$CONTAINERD_VERSION" \
		-o "$OUT/" "$m/cmd/containerd" "$m/cmd/containerd-shim-runc-v2" "$m/cmd/ctr")
}

build_gvisor() {
	local src=$SCRATCH/gvisor-src dl f=pkg/shim/v1/manager.go
	kube_log "gvisor: downloading gvisor.dev/gvisor@$GVISOR_VERSION"
	dl=$(cd "$SCRATCH" && gobuild mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -d "$dl" ] || kube_die "gvisor: could not download gvisor.dev/gvisor@$GVISOR_VERSION from the Go module proxy"
	cp -r "$dl" "$src"
	chmod -R u+w "$src"
	# The shim lowers its own OOM score to -999, which needs CAP_SYS_RESOURCE; this machine
	# (and many CI containers) lack it, and the shim then fails with "failed to set OOM Score
	# on shim: ... permission denied". 0 only needs to leave the score as it is.
	grep -q 'oomScoreMax = -999' "$src/$f" ||
		kube_die "gvisor: $f no longer has 'oomScoreMax = -999': update the recipe's patch for $GVISOR_VERSION"
	sed -i 's/oomScoreMax = -999/oomScoreMax = 0/' "$src/$f"
	kube_log "gvisor: compiling runsc and containerd-shim-runsc-v1 (~3.5 min)"
	(cd "$src" && with_heartbeat "compiling gvisor" gobuild build -p "$P" -trimpath -ldflags "-s -w" -o "$OUT/runsc" ./runsc)
	(cd "$src" && with_heartbeat "compiling the gvisor shim" gobuild build -p "$P" -trimpath -ldflags "-s -w" -o "$OUT/containerd-shim-runsc-v1" ./shim)
}

build_registry() {
	local dir=$SCRATCH/registry m=github.com/distribution/distribution/v3
	scratch_module "$dir" "$m" "$DISTRIBUTION_VERSION" "$m/cmd/registry"
	kube_log "registry: resolving $m@$DISTRIBUTION_VERSION"
	(cd "$dir" && tidy)
	kube_log "registry: compiling CNCF Distribution's registry (~3 min)"
	(cd "$dir" && with_heartbeat "compiling the registry" gobuild build -p "$P" -trimpath \
		-ldflags "-s -w -X $m/version.version=$DISTRIBUTION_VERSION" -o "$OUT/registry" "$m/cmd/registry")
}

# helm: the client that lints, renders and installs deploy/helm/warren (scripts/kube.sh deploy).
build_helm() {
	local dir=$SCRATCH/helm m=helm.sh/helm/v4
	scratch_module "$dir" "$m" "$HELM_VERSION" "$m/cmd/helm"
	kube_log "helm: resolving $m@$HELM_VERSION"
	(cd "$dir" && tidy)
	kube_log "helm: compiling (~3 min)"
	(cd "$dir" && with_heartbeat "compiling helm" gobuild build -p "$P" -trimpath \
		-ldflags "-s -w -X $m/internal/version.version=$HELM_VERSION" -o "$OUT/helm" "$m/cmd/helm")
}

# build_buildkit: BuildKit's daemon, which builds Warren's templates in the cluster (its runc is
# Debian's, with seccomp: scripts/kube/buildkit.sh).
build_buildkit() {
	local dir=$SCRATCH/buildkit m=github.com/moby/buildkit
	scratch_module "$dir" "$m" "$BUILDKIT_VERSION" "$m/cmd/buildkitd"
	kube_log "buildkit: resolving $m@$BUILDKIT_VERSION"
	(cd "$dir" && tidy)
	kube_log "buildkit: compiling buildkitd (~5 min on 2 free cores; 33 min at load 30)"
	(cd "$dir" && with_heartbeat "compiling buildkitd" gobuild build -p "$P" -trimpath \
		-ldflags "-s -w -X $m/version.Version=$BUILDKIT_VERSION" -o "$OUT/buildkitd" "$m/cmd/buildkitd")
}

build_pause() {
	kube_log "pause: compiling the pod sandbox's pause process"
	(cd "$KUBE_SCRIPTS/pause" && gobuild build -trimpath -ldflags "-s -w" -o "$OUT/pause" .)
}

# finish RC: the exit trap: says which build failed, removes the scratch directories (module
# cache files are read-only).
finish() {
	[ "$1" = 0 ] || [ -z "$building" ] || kube_log "ERROR: building $building failed (output above); fix the cause and run scripts/kube.sh build $building again"
	local d
	for d in "$SCRATCH" "$CACHES"; do
		[ -n "$d" ] || continue
		chmod -R u+w "$d" 2>/dev/null
		rm -rf "$d"
	done
}
SCRATCH= CACHES= building=
trap 'finish $?' EXIT

# ensure COMPONENT: unpacks the cached build, or builds and caches it.
ensure() {
	local comp=$1 key tarball stamp start b
	key=$comp-$(version_of "$comp")
	tarball=$KUBE_CACHE/$key.tar.zst
	stamp=$KUBE_BIN/.$comp
	# One build per component at a time; different components may build side by side.
	exec 9>"$KUBE_CACHE/.lock-$comp"
	flock -n 9 || {
		kube_log "$comp: another build holds $KUBE_CACHE/.lock-$comp; waiting for it"
		flock 9
	}
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
		for b in $(binaries_of "$comp"); do [ -x "$KUBE_BIN/$b" ] || rm -f "$stamp"; done
		[ -f "$stamp" ] && { kube_log "$comp: $key is in $KUBE_BIN"; return; }
	fi
	mkdir -p "$KUBE_BIN"
	if [ ! -f "$tarball" ]; then
		start=$SECONDS
		kube_log "$comp: no cache at $tarball: building $key"
		[ -n "$CACHES" ] || CACHES=$(mktemp -d "$KUBE_CACHE/build-caches.XXXXXX")
		SCRATCH=$(mktemp -d "$KUBE_CACHE/build-$comp.XXXXXX")
		OUT=$SCRATCH/out
		mkdir -p "$OUT"
		building=$comp
		"build_$comp"
		for b in $(binaries_of "$comp"); do
			[ -x "$OUT/$b" ] || kube_die "$comp: the build did not produce $b"
		done
		# shellcheck disable=SC2046 # a list of names
		tar -C "$OUT" -cf - $(binaries_of "$comp") | zstd -q -3 -T1 -o "$tarball.tmp"
		mv "$tarball.tmp" "$tarball"
		chmod -R u+w "$SCRATCH"
		rm -rf "$SCRATCH"
		SCRATCH= building=
		kube_log "$comp: built and cached in $((SECONDS - start))s ($(du -h "$tarball" | cut -f1) at $tarball)"
	fi
	start=$SECONDS
	zstd -q -d -c "$tarball" | tar -C "$KUBE_BIN" -xf - ||
		kube_die "$comp: $tarball is unreadable: delete it and run this again to rebuild"
	echo "$key" >"$stamp"
	kube_log "$comp: restored $key from the cache in $((SECONDS - start))s"
}

command -v go >/dev/null || kube_die "go is not installed: the cluster's binaries are built from the Go module proxy (install Go 1.25 or newer)"
command -v zstd >/dev/null || kube_die "zstd is missing: apt-get install zstd"
mkdir -p "$KUBE_CACHE"
[ $# -gt 0 ] || set -- kubernetes kube-proxy etcd containerd gvisor pause registry helm buildkit
for comp in "$@"; do ensure "$comp"; done
