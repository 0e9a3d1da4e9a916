#!/usr/bin/env bash
# kube-control-plane.sh: Warren's control plane inside the cluster, as deploy/kubernetes/
# control-plane.yaml runs it, driven with the official SDKs through its Service. A step of
# test/e2e/kube-run.sh, which has applied the namespace, the RBAC, the node agents and their
# token, and imported warren/node into the nodes (run it through kube-run.sh).
#
# It labels the first node for the control plane (the Deployment's nodeSelector; every node for
# several replicas, which the Deployment's topology spread puts on both), makes the
# Secret warren-api-key and the ConfigMap warren-registry (the pods' address of the cluster's
# registry, a prefix of its own: templates are built on the buildkitd kube-run.sh applied),
# applies control-plane.yaml with three test changes (kustomize): the state's hostPath under the
# cluster's work dir instead of /var/lib/warren, an instance name of its own, and buildkitd by
# its Service's ClusterIP (the test cluster has no cluster DNS). Then it waits for the pod to be Ready
# and runs kube/control-plane.test.mjs against the Service's ClusterIP (kube-proxy takes the
# host there). The server talks to the API server only with its in-cluster config, so as the
# service account warren-control-plane with the RBAC of rbac.yaml. Whatever happens, the
# Deployment, Service, Secret, label and state go at the end, and no pod of its instance may
# be left once its server has stopped.
#
#   test/e2e/kube-control-plane.sh [FILE]     FILE: kube/control-plane.test.mjs by default
#
# With WARREN_E2E_CP_REPLICAS=N (N > 1; kube-run.sh runs kube/failover.test.mjs with 3) the
# Deployment runs N replicas on a PostgreSQL, which elect a leader on the Lease warren: a
# PostgreSQL cluster of the test's own on the host (scripts/ensure-postgres.sh with its data
# under the cluster's work dir, port 54330), listening also on node 1's bridge address (where the
# API server listens too) and trusting the nodes' pod networks there, a database per run, its URL
# in the Secret warren-store. Its pods reach it; sandbox pods are refused the nodes' addresses
# (docs/kubernetes.md, "Sandbox isolation"). Before the Deployment goes it is scaled to one
# replica, so that the last one, leading, removes its warm pool as a lone server does. The test
# gets the host's address on node 1's bridge (WARREN_E2E_HOST_ADDR), where the replicas reach
# a webhook receiver it runs, which they are allowed to post to (--webhook-allow-private).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

say() { printf 'e2e-kube-control-plane: %s\n' "$*" >&2; }

export KUBECONFIG=${KUBECONFIG:-/var/lib/warren-kube/admin.kubeconfig}
kubectl=${WARREN_E2E_KUBECTL:-$HOME/.cache/warren/kube/bin/kubectl}
ns=${WARREN_NAMESPACE:-warren}
k() { "$kubectl" -n "$ns" "$@"; }
k get secret warren-node-token >/dev/null 2>&1 ||
  { say "no Secret $ns/warren-node-token: run this through test/e2e/kube-run.sh, which sets the namespace up"; exit 1; }

file=${1:-kube/control-plane.test.mjs}
replicas=${WARREN_E2E_CP_REPLICAS:-1}
start=$SECONDS
instance=e2e-incluster-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
node=$("$kubectl" get nodes -o 'jsonpath={.items[0].metadata.name}')
# The nodes labelled for the control plane: the first, or all of them for several replicas.
cp_nodes=$node
[ "$replicas" -le 1 ] || cp_nodes=$("$kubectl" get nodes -o 'jsonpath={.items[*].metadata.name}')
# On the node's filesystem, which is the host's here; scripts/kube.sh down removes its parent.
state=${KUBECONFIG%/*}/$instance-state
work="$(mktemp -d "${TMPDIR:-/tmp}/warren-e2e-kubecp-XXXXXX")"

# The test's PostgreSQL, for replicas > 1 (see above).
pg_env=(PG_ROOT="${KUBECONFIG%/*}/postgres" PG_PORT=54330)
db=warren_${instance//-/_}
pg_url=
bridge=

cleanup() {
  local rc=$? left logs
  if [ "$replicas" -gt 1 ]; then
    k scale deployment/warren --replicas=1 >/dev/null 2>&1 &&
      k rollout status deployment/warren --timeout=90s >/dev/null 2>&1 || true
  fi
  # The server stops cleanly (SIGTERM): it removes its warm pool's pods itself. Its log to the
  # end says why when it does not.
  k logs -f -l app.kubernetes.io/name=warren --tail=-1 --prefix >"$work/control-plane.log" 2>&1 &
  logs=$!
  k delete --ignore-not-found --wait=true --timeout=90s deployment/warren service/warren >/dev/null 2>&1 || rc=1
  k wait --for=delete pod -l app.kubernetes.io/name=warren --timeout=90s >/dev/null 2>&1 || true
  kill "$logs" 2>/dev/null || true
  left=$(k get pods -l "dev.warren.managed=$instance" -o name 2>/dev/null)
  if [ -n "$left" ]; then
    say "pods of the in-cluster control plane left behind: $(echo $left)"
    k get pods -l "dev.warren.managed=$instance" --show-labels >&2 || true
    say "the control plane's last log lines:"
    tail -n 40 "$work/control-plane.log" >&2
    k delete --wait=false $left >/dev/null 2>&1 || true
    rc=1
  fi
  k delete --ignore-not-found secret/warren-api-key configmap/warren-registry >/dev/null 2>&1 || true
  if [ -n "$pg_url" ]; then
    k delete --ignore-not-found secret warren-store lease warren >/dev/null 2>&1 || true
    psql -X -q -d "$pg_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  # Stopped even when its start failed: one that could not bind 127.0.0.1 (a port another
  # connection held a moment) runs on the bridge alone, and every later start would fail on it.
  [ "$replicas" -le 1 ] || env "${pg_env[@]}" scripts/ensure-postgres.sh stop >/dev/null 2>&1 || true
  "$kubectl" label node $cp_nodes warren.dev/control-plane- >/dev/null 2>&1 || true
  rm -rf "$state" "$work"
  say "done in $((SECONDS - start))s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

key=e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
"$kubectl" label node $cp_nodes warren.dev/control-plane=true --overwrite >/dev/null
# The registry as pods reach it (scripts/kube.sh up serves it there too), from buildkitd.toml.
pods_registry=$(k get configmap warren-buildkitd -o 'jsonpath={.data.buildkitd\.toml}' | sed -n 's/^\[registry\."\(.*\)"\]$/\1/p' | head -1)
k create configmap warren-registry --from-literal=registry="$pods_registry/e2e-control-plane" --dry-run=client -o yaml | k apply -f - >/dev/null
buildkitd_ip=$(k get service warren-buildkitd -o 'jsonpath={.spec.clusterIP}')
# Its images are the registry's: the base images go there first, through the registry's loopback
# address (the same store), which Docker takes as plain HTTP.
for b in warren/base warren/code-interpreter; do
  docker image inspect "$b" >/dev/null 2>&1 || continue
  t=${WARREN_E2E_KUBE_REGISTRY:-127.0.0.1:15000}/e2e-control-plane/$b
  docker tag "$b" "$t" && docker push -q "$t" >/dev/null && docker rmi "$t" >/dev/null || { say "cannot push $b to $t"; exit 1; }
done
k create secret generic warren-api-key --from-literal=api-key="$key" >/dev/null
if [ "$replicas" -gt 1 ]; then
  bridge=$("$kubectl" config view --minify -o 'jsonpath={.clusters[0].cluster.server}' | sed -E 's#^https?://##; s#:[0-9]+$##')
  pods_net=$("$kubectl" get nodes -o 'jsonpath={.items[*].spec.podCIDR}' | tr ' ' ',')
  pg_env+=(PG_LISTEN="$bridge" PG_TRUST="$pods_net")
  pg_url=$(env "${pg_env[@]}" scripts/ensure-postgres.sh | tail -1)
  pg_url=${pg_url#export WARREN_TEST_POSTGRES=}
  psql -X -q -d "$pg_url" -c "CREATE DATABASE $db" >/dev/null
  k create secret generic warren-store --from-literal=url="postgres://postgres@$bridge:54330/$db?sslmode=disable" >/dev/null
  say "$replicas replicas on PostgreSQL at $bridge:54330 (database $db), trusting $pods_net"
fi
cp deploy/kubernetes/control-plane.yaml "$work/"
cat >"$work/kustomization.yaml" <<YAML
resources: [control-plane.yaml]
patches:
  - target: {kind: Deployment, name: warren}
    patch: |-
      - op: replace
        path: /spec/template/spec/volumes/0/hostPath/path
        value: $state
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: WARREN_INSTANCE, value: $instance}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: WARREN_BUILDKIT, value: "tcp://$buildkitd_ip:1234"}
      - op: replace
        path: /spec/replicas
        value: $replicas
YAML
# The failover test's webhook receiver is on the host's bridge address, a private one.
[ -z "$bridge" ] || cat >>"$work/kustomization.yaml" <<YAML
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: WARREN_WEBHOOK_ALLOW_PRIVATE, value: "true"}
YAML
"$kubectl" kustomize "$work" | k apply -f - >/dev/null
if ! k rollout status deployment/warren --timeout=240s; then
  k describe pods -l app.kubernetes.io/name=warren >&2 || true
  k logs deployment/warren --tail=40 >&2 || true
  say "the control plane did not become Ready"
  exit 1
fi
ip=$(k get service warren -o 'jsonpath={.spec.clusterIP}')
# A Ready pod is not yet a Service that answers: kube-proxy programs the endpoint a moment later,
# and refuses connections to the Service until then.
deadline=$((SECONDS + 60))
until curl -s -o /dev/null --max-time 2 "http://$ip:3000/"; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    k get endpointslices -l kubernetes.io/service-name=warren -o wide >&2 || true
    say "the control plane's Service at $ip:3000 did not answer within 60 s of the pod being Ready"
    exit 1
  fi
  sleep 0.5
done
say "control plane Ready on $(echo $cp_nodes) after $((SECONDS - start))s; its Service at $ip:3000 answers"

test/e2e/npm-deps.sh
rc=0
(
  cd test/e2e
  E2B_API_URL="http://$ip:3000" E2B_SANDBOX_URL="http://$ip:3000" E2B_DOMAIN=warren.localhost E2B_API_KEY="$key" \
    WARREN_E2E_CP_INSTANCE="$instance" WARREN_E2E_HOST_ADDR="$bridge" \
    WARREN_E2E_KUBECTL="$kubectl" WARREN_E2E_KUBECTL_CONFIG="$KUBECONFIG" WARREN_NAMESPACE="$ns" \
    node --test --test-concurrency=1 --test-reporter=spec --test-timeout=600000 "$file"
) || rc=1
[ "$rc" = 0 ] || k logs -l app.kubernetes.io/name=warren --prefix --tail=$((120 / replicas)) >&2 || true
exit "$rc"
