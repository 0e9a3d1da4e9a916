#!/usr/bin/env bash
# debug-sandbox.sh: run warren-agent inside a warren/base container, reachable the way the
# e2b SDK expects in debug mode (E2B_DEBUG=true => http://localhost:49983).
#
#   debug-sandbox.sh start [--name NAME] [--port PORT] [--token TOKEN] [--publish P]... [--no-publish]
#   debug-sandbox.sh stop  [--name NAME | --port PORT | --all]
#   debug-sandbox.sh status [--port PORT]
#
# start  builds bin/warren-agent (static) and the image warren/base when missing, starts a
#        container with the agent bind-mounted read-only as its entrypoint, publishes the agent
#        port on 127.0.0.1:PORT (default 49983) and, for the default sandbox, 127.0.0.1:8000
#        (sandbox.getHost(8000) in debug mode), waits for GET /health = 204, then POST /init
#        with defaultUser "user" and defaultWorkdir "/home/user" (plus accessToken with --token).
#        Running it again while the sandbox is healthy does nothing.
# stop   removes the sandbox recorded for PORT (or NAME, or every debug sandbox with --all).
#
# The container sits on a bridge network without IP masquerading and without DNS, so it can be
# reached from the host through its published ports but cannot reach the internet.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
state_dir="$here/.state"
image="${WARREN_BASE_IMAGE:-warren/base}"
agent_bin="$root/bin/warren-agent"
agent_in_container="/.warren/warren-agent"
network="warren-e2e-isolated"
label="warren.e2e.debug-sandbox"

say() { printf 'debug-sandbox: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd="${1:-}"
[ -n "$cmd" ] || usage
shift

name="" port=49983 token="" all=false no_publish=false
publish=()
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name="${2:?--name needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --token) token="${2:?--token needs a value}"; shift 2 ;;
    --publish) publish+=("${2:?--publish needs a value}"); shift 2 ;;
    --no-publish) no_publish=true; shift ;;
    --all) all=true; shift ;;
    -h|--help) usage ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$port" =~ ^[0-9]+$ ]] || die "--port must be a number, got '$port'"
if [ ${#publish[@]} -eq 0 ] && ! $no_publish && [ "$port" = 49983 ]; then
  publish=(8000)
fi
$no_publish && publish=()

state_file="$state_dir/sandbox-$port"

docker_ok() {
  command -v docker >/dev/null || die "docker is not installed"
  docker info >/dev/null 2>&1 || die "cannot talk to the Docker engine (is dockerd running?)"
}

container_running() { # name
  [ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null || true)" = true ]
}

health() { # port -> http status of GET /health
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null || true
}

build_agent() {
  say "building the agent: CGO_ENABLED=0 go build -o bin/warren-agent ./cmd/warren-agent"
  (cd "$root" && CGO_ENABLED=0 go build -o bin/warren-agent ./cmd/warren-agent) \
    || die "building cmd/warren-agent failed"
}

ensure_image() {
  if [ -n "$(docker images -q "$image" 2>/dev/null)" ]; then
    return
  fi
  [ "$image" = warren/base ] || die "image $image does not exist"
  say "image warren/base is missing; building it: go run ./cmd/warren image build"
  (cd "$root" && go run ./cmd/warren image build) || die "building the image warren/base failed"
  [ -n "$(docker images -q "$image")" ] || die "image build finished but $image does not exist"
}

ensure_network() {
  if ! docker network inspect "$network" >/dev/null 2>&1; then
    say "creating network $network (no IP masquerading: no way out to the internet)"
    docker network create --driver bridge \
      --opt com.docker.network.bridge.enable_ip_masquerade=false \
      --label "$label=1" "$network" >/dev/null
  fi
}

init_body() {
  if [ -n "$token" ]; then
    printf '{"defaultUser":"user","defaultWorkdir":"/home/user","accessToken":"%s"}' "$token"
  else
    printf '{"defaultUser":"user","defaultWorkdir":"/home/user"}'
  fi
}

start() {
  docker_ok
  mkdir -p "$state_dir"
  if [ -f "$state_file" ]; then
    local old
    old="$(cat "$state_file")"
    if container_running "$old" && [ "$(health "$port")" = 204 ]; then
      say "already running: $old on 127.0.0.1:$port"
      echo "$old"
      return
    fi
    say "removing stale sandbox $old"
    docker rm -f "$old" >/dev/null 2>&1 || true
    rm -f "$state_file"
  fi
  if [ -z "$name" ]; then
    name="warren-e2e-debug-$port-$(date +%s)-$RANDOM"
  elif docker inspect "$name" >/dev/null 2>&1; then
    die "a container named $name already exists (debug-sandbox.sh stop --name $name)"
  fi
  local code
  code="$(health "$port")"
  if [ "$code" != 000 ]; then
    die "something already answers on 127.0.0.1:$port (GET /health => $code); stop it first"
  fi

  build_agent
  ensure_image
  ensure_network

  local args=(run -d --name "$name" --label "$label=1" --label "$label.port=$port"
    --network "$network" --dns 127.0.0.1 --hostname warren-debug
    -v "$agent_bin:$agent_in_container:ro" --entrypoint "$agent_in_container"
    -p "127.0.0.1:$port:49983")
  local p
  for p in "${publish[@]}"; do args+=(-p "127.0.0.1:$p:$p"); done
  # WARREN_E2E_DOCKER_RUNTIME: the engine runtime to run the sandbox under (e.g. runsc for gVisor).
  [ -n "${WARREN_E2E_DOCKER_RUNTIME:-}" ] && args+=(--runtime "$WARREN_E2E_DOCKER_RUNTIME")
  args+=("$image")
  # shellcheck disable=SC2206 # WARREN_AGENT_ARGS is a list of flags on purpose
  [ -n "${WARREN_AGENT_ARGS:-}" ] && args+=(${WARREN_AGENT_ARGS})

  say "starting $name from $image (agent on 127.0.0.1:$port${publish:+, also ${publish[*]}})"
  docker "${args[@]}" 2> >(grep -v "Localhost DNS" >&2) >/dev/null || die "docker run failed"
  echo "$name" >"$state_file"

  local i
  for i in $(seq 1 150); do
    code="$(health "$port")"
    [ "$code" = 204 ] && break
    if ! container_running "$name"; then
      say "the container exited; its log:"
      docker logs "$name" 2>&1 | tail -40 >&2
      docker rm -f "$name" >/dev/null 2>&1 || true
      rm -f "$state_file"
      die "agent did not start"
    fi
    sleep 0.1
  done
  if [ "$code" != 204 ]; then
    docker logs "$name" 2>&1 | tail -40 >&2
    die "GET /health on 127.0.0.1:$port answered '$code' after 15 s, want 204 (container $name left running for inspection; 'stop --port $port' removes it)"
  fi

  local out
  out="$(curl -s -w '\n%{http_code}' --max-time 10 -X POST -H 'Content-Type: application/json' \
    --data "$(init_body)" "http://127.0.0.1:$port/init")"
  code="${out##*$'\n'}"
  [ "$code" = 204 ] || die "POST /init answered $code, want 204: ${out%$'\n'*}"
  say "ready: $name on http://127.0.0.1:$port${token:+ (access token set)}"
  echo "$name"
}

stop_one() { # name
  if docker inspect "$1" >/dev/null 2>&1; then
    docker rm -f "$1" >/dev/null
    say "removed $1"
  else
    say "$1 is not running"
  fi
}

# drop_network removes the isolated network once no debug sandbox uses it.
drop_network() {
  if [ -z "$(docker ps -aq --filter "label=$label")" ]; then
    docker network rm "$network" >/dev/null 2>&1 || true
  fi
}

stop() {
  docker_ok
  if $all; then
    local ids
    ids="$(docker ps -aq --filter "label=$label")"
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      docker rm -f $ids >/dev/null && say "removed every debug sandbox"
    else
      say "no debug sandbox is running"
    fi
    rm -rf "$state_dir"
    return
  fi
  if [ -n "$name" ]; then
    stop_one "$name"
    local f
    for f in "$state_dir"/sandbox-*; do
      [ -f "$f" ] && [ "$(cat "$f")" = "$name" ] && rm -f "$f"
    done
    return 0
  fi
  if [ -f "$state_file" ]; then
    stop_one "$(cat "$state_file")"
    rm -f "$state_file"
  else
    say "no debug sandbox recorded for port $port"
  fi
}

status() {
  if [ -f "$state_file" ]; then
    local n
    n="$(cat "$state_file")"
    echo "$n on 127.0.0.1:$port: running=$(container_running "$n" && echo yes || echo no) health=$(health "$port")"
  else
    echo "no debug sandbox recorded for port $port"
    return 1
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop; drop_network ;;
  status) status ;;
  *) usage ;;
esac
