#!/usr/bin/env bash
# Runs the scale harness (go run ./test/scale) against a throwaway etcd and kube-apiserver
# on 127.0.0.1, then stops both by pid and removes their directory.
#
#   hack/scale.sh [harness flags...]      e.g. hack/scale.sh -nodes 100 -pods-per-node 2
#                                              hack/scale.sh -design legacy -nodes 100
#
# The apiserver has a token admin (system:masters, exempt from API priority and fairness)
# and serves a self-signed certificate it makes itself. The project's CRDs
# (config/crd/bases) are installed before the harness runs. The default inflight limits
# (--max-requests-inflight 400, --max-mutating-requests-inflight 200) are kept: every
# client here is exempt from them. When the harness ends, the peak RSS (VmHWM) of the
# apiserver and of etcd is printed.
#
# Environment: SCALE_APISERVER_PORT (default 32443), SCALE_ETCD_PORT (default 32379; the
# peer port is one above), SCALE_KEEP=1 keeps the directory and its logs, SCALE_HARNESS
# runs a harness binary built before instead of building ./test/scale. The ports differ
# from the local node's (6443, 23790, 23800): it stops at once if any of them is taken, so
# that no other apiserver can ever reach this etcd, nor this apiserver another etcd.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

port=${SCALE_APISERVER_PORT:-32443}
etcd_port=${SCALE_ETCD_PORT:-32379}
for p in "$port" "$etcd_port" $((etcd_port + 1)); do
	if ss -Htln "sport = :$p" | grep -q .; then
		echo "scale: port $p is in use; choose others with SCALE_APISERVER_PORT and SCALE_ETCD_PORT" >&2
		exit 1
	fi
done
bin=$(hack/k8s-binaries.sh)
dir=$(mktemp -d /tmp/numapref-scale.XXXXXX)
pids=()

peak_rss() { awk '/^VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# shellcheck disable=SC2317 # reached through the EXIT trap, which shellcheck 0.9 does not follow
stop_all() {
	local i pid
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ "${SCALE_KEEP:-0}" = 1 ]; then echo "scale: kept $dir" >&2; else rm -rf "$dir"; fi
}
trap stop_all EXIT

harness=${SCALE_HARNESS:-}
if [ -z "$harness" ]; then
	echo "scale: building the harness" >&2
	go build -o "$dir/scale" ./test/scale
	harness=$dir/scale
fi

token=$(openssl rand -hex 16)
echo "$token,numapref-scale-admin,numapref-scale-admin,system:masters" >"$dir/tokens.csv"
openssl ecparam -name prime256v1 -genkey -noout -out "$dir/sa.key" 2>/dev/null
openssl ec -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null

"$bin/etcd" --name=scale --data-dir="$dir/etcd" \
	--listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
	--listen-peer-urls="http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls="http://127.0.0.1:$((etcd_port + 1))" \
	--initial-cluster="scale=http://127.0.0.1:$((etcd_port + 1))" \
	--quota-backend-bytes=$((8 * 1024 * 1024 * 1024)) --log-level=warn >"$dir/etcd.log" 2>&1 &
pids+=($!)
etcd_pid=$!
for i in $(seq 100); do
	if ss -Htlnp "sport = :$etcd_port" | grep -q "pid=$etcd_pid,"; then break; fi
	if ! kill -0 "$etcd_pid" 2>/dev/null || [ "$i" = 100 ]; then
		echo "scale: etcd did not start listening on $etcd_port" >&2; tail -n 20 "$dir/etcd.log" >&2; exit 1
	fi
	sleep 0.1
done

# --endpoint-reconciler-type=none: 1.35+ refuses to advertise 127.0.0.1 with the default one.
"$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
	--bind-address=127.0.0.1 --secure-port="$port" --advertise-address=127.0.0.1 \
	--endpoint-reconciler-type=none --cert-dir="$dir/certs" \
	--token-auth-file="$dir/tokens.csv" --authorization-mode=RBAC \
	--service-account-issuer=https://kubernetes.default.svc \
	--service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
	--profiling=false >"$dir/kube-apiserver.log" 2>&1 &
pids+=($!)
apiserver_pid=$!

cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: scale
  cluster:
    server: https://127.0.0.1:$port
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: scale
  context: {cluster: scale, user: admin}
current-context: scale
EOF
export KUBECONFIG=$dir/kubeconfig

for i in $(seq 120); do
	if "$bin/kubectl" get --raw /readyz >/dev/null 2>&1; then break; fi
	if ! kill -0 "$apiserver_pid" 2>/dev/null; then tail -n 20 "$dir/kube-apiserver.log" >&2; exit 1; fi
	[ "$i" -lt 120 ] || { echo "scale: the apiserver is not ready after 60 s" >&2; tail -n 20 "$dir/kube-apiserver.log" >&2; exit 1; }
	sleep 0.5
done
"$bin/kubectl" apply --server-side -f config/crd/bases >/dev/null
"$bin/kubectl" wait --for condition=Established --timeout=60s -f config/crd/bases >/dev/null
echo "scale: apiserver ready on 127.0.0.1:$port (pid $apiserver_pid), etcd pid $etcd_pid, dir $dir" >&2

rc=0
"$harness" "$@" || rc=$?
echo "scale: apiserver peak RSS $(peak_rss "$apiserver_pid"), etcd peak RSS $(peak_rss "$etcd_pid")"
exit $rc
