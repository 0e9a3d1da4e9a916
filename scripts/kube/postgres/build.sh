#!/usr/bin/env bash
# build.sh — warren/postgres (WARREN_POSTGRES_IMAGE), the image of the chart's bundled PostgreSQL:
# Debian's postgresql package installed on the local warren/base by the Docker engine's classic
# builder (as warren image build code-interpreter layers its packages), with pg-start as its
# entrypoint and pg-ready as its readiness probe. No registry is involved; an unchanged recipe is
# the engine's build cache (a second or two).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${WARREN_POSTGRES_IMAGE:-warren/postgres:latest}
base=${WARREN_BASE_IMAGE:-warren/base:latest}
docker image inspect "$base" >/dev/null 2>&1 || { echo "postgres image: $base is missing: bin/warren image build" >&2; exit 1; }
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/pg-start" "$here/pg-ready" "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
COPY pg-start pg-ready /usr/local/bin/
USER root
WORKDIR /
ENTRYPOINT ["/usr/local/bin/pg-start"]
CMD []
DOCKERFILE
docker build -q -t "$image" "$ctx" >/dev/null
echo "postgres image: built $image" >&2
