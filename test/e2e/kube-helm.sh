#!/usr/bin/env bash
# kube-helm.sh: the Helm chart deploy/helm/warren, linted, rendered and installed on the test
# cluster as a cluster's user installs it, then driven with the official SDK.
#
#   test/e2e/kube-helm.sh
#
# It lints the chart (defaults, and two replicas on the bundled PostgreSQL), checks that it
# refuses two replicas without a PostgreSQL and that deploy/kubernetes is what it renders
# (scripts/kube/manifests.sh --check); then, holding the cluster's lock (kube-run.sh's), installs
# it with scripts/kube.sh deploy --replicas 2 in a namespace of its own (warren-helm-<random>),
# runs kube/helm.test.mjs against the exports deploy printed, and uninstalls it
# (scripts/kube.sh undeploy): no namespace, release, cluster-wide object or state may be left.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
# shellcheck source=../../scripts/kube/lib.sh
. scripts/kube/lib.sh

say() { printf 'e2e-kube-helm: %s\n' "$*" >&2; }
start=$SECONDS
chart=deploy/helm/warren
"$KUBE_SCRIPTS/build.sh" helm >/dev/null
helm=$KUBE_BIN/helm

"$helm" lint --strict "$chart" >/dev/null
"$helm" lint --strict "$chart" --set controlPlane.replicas=2 --set postgresql.enabled=true >/dev/null
if out=$("$helm" template warren "$chart" --set controlPlane.replicas=2 2>&1); then
  say "the chart rendered two replicas without a PostgreSQL"; exit 1
fi
grep -q 'needs a PostgreSQL' <<<"$out" || { say "two replicas without a PostgreSQL: $out"; exit 1; }
# Two renders of a first install: each makes its own token (helm template cannot look up the
# installed one; an install keeps it, which the deploy below relies on for its upgrade).
token() { "$helm" template warren "$chart" --show-only templates/secrets.yaml | sed -n 's/^  token: //p'; }
[ -n "$(token)" ] && [ "$(token)" != "$(token)" ] || { say "the node token is not made afresh by a render"; exit 1; }
scripts/kube/manifests.sh --check
say "chart linted and rendered in $((SECONDS - start))s"

# What deploy builds, built before the lock (deploy finds it up to date), so that the cluster
# is not held while the machine compiles.
{ [ -x bin/warren ] && [ -x bin/warren-agent ]; } || scripts/build.sh
scripts/kube-images.sh
scripts/kube/postgres/build.sh
test/e2e/npm-deps.sh

kube_lock
locked=$SECONDS
ns=warren-helm-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
export KUBECONFIG=$KUBECONFIG_FILE
cleanup() {
  local rc=$? left
  scripts/kube.sh undeploy --namespace "$ns" || rc=1
  left=$( { kctl get namespace "$ns" -o name; kctl get clusterroles,clusterrolebindings -o name | grep -F "warren-control-plane-$ns"; } 2>/dev/null || true)
  [ -z "$left" ] || { say "left behind: $(echo $left)"; rc=1; }
  [ ! -e "$KUBE_WORK/$ns-state" ] || { say "left behind: $KUBE_WORK/$ns-state"; rc=1; }
  say "done in $((SECONDS - start))s, $((SECONDS - locked))s of it holding the cluster"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t=$SECONDS
env=$(scripts/kube.sh deploy --replicas 2 --namespace "$ns")
echo "$env"
eval "$(tail -n 4 <<<"$env")"
say "deployed in $((SECONDS - t))s"
# A second deploy is an upgrade that keeps the node agents' token (the Secret looked up).
before=$(kctl -n "$ns" get secret warren-node-token -o 'jsonpath={.data.token}')
khelm upgrade warren "$chart" -n "$ns" --reuse-values --wait --timeout 3m >/dev/null
[ "$(kctl -n "$ns" get secret warren-node-token -o 'jsonpath={.data.token}')" = "$before" ] ||
  { say "an upgrade changed the node agents' token"; exit 1; }

(
  cd test/e2e
  WARREN_NAMESPACE="$ns" WARREN_E2E_KUBECTL="$KUBE_BIN/kubectl" WARREN_E2E_KUBECTL_CONFIG="$KUBECONFIG" \
    node --test --test-concurrency=1 --test-reporter=spec --test-timeout=300000 kube/helm.test.mjs
)
