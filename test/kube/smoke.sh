#!/usr/bin/env bash
# smoke.sh — the test cluster works end to end: pods on every node, under runc and under
# gVisor (RuntimeClass gvisor), each serving on its pod IP; the host reaches every pod by
# IP, pods reach pods on the other node, exec (with and without stdin) and logs work, and
# each pod runs under the runtime it asked for (gVisor reports its own kernel); an image
# loaded from Docker (warren/base, by scripts/kube.sh load) runs on every node; and Services
# work (kube-proxy): by ClusterIP from the host and from pods, and the Service kubernetes
# takes pods to the apiserver.
#
# Needs a cluster from scripts/kube.sh up and `scripts/kube.sh load warren/base` (it fails,
# with what to do, when either is missing).
# Leaves nothing behind: its namespace is deleted at the end, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/kube/lib.sh

NS=warren-kube-smoke
fail() {
	echo "smoke: FAILED: $*" >&2
	exit 1
}
k() { kctl -n "$NS" "$@"; }

api_ready || fail "no cluster answers at $(api_url): run scripts/kube.sh up first"
cleanup() { kctl delete namespace "$NS" --wait=true --timeout=60s >/dev/null 2>&1 || true; }
trap cleanup EXIT
kctl create namespace "$NS" >/dev/null

pods=()
for i in $(seq 1 "$KUBE_NODES"); do
	for rt in runc gvisor; do
		pod=$rt-node$i
		pods+=("$pod")
		rc=""
		[ $rt = runc ] || rc="runtimeClassName: gvisor"
		k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $pod
  labels: {smoke: $pod}
spec:
  $rc
  nodeSelector: {kubernetes.io/hostname: $(node_name "$i")}
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: localhost/busybox:warren
    imagePullPolicy: Never
    command: ["sh", "-c", "echo started $pod; exec nc -ll -p 8080 -e echo hello-from-$pod"]
    ports: [{containerPort: 8080}]
YAML
	done
done
for i in $(seq 1 "$KUBE_NODES"); do
	pods+=("base-node$i")
	k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: base-node$i
spec:
  nodeSelector: {kubernetes.io/hostname: $(node_name "$i")}
  terminationGracePeriodSeconds: 1
  containers:
  - name: base
    image: warren/base
    imagePullPolicy: Never
    command: ["bash", "-c", "echo started base-node$i; exec sleep infinity"]
YAML
done
start=$SECONDS
if ! k wait --for=condition=Ready pod --all --timeout=180s >/dev/null; then
	k get pods -o wide >&2
	k describe pods >&2
	! k get pods -o 'jsonpath={..waiting.reason}' | grep -q ErrImageNeverPull ||
		echo "smoke: an image is not on the nodes (ErrImageNeverPull): scripts/kube.sh load warren/base" >&2
	fail "pods not Ready within 180s"
fi
echo "smoke: ${#pods[@]} pods Ready in $((SECONDS - start))s"
k get pods -o wide

host_kernel=$(uname -r)
declare -A ip
for pod in "${pods[@]}"; do
	case $pod in
	base-*) continue ;;
	esac
	node=$(k get pod "$pod" -o 'jsonpath={.spec.nodeName}')
	want=$(node_name "${pod##*node}")
	[ "$node" = "$want" ] || fail "$pod runs on $node, not $want"
	ip[$pod]=$(k get pod "$pod" -o 'jsonpath={.status.podIP}')
	[ -n "${ip[$pod]}" ] || fail "$pod has no pod IP"

	# The host reaches the pod at its IP (through the node's bridge).
	got=$(timeout 10 bash -c "exec 3<>/dev/tcp/${ip[$pod]}/8080 && cat <&3") || fail "the host cannot reach $pod at ${ip[$pod]}:8080"
	[ "$got" = "hello-from-$pod" ] || fail "$pod at ${ip[$pod]}:8080 answered '$got'"

	# exec, without and with stdin; the runtime is the one asked for.
	kernel=$(k exec "$pod" -- uname -r) || fail "kubectl exec into $pod failed"
	case $pod in
	runc-*) [ "$kernel" = "$host_kernel" ] || fail "$pod (runc) reports kernel $kernel, the host runs $host_kernel" ;;
	gvisor-*) [ "$kernel" != "$host_kernel" ] || fail "$pod (gvisor) reports the host's kernel $kernel: it is not under gVisor" ;;
	esac
	got=$(echo "piped into $pod" | k exec -i "$pod" -- cat) || fail "kubectl exec -i into $pod failed"
	[ "$got" = "piped into $pod" ] || fail "kubectl exec -i into $pod echoed '$got'"
	k logs "$pod" | grep -qx "started $pod" || fail "kubectl logs $pod does not show its first line"
	echo "smoke: $pod on $node at ${ip[$pod]} (kernel $kernel): reachable from the host, exec, exec -i, logs"
done

for i in $(seq 1 "$KUBE_NODES"); do
	got=$(k exec "base-node$i" -- sh -c '. /etc/os-release && echo "$ID"') || fail "kubectl exec into base-node$i (warren/base) failed"
	[ "$got" = debian ] || fail "base-node$i does not run warren/base (os-release ID '$got')"
	echo "smoke: base-node$i runs warren/base (loaded from Docker) on $(node_name "$i")"
done
web=()
for pod in "${pods[@]}"; do [ "${pod#base-}" != "$pod" ] || web+=("$pod"); done

# Pod to pod: every pod reaches every other one, on its own node (across the bridge) and
# on the other node (routed by the host between the bridges).
for from in "${web[@]}"; do
	for to in "${web[@]}"; do
		[ "$from" != "$to" ] || continue
		got=$(k exec "$from" -- nc -w 5 "${ip[$to]}" 8080) || fail "$from cannot reach $to at ${ip[$to]}:8080"
		[ "$got" = "hello-from-$to" ] || fail "$from reached ${ip[$to]}:8080, which answered '$got'"
	done
	echo "smoke: $from reaches every other pod"
done

# Services (kube-proxy): a ClusterIP in front of the last node's runc pod answers the host,
# a pod on another node and one beside it (not the pod itself: the one kube-proxy is node
# 1's, and masquerades hairpin traffic only for its own node's pods); and every pod reaches
# the apiserver through the Service "kubernetes" by its address in the environment, with
# its service account's token over TLS checked against the cluster's CA.
target=runc-node$KUBE_NODES
k expose pod "$target" --name web --port 80 --target-port 8080 >/dev/null
svc=$(k get service web -o 'jsonpath={.spec.clusterIP}')
for _ in $(seq 1 40); do
	got=$(timeout 5 bash -c "exec 3<>/dev/tcp/$svc/80 && cat <&3" 2>/dev/null) && break
	sleep 0.25
done
[ "$got" = "hello-from-$target" ] || fail "the host cannot reach the Service web at $svc:80 (got '$got'): is kube-proxy running (scripts/kube.sh logs kube-proxy)?"
for from in runc-node1 "gvisor-node$KUBE_NODES"; do
	got=$(k exec "$from" -- nc -w 5 "$svc" 80) || fail "$from cannot reach the Service web at $svc:80"
	[ "$got" = "hello-from-$target" ] || fail "$from reached the Service web at $svc:80, which answered '$got'"
done
echo "smoke: the Service web ($svc) answers the host, runc-node1 and gvisor-node$KUBE_NODES"
for i in $(seq 1 "$KUBE_NODES"); do
	got=$(k exec "base-node$i" -- sh -c 'd=/var/run/secrets/kubernetes.io/serviceaccount
		curl -sS --max-time 10 --cacert $d/ca.crt -H "Authorization: Bearer $(cat $d/token)" \
			"https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version"') ||
		fail "base-node$i cannot reach the apiserver through the Service kubernetes: $got"
	grep -q "\"gitVersion\": \"$KUBE_VERSION\"" <<<"$got" || fail "base-node$i: the Service kubernetes answered: $got"
done
echo "smoke: pods on every node reach the apiserver through the Service kubernetes ($(kctl -n default get service kubernetes -o 'jsonpath={.spec.clusterIP}'))"
echo "smoke: passed"
