#!/usr/bin/env bash
# kube-run.sh: the end-to-end suite with the official SDKs against `warren serve --engine
# kubernetes` on the real cluster scripts/kube.sh brought up (KUBECONFIG: its admin).
#
#   test/e2e/kube-run.sh                  the control plane in the cluster (one replica, then
#                                         three failing over for two minutes, ~2.5 min), the core files (below),
#                                         kube/kubernetes.test.mjs and kube/registry.test.mjs,
#                                         then the egress files again on gVisor pods
#   WARREN_RUNTIME=gvisor test/e2e/kube-run.sh FILE   a file on gVisor pods
#   test/e2e/kube-run.sh server/x.test.mjs
#   test/e2e/kube-run.sh kube/control-plane.test.mjs   the control plane in the cluster alone
#   test/e2e/kube-run.sh kube/failover.test.mjs        its three replicas' failover alone
#   test/e2e/kube-run.sh --exec CMD [ARG...]           CMD instead of tests, with the environment
#                                                      the servers get (bench/burst/kube.sh)
#
# It applies deploy/kubernetes/ (namespace, RBAC, gVisor RuntimeClass, the node agent
# DaemonSet with a fresh token Secret), builds warren/node and imports it and the code
# interpreter's image into both nodes, checks what the control plane's service account may and
# may not do; without arguments it runs the control plane's Deployment and Service in the
# cluster and the SDK against it (kube-control-plane.sh); then it runs server-run.sh with the
# servers authenticating as that service account, so the tests prove the RBAC is enough.
# Afterwards no sandbox pod may be left; whatever happens, the namespace and the cluster-wide
# objects it applied are deleted.
set -euo pipefail

exec_cmd=() gvisor=()
if [ "${1:-}" = --exec ]; then
  shift
  exec_cmd=("$@")
  set --
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

say() { printf 'e2e-kube: %s\n' "$*" >&2; }

# scripts/kube.sh up's admin kubeconfig unless told otherwise.
export KUBECONFIG=${KUBECONFIG:-/var/lib/warren-kube/admin.kubeconfig}
[ -f "$KUBECONFIG" ] || { say "no kubeconfig at $KUBECONFIG: bring a cluster up with scripts/kube.sh up"; exit 1; }
# scripts/kube.sh's kubectl (the cluster's version) before any other: Debian's is 1.20.
kubectl=${WARREN_E2E_KUBECTL:-$HOME/.cache/warren/kube/bin/kubectl}
[ -x "$kubectl" ] || kubectl=$(command -v kubectl || true)
[ -x "$kubectl" ] || { say "no kubectl (set WARREN_E2E_KUBECTL)"; exit 1; }
k() { "$kubectl" "$@"; }
# One run at a time on a cluster: every run applies deploy/kubernetes/ into the same namespace
# and deletes it at the end, which would pull it from under another run.
exec 9>"${KUBECONFIG%/*}/e2e.lock"
if ! flock -n 9; then
  say "another kube-run.sh uses this cluster: waiting for it"
  flock 9
fi
# What it runs has the lock (scripts/kube/lib.sh's kube_lock).
export KUBE_LOCK_HELD=1
ns=warren
deploy=deploy/kubernetes
work="$(mktemp -d "${TMPDIR:-/tmp}/warren-e2e-kube-XXXXXX")"

cleanup() {
  local rc=$?
  k delete --ignore-not-found --wait=false -f "$deploy/control-plane.yaml" -f "$deploy/node-agent.yaml" -f "$deploy/buildkitd.yaml" >/dev/null 2>&1 || true
  k delete --ignore-not-found -f "$deploy/rbac.yaml" >/dev/null 2>&1 || true
  k delete namespace "$ns" --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The desktop's image (1.3 GB): for a file (or the command of --exec) that asks for its
# template, and for the default run when it is built (test.sh builds it beside the Go tests).
desktop=
case " $* ${exec_cmd[*]} " in *desktop*) desktop=${WARREN_DESKTOP_IMAGE:-warren/desktop} ;; esac
if [ $# -eq 0 ] && [ ${#exec_cmd[@]} -eq 0 ] && docker image inspect "${WARREN_DESKTOP_IMAGE:-warren/desktop}" >/dev/null 2>&1; then
  desktop=${WARREN_DESKTOP_IMAGE:-warren/desktop}
fi
[ -x bin/warren ] && [ -x bin/warren-agent ] || scripts/build.sh
scripts/kube-images.sh
# scripts/kube.sh up imported warren/base; WARREN_E2E_KUBE_LOADED=1 says the rest is there too
# (a rerun on the same cluster with the same binaries).
if [ "${WARREN_E2E_KUBE_LOADED:-}" != 1 ]; then
  images=(warren/node)
  for i in warren/code-interpreter warren/mcp-gateway; do
    docker image inspect "$i" >/dev/null 2>&1 && images+=("$i")
  done
  [ -z "$desktop" ] || images+=("$desktop")
  say "importing ${images[*]} into the nodes"
  "${WARREN_KUBE_SH:-scripts/kube.sh}" load "${images[@]}"
fi

k apply -f "$deploy/namespace.yaml" -f "$deploy/rbac.yaml" -f "$deploy/runtimeclass-gvisor.yaml" >/dev/null
if ! k -n "$ns" get secret warren-node-token >/dev/null 2>&1; then
  k -n "$ns" create secret generic warren-node-token --from-literal=token="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >/dev/null
fi
# The volumes' directory under the cluster's work dir, which scripts/kube.sh down removes,
# a shared mount in every node (the node agent sees it HostToContainer; a cluster started
# before node.sh did so at start gets it now). The volumes suite runs on the sized class of
# this tree's local-path provisioner (each volume a filesystem of its size), installed first;
# the ReadWriteMany volumes' file on MooseFS (scripts/kube.sh shared, which installs the
# provisioner too: its image built from Debian's packages in ~11 s cold, docs/volumes.md).
if [ $# -eq 0 ] || [[ " $* " == *" kube/volumes-shared"* ]]; then
  "${WARREN_KUBE_SH:-scripts/kube.sh}" shared
fi
if [ $# -eq 0 ] || [[ " $* " == *" server/volumes"* ]]; then
  "${WARREN_KUBE_SH:-scripts/kube.sh}" local-path
  export WARREN_VOLUME_STORAGE_CLASS=warren-local-path-sized
elif [[ " $* " != *" kube/volumes-shared"* ]]; then
  "${WARREN_KUBE_SH:-scripts/kube.sh}" share-volumes
fi
# As this host's test cluster runs it (scripts/kube/lib.sh): the volumes under its work dir,
# SYS_RESOURCE left out where no process here can have it.
# shellcheck source=../../scripts/kube/lib.sh
(KUBE_WORK=${KUBECONFIG%/*} && . scripts/kube/lib.sh && node_agent_manifest) | k apply -f - >/dev/null
k apply -f "$deploy/sandbox-network-policy.yaml" >/dev/null
# Node agents that scripts/kube.sh up left running keep their image when the apply changes
# nothing: restart them if they run another warren/node than the one just imported.
want=$(docker image inspect -f '{{.Id}}' warren/node)
if k -n "$ns" get pods -l app.kubernetes.io/name=warren-node -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}' | grep . | grep -qvxF "$want"; then
  say "restarting the node agents on the warren/node just imported"
  k -n "$ns" rollout restart daemonset/warren-node >/dev/null
fi
k -n "$ns" rollout status daemonset/warren-node --timeout=180s
# Templates are built on the cluster's buildkitd (scripts/kube.sh up built its image and serves
# the registry to pods); its cache is a hostPath, so it stays warm from run to run.
k apply -f "$deploy/buildkitd.yaml" >/dev/null
k -n "$ns" rollout status deployment/warren-buildkitd --timeout=180s || {
  k -n "$ns" describe pods -l app.kubernetes.io/name=warren-buildkitd >&2 || true
  k -n "$ns" logs deployment/warren-buildkitd --all-containers --tail=40 >&2 || true
  say "buildkitd did not become Ready"
  exit 1
}
buildkitd="tcp://$(k -n "$ns" get service warren-buildkitd -o 'jsonpath={.spec.clusterIP}'):1234"
nodes=$(k get nodes -o name | wc -l)
ready=$(k -n "$ns" get daemonset warren-node -o jsonpath='{.status.numberReady}')
[ "$ready" = "$nodes" ] || { say "node agents ready on $ready of $nodes nodes"; exit 1; }

# The control plane's service account: what it needs, and nothing more.
sa=system:serviceaccount:$ns:warren-control-plane
can() { [ "$(k auth can-i --as="$sa" "$@" 2>/dev/null)" = yes ]; }
for want in "create pods -n $ns" "watch pods -n $ns" "delete pods -n $ns" "get pods --subresource=log -n $ns" \
  "patch pods --subresource=resize -n $ns" "update pods --subresource=ephemeralcontainers -n $ns" "get secret/warren-node-token -n $ns" "get runtimeclass/gvisor" "get namespace/$ns" "list nodes" \
  "create configmaps -n $ns" "list configmaps -n $ns" "update configmaps -n $ns" "delete configmaps -n $ns" \
  "create leases -n $ns" "get lease/warren -n $ns" "update lease/warren -n $ns" \
  "create persistentvolumeclaims -n $ns" "delete persistentvolumeclaims -n $ns" "get persistentvolumes" \
  "get networkpolicy/warren-sandboxes -n $ns" "create networkpolicies -n $ns" "update networkpolicies -n $ns" "delete networkpolicies -n $ns" \
  "get endpointslices.discovery.k8s.io/kubernetes -n default" "list servicecidrs.networking.k8s.io"; do
  can $want || { say "RBAC: the control plane cannot: $want"; exit 1; }
done
for refuse in "create pods -n default" "get secrets -n $ns" "get secret/other -n $ns" "create pods --subresource=exec -n $ns" "update pods --subresource=ephemeralcontainers -n default" "delete nodes" \
  "create daemonsets -n $ns" "list secrets -n kube-system" "create namespaces" "create configmaps -n default" \
  "update lease/other -n $ns" "delete lease/warren -n $ns" "create leases -n kube-system" \
  "create persistentvolumeclaims -n default" "create persistentvolumes" "delete persistentvolumes" \
  "create networkpolicies -n default" "get endpointslices.discovery.k8s.io/other -n default" "list endpointslices.discovery.k8s.io -n default" \
  "get configmaps -n default" "create servicecidrs.networking.k8s.io"; do
  if can $refuse; then say "RBAC: the control plane may, and should not: $refuse"; exit 1; fi
done
say "RBAC: the control plane's service account has what it needs and no more"

# A kubeconfig of that service account: the servers under test use it.
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca_data=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
if [ -n "$ca_data" ]; then
  base64 -d <<<"$ca_data" >"$work/ca.crt"
else
  cp "$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$work/ca.crt"
fi
token=$(k -n "$ns" create token warren-control-plane --duration=3h)
KUBECONFIG="$work/sa.kubeconfig" k config set-cluster e2e --server="$server" --certificate-authority="$work/ca.crt" --embed-certs >/dev/null
KUBECONFIG="$work/sa.kubeconfig" k config set-credentials warren --token="$token" >/dev/null
KUBECONFIG="$work/sa.kubeconfig" k config set-context e2e --cluster=e2e --user=warren --namespace="$ns" >/dev/null
KUBECONFIG="$work/sa.kubeconfig" k config use-context e2e >/dev/null

rc=0
# The control plane in the cluster: one replica, and three on PostgreSQL failing over
# (docs/kubernetes.md, "High availability"), on the images imported above.
in_cluster() {
  case "$1" in
  kube/control-plane.test.mjs) WARREN_E2E_KUBECTL="$kubectl" WARREN_NAMESPACE="$ns" test/e2e/kube-control-plane.sh "$1" ;;
  kube/failover.test.mjs) WARREN_E2E_CP_REPLICAS=3 WARREN_E2E_KUBECTL="$kubectl" WARREN_NAMESPACE="$ns" test/e2e/kube-control-plane.sh "$1" ;;
  esac
}
if [ ${#exec_cmd[@]} -eq 0 ] && [ $# -eq 1 ] && { [ "$1" = kube/control-plane.test.mjs ] || [ "$1" = kube/failover.test.mjs ]; }; then
  in_cluster "$1" || rc=1
  exit "$rc"
fi
if [ $# -eq 0 ] && [ ${#exec_cmd[@]} -eq 0 ]; then
  in_cluster kube/control-plane.test.mjs || rc=1
  in_cluster kube/failover.test.mjs || rc=1
  set -- kube/kubernetes.test.mjs kube/isolation.test.mjs kube/egress.test.mjs kube/registry.test.mjs server/sandbox.test.mjs server/proxy.test.mjs server/pause.test.mjs server/codeinterp.test.mjs \
    server/snapshots.test.mjs server/templates.test.mjs server/events.test.mjs server/secrets.test.mjs \
    server/security.test.mjs server/connections.test.mjs server/boot.test.mjs server/cli.test.mjs server/hardening.test.mjs \
    server/mcp.test.mjs server/tls.test.mjs server/restart.test.mjs server/build-isolation.test.mjs server/egress.test.mjs server/egress-rules.test.mjs server/neighbours.test.mjs \
    server/volumes.test.mjs kube/volumes-shared.test.mjs ${desktop:+server/desktop.test.mjs}
  # The egress suites again with every sandbox a gVisor pod (runtimeClassName gvisor): the node
  # gateway's rules and refusals as gVisor's netstack sees them, which differs from the kernel's
  # (a UDP socket there is told of no ICMP error but port unreachable). isolation and neighbours
  # run gVisor pods of their own. About 35 s.
  gvisor=(server/egress.test.mjs server/egress-rules.test.mjs kube/egress.test.mjs)
fi
# The nodes' containerd, for the tests that look for images there (scripts/kube.sh's layout).
# A file may take longer than on Docker: each template build ends by importing its image into
# both nodes.
kube_dir=${KUBECONFIG%/*}
# The template suites and the builds' isolation build on buildkitd, with no Docker engine: their servers keep images in the
# registry under the prefix e2e-buildkit, where the base images are pushed first (one run holds
# the cluster at a time; a push of what is there already is a no-op).
registry=${WARREN_E2E_KUBE_REGISTRY:-127.0.0.1:15000}
other=() buildkit=()
for f in "$@"; do
  case $f in
  server/templates*.test.mjs | server/build-isolation.test.mjs) buildkit+=("$f") ;;
  *) other+=("$f") ;;
  esac
done
with_env() {
  WARREN_E2E_TEST_TIMEOUT=${WARREN_E2E_TEST_TIMEOUT:-900000} WARREN_ENGINE=kubernetes WARREN_KUBECONFIG="$work/sa.kubeconfig" WARREN_NAMESPACE="$ns" \
    WARREN_E2E_KUBECTL="$kubectl" WARREN_E2E_KUBECTL_CONFIG="$KUBECONFIG" WARREN_E2E_KUBE_REGISTRY="$registry" \
    WARREN_E2E_CTR="${kubectl%/*}/ctr" WARREN_E2E_CONTAINERD="$(echo "$kube_dir"/node*/containerd.sock)" \
    "$@"
}
serve() { with_env test/e2e/server-run.sh "$@"; }
[ ${#exec_cmd[@]} -eq 0 ] || with_env "${exec_cmd[@]}" || rc=1
[ ${#other[@]} -eq 0 ] || serve "${other[@]}" || rc=1
[ ${#gvisor[@]} -eq 0 ] || WARREN_RUNTIME=gvisor serve "${gvisor[@]}" || rc=1
if [ ${#buildkit[@]} -gt 0 ]; then
  prefix=$registry/e2e-buildkit
  bases=(warren/base)
  docker image inspect warren/code-interpreter >/dev/null 2>&1 && bases+=(warren/code-interpreter)
  start=$SECONDS
  for b in "${bases[@]}"; do
    docker tag "$b" "$prefix/$b" && docker push -q "$prefix/$b" >/dev/null && docker rmi "$prefix/$b" >/dev/null ||
      { say "cannot push $b to $prefix"; exit 1; }
  done
  say "base images ${bases[*]} pushed to $prefix in $((SECONDS - start))s; templates build on buildkitd at $buildkitd"
  WARREN_BUILDKIT="$buildkitd" WARREN_REGISTRY="$prefix" WARREN_BUILDKIT_REGISTRY="$(k -n "$ns" get configmap warren-buildkitd -o 'jsonpath={.data.buildkitd\.toml}' | sed -n 's/^\[registry\."\(.*\)"\]$/\1/p' | head -1)" \
    WARREN_E2E_BUILDKIT=1 serve "${buildkit[@]}" || rc=1
fi

# Every server of the run is gone: none of their pods, nor records of stopped sandboxes, may
# be left.
left=$(k -n "$ns" get pods,configmaps -l dev.warren.managed -o name)
if [ -n "$left" ]; then
  say "sandbox pods or stopped sandboxes' records left behind: $(echo $left)"
  rc=1
fi
exit "$rc"
