#!/usr/bin/env bash
# pki.sh — the test cluster's certificates, made with openssl into $KUBE_WORK/pki.
#
# One CA signs everything: the apiserver's serving certificate (for its address on
# the pod network, loopback, and the Service "kubernetes" by IP and name), a client
# certificate per component (admin in system:masters, the controller manager,
# the scheduler, kube-proxy, the apiserver's own for calling kubelets, each kubelet as
# system:node:<name>), each kubelet's serving certificate (for its node IP), and
# the service-account signing key pair. Existing files are kept, so a second
# `up` reuses them.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

PKI=$KUBE_WORK/pki
mkdir -p "$PKI"
chmod 700 "$PKI"
cd "$PKI"

# cert NAME SUBJECT EXT: a key and a certificate signed by the CA, with EXT as its
# x509 extensions (usage and SANs).
cert() {
	local name=$1 subj=$2 ext=$3
	[ -f "$name.crt" ] && return
	openssl genrsa -out "$name.key" 2048 2>/dev/null
	openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
	printf '%b\n' "$ext" >"$name.ext"
	openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
		-extfile "$name.ext" -out "$name.crt" 2>/dev/null ||
		kube_die "openssl could not sign $PKI/$name.crt (is openssl installed and $PKI writable?)"
	rm -f "$name.csr" "$name.ext"
}

client='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
server='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'

if [ ! -f ca.crt ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
		-subj "/CN=warren-kube-ca" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
		kube_die "openssl could not make the CA in $PKI (apt-get install openssl)"
fi
svc_ip=${KUBE_SERVICE_CIDR%.*}.1
cert apiserver "/CN=kube-apiserver" \
	"$server\nsubjectAltName=IP:$KUBE_API_ADDR,IP:127.0.0.1,IP:$svc_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
cert admin "/O=system:masters/CN=warren-kube-admin" "$client"
cert controller-manager "/CN=system:kube-controller-manager" "$client"
cert scheduler "/CN=system:kube-scheduler" "$client"
cert kube-proxy "/CN=system:kube-proxy" "$client"
for i in $(seq 1 "$KUBE_NODES"); do
	n=$(node_name "$i")
	cert "$n-client" "/O=system:nodes/CN=system:node:$n" "$client"
	cert "$n-serving" "/CN=$n" "$server\nsubjectAltName=IP:$(node_gw "$i"),DNS:$n"
done
if [ ! -f sa.key ]; then
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi
chmod 600 ./*.key
