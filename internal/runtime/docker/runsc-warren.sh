#!/bin/sh
# runsc-warren.sh — runsc as Warren's gVisor engine runs it: `warren runtime setup gvisor` and
# scripts/setup-gvisor.sh install a copy naming the real runsc (RUNSC below) and register it as the
# engine's runtime, with the marker argument --warren-image-refs first, by which Warren knows it may
# hand restores over by reference (internal/runtime/docker/runsc.go).
#
# Restore by reference: a checkpoint directory that holds a file named warren-image is restored
# from the directory that file names. Docker 20.10 starts a container from a checkpoint by taring
# the checkpoint's directory into containerd's content store, which unpacks it again into a
# temporary directory for runsc: three copies of a memory image of hundreds of MiB before runsc
# reads a byte. Warren's memory images are files on the engine's host already, so its restores hand
# over a directory holding only their path, and runsc reads the image in place. Every other
# command and argument is passed to runsc unchanged.
set -eu
RUNSC=/usr/local/lib/warren/runsc
[ "${1:-}" = --warren-image-refs ] && shift
# in_place DIR: the directory DIR refers to, or DIR. A reference containerd unpacked into a
# temporary directory of its own (ctrd-checkpoint*) is removed once read: containerd never removes
# those, one a restore, and runsc is given the image itself.
in_place() {
	if [ -f "$1/warren-image" ]; then
		cat "$1/warren-image"
		case ${1##*/} in ctrd-checkpoint*) rm -rf "$1" ;; esac
	else
		printf '%s' "$1"
	fi
}
n=$#
next=
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	n=$((n - 1))
	if [ -n "$next" ]; then
		next=
		a=$(in_place "$a")
	else
		case $a in
		--image-path | -image-path) next=1 ;;
		--image-path=* | -image-path=*) a=${a%%=*}=$(in_place "${a#*=}") ;;
		esac
	fi
	set -- "$@" "$a"
done
exec "$RUNSC" "$@"
