#!/usr/bin/env bash
# manifests.sh — deploy/kubernetes/*.yaml rendered from the chart deploy/helm/warren (helm
# template, release warren in the namespace warren), for kubectl apply and the tests that apply
# them (test/e2e/kube-run.sh, kube-control-plane.sh): one replica on SQLite, the Secrets made by
# hand (the node agents' token, the API key, warren-store). Edit the chart, then run this.
#
#   scripts/kube/manifests.sh            write them
#   scripts/kube/manifests.sh --check    fail if a file differs from what the chart renders
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

out=$KUBE_REPO/deploy/kubernetes
files=(namespace rbac runtimeclass-gvisor node-agent sandbox-network-policy control-plane buildkitd)

# render FILE: the chart's templates/FILE.yaml, without helm's "# Source" lines and leading ---.
render() {
	echo "# Rendered from deploy/helm/warren (templates/$1.yaml) by scripts/kube/manifests.sh: edit the chart."
	"$KUBE_BIN/helm" template warren "$KUBE_REPO/deploy/helm/warren" --namespace warren \
		--set namespace.create=true --set nodeAgent.createToken=false \
		--set secretsKey.create=false --set secretsKey.secretName= \
		--set buildkit.registryHost="$KUBE_REGISTRY_PODS" \
		--show-only "templates/$1.yaml" | sed '/^# Source: /d' | sed '1{/^---$/d}' | cat -s
}

"$KUBE_SCRIPTS/build.sh" helm >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${files[@]}"; do render "$f" >"$tmp/$f.yaml"; done
if [ "${1:-}" = --check ]; then
	rc=0
	for f in "${files[@]}"; do
		diff -u "$out/$f.yaml" "$tmp/$f.yaml" >&2 || rc=1
	done
	extra=$(cd "$out" && ls *.yaml | grep -vxF "$(printf '%s.yaml\n' "${files[@]}")" || true)
	[ -z "$extra" ] || { kube_log "deploy/kubernetes has files the chart does not render: $extra"; rc=1; }
	[ $rc = 0 ] || kube_die "deploy/kubernetes differs from the chart (above): run scripts/kube/manifests.sh"
	kube_log "deploy/kubernetes is what the chart renders"
else
	for f in "${files[@]}"; do cp "$tmp/$f.yaml" "$out/"; done
	kube_log "wrote ${files[*]/%/.yaml} in deploy/kubernetes"
fi
