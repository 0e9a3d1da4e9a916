#!/usr/bin/env bash
# node.sh — one node of the test cluster: its containerd and its kubelet.
#
#   node.sh config I     write node I's containerd, runsc, CNI and kubelet configuration
#   node.sh run I        run node I (up.sh starts it as
#                        `setsid unshare --mount --propagation private node.sh run I`)
#
# `run` lives in a private mount namespace, so that what the node mounts (container
# root filesystems, pod volumes, network namespace handles) never appears on the host and
# vanishes with the node. In that namespace it first covers the kernel tunables the kubelet
# would otherwise set host-wide (vm.overcommit_memory, kernel.panic, ...) with files that
# already read the kubelet's values, so the host's stay as they are; and /var/log,
# /var/lib/cni and /var/lib/kubelet (paths the kubelet's container logs and device plugin
# socket and containerd's CNI cache hard-code) with the node's own directories, so two nodes do not share them and the host gets none of their files; and
# /run/containerd with the node's socket directory, so that a pod mounting the usual
# hostPath /run/containerd (the node agent) reaches its own node's containerd. Then it
# starts containerd, imports the images every node needs, starts the kubelet, and waits.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

i=${2:?usage: node.sh config|run NODE_NUMBER}
name=$(node_name "$i")
dir=$(node_dir "$i")
PKI=$KUBE_WORK/pki
port=$(node_kubelet_port "$i")

config() {
	mkdir -p "$dir"/{containerd,cni/net.d,cni/ipam,cni/cache,runc,runsc,kubelet,log,sysctl,opt,s,run}
	# The socket lives in a directory of its own, which run mounts at /run/containerd in the
	# node's namespace; from the host it is reached at $dir/containerd.sock as well.
	ln -sfn run/containerd.sock "$dir/containerd.sock"
	cat >"$dir/containerd.toml" <<TOML
# containerd of $name. Own root, state and sockets; nothing read from /etc.
version = 4
root = "$dir/containerd/root"
state = "$dir/containerd/state"
imports = []
# NRI would open /var/run/nri, the image verifier reads /opt/containerd; the other
# snapshotters are unused.
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.image-verifier.v1.bindir",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs", "io.containerd.snapshotter.v1.blockfile"]

# Sockets: the node's own (containerd's defaults are those of a system containerd,
# /run/containerd/..., which this must never take over), shim sockets too.
[plugins."io.containerd.server.v1.grpc"]
  address = "$dir/run/containerd.sock"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "$dir/containerd.sock.ttrpc"
[plugins."io.containerd.server.v1.debug"]
  address = ""
[plugins."io.containerd.server.v1.metrics"]
  address = ""
[plugins."io.containerd.shim.v1.manager"]
  socket_dir = "$dir/s"

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  # The cluster's registry speaks plain HTTP (hosts.toml).
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$dir/certs.d"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"

[plugins."io.containerd.cri.v1.runtime"]
  # Without CAP_SYS_RESOURCE no process may lower its OOM score: runc's nsexec fails with
  # "failed to update /proc/self/oom_score_adj: Permission denied" unless pods are kept
  # at or above containerd's own score.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$dir/runc"
        SystemdCgroup = false
    # The RuntimeClass "gvisor" (handler runsc) runs pods under gVisor.
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$dir/runsc.toml"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  # exec, attach and port-forward streams: loopback, a free port.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
	mkdir -p "$dir/certs.d/$KUBE_REGISTRY"
	cat >"$dir/certs.d/$KUBE_REGISTRY/hosts.toml" <<TOML
server = "http://$KUBE_REGISTRY"
[host."http://$KUBE_REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
	# As in scripts/setup-gvisor.sh: writes go to the container's layer (so a commit
	# keeps them), and setuid binaries work. net-raw lets a container with CAP_NET_RAW
	# open raw sockets: Warren's init container sets the pod's iptables through one
	# (docs/kubernetes.md); the sandbox container lacks the capability.
	cat >"$dir/runsc.toml" <<TOML
binary_name = "$KUBE_BIN/runsc"
root = "$dir/runsc"
[runsc_config]
  platform = "systrap"
  overlay2 = "none"
  allow-suid = "true"
  net-raw = "true"
TOML
	cat >"$dir/cni/net.d/10-warren-kube.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "warren-kube-$i",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$(node_bridge "$i")",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$(node_cidr "$i")", "gateway": "$(node_gw "$i")"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$dir/cni/ipam"
      }
    }
  ]
}
JSON
	kubeconfig "$dir/kubelet.kubeconfig" "$name-client"
	cat >"$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Serves on the node's bridge address (its InternalIP), where the apiserver reaches it for
# exec, logs and port-forward; only clients with a certificate from the cluster's CA.
address: $(node_gw "$i")
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((port - 2))
tlsCertFile: $PKI/$name-serving.crt
tlsPrivateKeyFile: $PKI/$name-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$dir/run/containerd.sock
cgroupDriver: cgroupfs
# Each node's pods under a cgroup of their own, so two kubelets do not share kubepods.
cgroupRoot: /$name
# This machine has cgroup v1, which 1.37 refuses unless told.
failCgroupV1: false
# No KUBE-* chains on the host: the cluster's few rules are its own chain ($KUBE_CHAIN).
makeIPTablesUtilChains: false
podLogsDir: $dir/log/pods
# The tests run servers that import images into the nodes beside one that has them pulled from
# the cluster's registry (--registry): the same image under two names. A kubelet that pulled an
# image (here anonymously, from the registry) otherwise refuses it by another name under
# imagePullPolicy Never, as an image whose pull credentials it must verify (ErrImageNeverPull).
imagePullCredentialsVerificationPolicy: NeverVerify
# The imported images are the only copies (only built images go through the registry):
# never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The nodes' disk is the host's, shared with everything else the machine runs (CI's other lanes,
# other users): a share of it would evict pods (node agents, sandboxes) whenever the host's disk
# runs low for reasons of its own; pods are evicted only when it is nearly out.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 512Mi
  imagefs.available: 512Mi
failSwapOn: false
registerNode: true
YAML
}

# fake_sysctl KEY VALUE: covers /proc/sys/KEY, in this mount namespace only, with a file
# reading VALUE.
fake_sysctl() {
	local f=$dir/sysctl/${1//\//.}
	echo "$2" >"$f"
	mount --bind "$f" "/proc/sys/$1"
}

run() {
	[ -f "$dir/kubelet.yaml" ] || kube_die "$dir/kubelet.yaml is missing: node.sh config $i first (scripts/kube.sh up does both)"
	# The values the kubelet's setupKernelTunables wants, and ip_forward, which the CNI
	# bridge plugin sets (up.sh turns the host's on for as long as the cluster runs).
	fake_sysctl vm/overcommit_memory 1
	fake_sysctl vm/panic_on_oom 0
	fake_sysctl kernel/panic 10
	fake_sysctl kernel/panic_on_oops 1
	fake_sysctl kernel/keys/root_maxkeys 1000000
	fake_sysctl kernel/keys/root_maxbytes 25000000
	fake_sysctl net/ipv4/ip_forward 1
	mkdir -p "$dir/log/var"
	mount --bind "$dir/log/var" /var/log
	mount --bind "$dir/cni/cache" /var/lib/cni
	mount --bind "$dir/kubelet" /var/lib/kubelet
	mount --bind "$dir/run" /run/containerd
	share_volumes

	PATH=$KUBE_BIN:$PATH containerd --config "$dir/containerd.toml" >"$dir/containerd.log" 2>&1 &
	echo $! >"$dir/containerd.pid"
	local t
	for t in $(seq 1 120); do
		[ -S "$dir/containerd.sock" ] && "$KUBE_BIN/ctr" --address "$dir/containerd.sock" version >/dev/null 2>&1 && break
		kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null || {
			tail -20 "$dir/containerd.log" >&2
			kube_die "$name: containerd exited (log above, full log $dir/containerd.log)"
		}
		sleep 0.25
	done
	[ "$t" -lt 120 ] || kube_die "$name: containerd did not answer on $dir/containerd.sock within 30s (log $dir/containerd.log)"
	local img
	for img in "$KUBE_WORK"/images/*.tar; do
		"$KUBE_BIN/ctr" --address "$dir/containerd.sock" -n k8s.io images import "$img" >"$dir/import.log" 2>&1 || {
			cat "$dir/import.log" >&2
			kube_die "$name: could not import $img into containerd (above; containerd's log $dir/containerd.log)"
		}
	done

	"$KUBE_BIN/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
		--root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$name" --node-ip "$(node_gw "$i")" \
		>"$dir/kubelet.log" 2>&1 &
	echo $! >"$dir/kubelet.pid"
	# The namespace lives as long as this shell does: wait for both daemons.
	wait
}

case ${1:-} in
config) config ;;
run) run ;;
*) kube_die "usage: node.sh config|run NODE_NUMBER" ;;
esac
