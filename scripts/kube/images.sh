#!/usr/bin/env bash
# images.sh — the two images every node needs, written as docker-save archives
# without a registry or a Docker build:
#
#   registry.k8s.io/pause:3.10   the pod sandbox image (containerd's pinned sandbox
#                                image): only the static pause binary built by build.sh
#   localhost/busybox:warren     Debian's static busybox with relative applet links,
#                                for test pods (its wget crashes: use nc)
#
# Usage: images.sh OUTDIR   (writes OUTDIR/pause.tar and OUTDIR/busybox.tar)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=localhost/busybox:warren

# mkimage NAME:TAG ROOTFS OUT ENTRYPOINT CMD: a one-layer docker-save archive of ROOTFS;
# ENTRYPOINT and CMD are JSON arrays.
mkimage() {
	local ref=$1 rootfs=$2 out=$3 entrypoint=$4 cmd=$5 dir diff cfg
	dir=$(mktemp -d)
	# Reproducible: same files, same digest, so a re-import is a no-op.
	tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$dir/layer.tar" .
	diff=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
	mkdir "$dir/$diff"
	mv "$dir/layer.tar" "$dir/$diff/layer.tar"
	cat >"$dir/config.json" <<JSON
{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z",
 "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":$entrypoint,"Cmd":$cmd,"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["sha256:$diff"]},
 "history":[{"created":"1970-01-01T00:00:00Z","created_by":"scripts/kube/images.sh"}]}
JSON
	cfg=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
	mv "$dir/config.json" "$dir/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' "$cfg" "$ref" "$diff" >"$dir/manifest.json"
	tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out" manifest.json "$cfg.json" "$diff"
	rm -rf "$dir"
}

out=${1:?usage: images.sh OUTDIR}
mkdir -p "$out"
[ -x "$KUBE_BIN/pause" ] || kube_die "$KUBE_BIN/pause is missing: run scripts/kube.sh build"
[ -x /bin/busybox ] || kube_die "/bin/busybox is missing: apt-get install busybox-static"
/bin/busybox --list >/dev/null 2>&1 || kube_die "/bin/busybox does not run: apt-get install --reinstall busybox-static"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/pause"
cp "$KUBE_BIN/pause" "$work/pause/pause"
mkimage "$PAUSE_IMAGE" "$work/pause" "$out/pause.tar" '["/pause"]' 'null'

bb=$work/busybox
mkdir -p "$bb/bin" "$bb/etc" "$bb/tmp" "$bb/root" "$bb/proc" "$bb/sys" "$bb/dev"
chmod 1777 "$bb/tmp"
cp /bin/busybox "$bb/bin/busybox"
# Relative links: `busybox --install` would point them at the host's absolute path.
for applet in $(/bin/busybox --list); do
	[ "$applet" = busybox ] || ln -s busybox "$bb/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$bb/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$bb/etc/group"
mkimage "$BUSYBOX_IMAGE" "$bb" "$out/busybox.tar" 'null' '["sh"]'
