#!/usr/bin/env bash
# bench/burst/kube.sh: the Docker engine and the Kubernetes engine side by side (engines.mjs).
#   bench/burst/kube.sh [--baseline DIR] [--only sequential,bursts,template] [--n 20]
#                       [--sizes 10,50] [--pause 20] [--json] [--out FILE] [--serve-arg=...]
#                       [--kube-arg=...]
# On the cluster of scripts/kube.sh up: test/e2e/kube-run.sh sets it up (its lock, so one run
# at a time on the cluster; the node agents on this worktree's warren/node; the control plane's
# service account) and runs the benchmark with its servers' environment, then cleans up.
# --baseline DIR (a bin/ of other binaries: warren, warren-agent) runs it first on those, then
# on the worktree's, under the same hold of the lock: before and after (--out FILE: FILE.before
# and FILE). Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../test/e2e/npm-deps.sh"
if [ "${1:-}" = --baseline ]; then
  base=$(cd "$2" && pwd)
  shift 2
  prev=
  for a in "$@"; do
    [ "$prev" = --out ] && export BENCH_BEFORE_OUT="$a.before"
    prev=$a
  done
  exec "$here/../../test/e2e/kube-run.sh" --exec bash -c 'node "$0" --bin "$1" "${@:2}" ${BENCH_BEFORE_OUT:+--out "$BENCH_BEFORE_OUT"}; b=$?; node "$0" "${@:2}"; a=$?; exit $((a | b))' \
    "$here/engines.mjs" "$base" "$@"
fi
exec "$here/../../test/e2e/kube-run.sh" --exec node "$here/engines.mjs" "$@"
