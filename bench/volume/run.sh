#!/usr/bin/env bash
# bench/volume/run.sh: content-API throughput of a volume with curl, and its create time.
#   bench/volume/run.sh [--mb N] [--limit-mb L]
# Starts its own `warren serve` (firewall off, private state dir, free port; with --limit-mb,
# --volume-size-mb L, so the volume is its own loop-mounted ext4 filesystem), creates a volume
# (timed), PUTs and GETs an N MB file (default 100) through /volumecontent with the volume's
# token, prints MB/s for each, and removes the server's state afterwards.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$here/../.."
mb=100 limit=()
while [ $# -gt 0 ]; do
  case "$1" in
  --mb) mb="$2"; shift 2 ;;
  --limit-mb) limit=(--volume-size-mb "$2"); shift 2 ;;
  *) echo "usage: $0 [--mb N] [--limit-mb L]" >&2; exit 2 ;;
  esac
done
tmp="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
key="e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')"
url="http://127.0.0.1:$port"
WARREN_API_KEY="$key" "$repo/bin/warren" serve --addr "127.0.0.1:$port" --state-dir "$tmp/state" \
  --firewall off --instance "bench-vol-$port" --network "warren-bench-vol-$port" "${limit[@]}" >"$tmp/server.log" 2>&1 &
pid=$!
# A limited volume's filesystem stays mounted after its server (sandboxes outlive it).
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; docker network rm "warren-bench-vol-$port" >/dev/null 2>&1
  awk -v p="$tmp/" '"'"'index($2, p) == 1 {print $2}'"'"' /proc/self/mounts | xargs -r -n1 umount -l; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do curl -sf "$url/health" >/dev/null && break; sleep 0.1; done
t0=$(date +%s%N)
vol="$(curl -sf -X POST -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"name":"bench"}' "$url/volumes")"
created_ms=$((($(date +%s%N) - t0) / 1000000))
id="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["volumeID"])' "$vol")"
tok="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$vol")"
head -c "$((mb * 1024 * 1024))" /dev/urandom >"$tmp/data"
put="$(curl -sf -o /dev/null -w '%{time_total}' -X PUT -H "Authorization: Bearer $tok" \
  -H 'Content-Type: application/octet-stream' --data-binary @"$tmp/data" "$url/volumecontent/$id/file?path=/data&force=true")"
get="$(curl -sf -o "$tmp/back" -w '%{time_total}' -H "Authorization: Bearer $tok" "$url/volumecontent/$id/file?path=/data")"
cmp -s "$tmp/data" "$tmp/back" || { echo "read back differs" >&2; exit 1; }
python3 - "$mb" "$put" "$get" "$created_ms" "${limit[1]:-0}" <<'PY'
import sys
mb, put, get, created, limit = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
kind = f"its own {limit} MiB ext4 filesystem" if limit != "0" else "a plain directory"
print(f"volume ({kind}) created in {created} ms")
print(f"volume content API, {mb} MiB with curl: write {mb/put:.0f} MiB/s ({put:.2f} s), read {mb/get:.0f} MiB/s ({get:.2f} s)")
PY
