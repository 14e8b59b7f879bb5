#!/usr/bin/env bash
# Checks, within seconds and before any long build, what a make target needs from this
# machine. What apt can provide is installed (hack/install-deps.sh, idempotent) when
# running as root; otherwise it stops at once and says exactly what to run.
#
#   hack/preflight.sh TARGET     TARGET: demo, test, unit, host, integration, chart,
#                                monitoring, fuzz, lint, kernel-lab, kernel-lab-server,
#                                e2e, e2e-kind
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: hack/preflight.sh TARGET}

fail() { printf 'preflight (%s): %s\n' "$target" "$*" >&2; exit 1; }
note() { printf 'preflight (%s): %s\n' "$target" "$*" >&2; }

groups=(base) root=0 disk_gib=2
case "$target" in
  unit|fuzz|lint) ;;
  chart|integration) disk_gib=12 ;;                               # helm, apiserver, etcd builds
  monitoring) groups+=(monitoring) ;;                             # promtool
  host) root=1 ;;
  kernel-lab) groups+=(kernellab) root=1 disk_gib=8 ;;            # kernel tree ~5 GiB while it builds
  kernel-lab-server) groups+=(kernellab kernellab-server) root=1 disk_gib=8 ;; # that, and mmdebstrap
  demo) groups+=(localnode) root=1 disk_gib=14 ;;                 # Kubernetes build cache ~9 GiB
  e2e) groups+=(localnode monitoring) root=1 disk_gib=14 ;;       # that, and a real Prometheus
  e2e-kind) groups+=(kind) root=1 disk_gib=18 ;;                  # that, the node image ~1 GiB, dockerd's data ~3 GiB
  test) groups+=(localnode kind kernellab monitoring) root=1 disk_gib=28 ;;
  *) fail "unknown target $target" ;;
esac

export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || fail "Go is missing: install Go 1.26 at /usr/local/go (https://go.dev/dl/)"
have=$(go env GOVERSION | sed 's/^go//')
want=$(awk '/^go /{print $2}' go.mod)
[ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" = "$want" ] || fail "Go $have is older than go.mod's $want"

if [ $root = 1 ] && [ "$(id -u)" != 0 ]; then
  fail "needs root (it changes cgroups, mounts, iptables and starts a kubelet or a VM): sudo make $target"
fi

missing=$(hack/install-deps.sh --missing "${groups[@]}")
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || fail "missing Debian packages: $missing; run: sudo hack/install-deps.sh ${groups[*]}"
  note "installing missing Debian packages: $missing"
  hack/install-deps.sh "${groups[@]}"
fi

for g in "${groups[@]}"; do
  if [ "$g" = monitoring ]; then
    if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
      fail "promtool or prometheus is not on PATH although Debian's prometheus is installed"
    fi
  fi
done

cache=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}
mkdir -p "$cache"
free_gib=$(( $(df -Pk "$cache" | awk 'NR==2 {print $4}') / 1024 / 1024 ))
if [ "$free_gib" -lt "$disk_gib" ]; then
  # A warm cache needs little; only a cold one needs the room.
  if [ -z "$(ls -A "$cache" 2>/dev/null)" ]; then
    fail "only $free_gib GiB free under $cache; a cold build needs about $disk_gib GiB (or set NUMAPREF_CACHE to a roomier place)"
  fi
  note "only $free_gib GiB free under $cache (a cold build needs about $disk_gib GiB); going on with the warm cache"
fi
note "ok"
