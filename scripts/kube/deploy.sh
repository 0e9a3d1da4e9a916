#!/usr/bin/env bash
# deploy.sh — Warren installed on the test cluster with its Helm chart, as a cluster's user
# installs it (see scripts/kube.sh):
#
#   scripts/kube.sh deploy [--replicas N] [--namespace NS]     N control-plane replicas (3) on a
#       PostgreSQL of the release's own (the chart's bundled one, image warren/postgres), the node
#       agents, RBAC, the token; in NS (warren). Its last lines are the SDK's environment:
#       export E2B_API_URL=... E2B_SANDBOX_URL=... E2B_DOMAIN=... E2B_API_KEY=... (a key it made)
#   scripts/kube.sh undeploy [--namespace NS]                  uninstalls it, leaving nothing
#
# It builds bin/ if missing, warren/node (scripts/kube-images.sh) and warren/postgres
# (postgres/build.sh), imports both into the nodes, and runs helm (built from the Go module proxy,
# cached by build.sh). One control-plane replica runs on node 1, several spread over every node
# (all labelled for it), their state under $KUBE_WORK/<NS>-state; the host reaches its Service's
# ClusterIP (kube-proxy runs in the host's network namespace). The node agents listen on port
# 49990 of every node, so one release runs on a cluster at a time: it refuses to install beside
# another namespace's node agents. It holds the cluster's lock (kube_lock) while it works.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

CHART=$KUBE_REPO/deploy/helm/warren

usage() {
	sed -n '4,9p' "$0" >&2
	exit 2
}

# other_node_agents NS: the namespaces other than NS that run Warren's node agents.
other_node_agents() {
	kctl get daemonsets -A -l app.kubernetes.io/name=warren-node -o 'jsonpath={range .items[*]}{.metadata.namespace}{"\n"}{end}' |
		grep -vx "$1" || true
}

# answers URL SECONDS: waits until URL answers at all. A Ready pod is not yet a Service that
# answers: kube-proxy programs the endpoint a moment later.
answers() {
	local end=$((SECONDS + $2))
	until curl -s -o /dev/null --max-time 2 "$1"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.5
	done
}

deploy() {
	local ns=$1 replicas=$2 start=$SECONDS node key values ip
	[[ $replicas =~ ^[1-9][0-9]*$ ]] || kube_die "--replicas: want a positive number, got '$replicas'"
	api_ready || kube_die "no cluster: scripts/kube.sh up first"
	"$KUBE_SCRIPTS/build.sh" helm
	(cd "$KUBE_REPO" && { [ -x bin/warren ] && [ -x bin/warren-agent ] || scripts/build.sh; } && scripts/kube-images.sh)
	"$KUBE_SCRIPTS/postgres/build.sh"
	kube_lock
	local others
	others=$(other_node_agents "$ns")
	[ -z "$others" ] || kube_die "Warren's node agents run in the namespace(s) $(echo $others) already (port 49990 of every node): one release per cluster; scripts/kube.sh undeploy --namespace NS removes one"
	"$KUBE_REPO/scripts/kube.sh" load warren/node warren/postgres
	# The release's images are the registry's: its base image goes there first, through the
	# registry's loopback address (the same store), which Docker takes as plain HTTP.
	local t=$KUBE_REGISTRY/$ns/warren/base
	docker tag warren/base "$t" && docker push -q "$t" >/dev/null && docker rmi "$t" >/dev/null ||
		kube_die "cannot push warren/base to the cluster's registry ($t)"
	node=$(node_name 1)
	key=e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
	kctl get namespace "$ns" >/dev/null 2>&1 || kctl create namespace "$ns" >/dev/null
	kctl -n "$ns" delete secret warren-api-key --ignore-not-found >/dev/null
	kctl -n "$ns" create secret generic warren-api-key --from-literal=api-key="$key" >/dev/null
	values=$(mktemp)
	trap 'rm -f "$values"' RETURN
	cat >"$values" <<YAML
controlPlane:
  replicas: $replicas
  stateHostPath: $KUBE_WORK/$ns-state
  instance: $ns
# Builds on the release's buildkitd, images in the test cluster's registry under the release's
# own prefix (its base images pushed there first, below).
registry: $KUBE_REGISTRY_PODS/$ns
buildkit:
  registryHost: $KUBE_REGISTRY_PODS
  cacheHostPath: $KUBE_WORK/$ns-buildkit
  clusterIP: ${KUBE_SERVICE_CIDR%.*}.13
# The test cluster has no cluster DNS: the URL names a ClusterIP of the range's lower band, which
# the API server leaves to fixed addresses (one release per cluster: no other takes it).
postgresql:
  enabled: true
  nodeSelector: {kubernetes.io/hostname: $node}
  clusterIP: ${KUBE_SERVICE_CIDR%.*}.12
# scripts/kube.sh up made it.
runtimeClass:
  create: false
# The local-path provisioner's volumes (scripts/kube.sh local-path), under the cluster's work
# dir, which scripts/kube.sh down removes; a shared mount in every node (kube_share_volumes).
nodeAgent:
  volumesDir: $KUBE_WORK/volumes
  sysResource: $(kube_sys_resource)
YAML
	# The control plane's nodes, as the chart's default selector asks (a null in the values would
	# not do, since an upgrade with --reuse-values drops it): node 1 for one replica (its state's
	# hostPath), every node for several, which the chart's topology spread puts on all of them.
	kctl label node "$node" warren.dev/control-plane=true --overwrite >/dev/null
	[ "$replicas" -le 1 ] || kctl label node --all warren.dev/control-plane=true --overwrite >/dev/null
	kube_share_volumes
	kube_log "installing the chart in $ns: $replicas replica(s) on the bundled PostgreSQL, node agents on $KUBE_NODES nodes"
	if ! khelm upgrade --install warren "$CHART" -n "$ns" -f "$values" --wait --timeout 5m >/dev/null; then
		kctl -n "$ns" get pods -o wide >&2 || true
		kctl -n "$ns" logs deployment/warren --tail=30 >&2 || true
		kube_die "the release in $ns did not become ready (above)"
	fi
	ip=$(kctl -n "$ns" get service warren -o 'jsonpath={.spec.clusterIP}')
	answers "http://$ip:3000/health" 60 || kube_die "the Service warren at $ip:3000 did not answer within 60 s of the pods being Ready"
	kube_log "deployed in $((SECONDS - start))s: $(kctl -n "$ns" get pods -l app.kubernetes.io/name=warren -o name | wc -l) replicas behind http://$ip:3000"
	echo "export E2B_API_URL=http://$ip:3000"
	echo "export E2B_SANDBOX_URL=http://$ip:3000"
	echo "export E2B_DOMAIN=localhost"
	echo "export E2B_API_KEY=$key"
}

# undeploy NS: the release, its namespace (the sandbox pods, the Lease, the Secrets made outside
# the chart) and the control plane's state on node 1.
undeploy() {
	local ns=$1 start=$SECONDS
	"$KUBE_SCRIPTS/build.sh" helm >/dev/null 2>&1
	kube_lock
	if khelm status warren -n "$ns" >/dev/null 2>&1; then
		# Down to one replica first, so that the last one, leading, removes its warm pool as a
		# lone server does when it stops.
		if [ "$(kctl -n "$ns" get deployment warren -o 'jsonpath={.status.readyReplicas}' 2>/dev/null)" -gt 1 ] 2>/dev/null; then
			kctl -n "$ns" scale deployment/warren --replicas=1 >/dev/null &&
				kctl -n "$ns" rollout status deployment/warren --timeout=90s >/dev/null || true
		fi
		khelm uninstall warren -n "$ns" --wait --timeout 3m >/dev/null
	fi
	kctl delete namespace "$ns" --ignore-not-found --timeout=120s >/dev/null
	kctl label node --all warren.dev/control-plane- >/dev/null 2>&1 || true
	case $ns in "" | */* | .*) ;; *) rm -rf "${KUBE_WORK:?}/$ns-state" ;; esac
	kube_log "undeployed $ns in $((SECONDS - start))s"
}

cmd=$1
shift
ns=warren replicas=3
while [ $# -gt 0 ]; do
	case $1 in
	--replicas) replicas=${2:?--replicas N}; shift 2 ;;
	--replicas=*) replicas=${1#*=}; shift ;;
	--namespace) ns=${2:?--namespace NS}; shift 2 ;;
	--namespace=*) ns=${1#*=}; shift ;;
	*) usage ;;
	esac
done
[[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || kube_die "--namespace: '$ns' is not a namespace name"
case $cmd in
deploy) deploy "$ns" "$replicas" ;;
undeploy) undeploy "$ns" ;;
*) usage ;;
esac
