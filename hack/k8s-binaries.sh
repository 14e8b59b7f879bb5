#!/usr/bin/env bash
# Builds real Kubernetes binaries (and etcd) from the Go module proxy, since no prebuilt
# tarballs can be downloaded here. The build lives in a cache dir outside the tracked tree,
# keyed by version, so a warm run only re-links what is missing.
#
#   hack/k8s-binaries.sh [binary...]     default: kube-apiserver etcd kubectl (envtest)
#   hack/k8s-binaries.sh all             those plus kube-controller-manager, kube-scheduler,
#                                        kubelet (the local node)
#   hack/k8s-binaries.sh kind            all of them plus kubeadm (the kind node image)
#   prints the directory that holds the binaries (use it as KUBEBUILDER_ASSETS).
set -euo pipefail
# shellcheck source=lib/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.7.0}
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}
WORK="$CACHE/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION"
BIN="$WORK/bin"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(kube-apiserver etcd kubectl)
[ "${targets[*]}" != all ] || targets=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kubelet)
[ "${targets[*]}" != kind ] || targets=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kubelet kubeadm)

missing=()
for t in "${targets[@]}"; do [ -x "$BIN/$t" ] || missing+=("$t"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi

mkdir -p "$WORK/mod/etcd" "$BIN"
cd "$WORK/mod"
staging_minor="0.${K8S_VERSION#1.}"
if [ ! -f go.mod ]; then
  {
    echo "module numapref.local/k8sbin"
    echo
    echo "go 1.26.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes v$K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 v$ETCD_VERSION"
    echo ")"
    echo
    echo "replace ("
    # Every staging module kubernetes replaces with a local path, at its released version.
    # sample-* are left out: the proxy lacks them at this version and nothing needs them.
    go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
    modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$modfile" | awk '{print $1}' |
      grep -vE '^k8s.io/sample-(cli-plugin|controller)$' |
      while read -r m; do echo "	$m => $m v$staging_minor"; done
    echo ")"
  } > go.mod.tmp
  mv go.mod.tmp go.mod
  cat > etcd/main.go <<'GO'
// Command etcd is the upstream etcd server entry point, built at the version kubernetes pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
fi
# tools.go names every command this script builds, so go.sum covers their dependencies. A
# module made before a command was added (kubeadm) is tidied again once.
tools='//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubeadm"
)'
if [ "$(cat tools.go 2>/dev/null)" != "$tools" ]; then
  printf '%s\n' "$tools" > tools.go
  go mod tidy >&2
fi

pkgs=()
for t in "${missing[@]}"; do
  case "$t" in
    etcd) pkgs+=(./etcd) ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl|kubeadm) pkgs+=("k8s.io/kubernetes/cmd/$t") ;;
    *) echo "unknown binary $t" >&2; exit 2 ;;
  esac
done

v="v$K8S_VERSION"; major=1; minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
ld=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
echo "building ${missing[*]} (Kubernetes $v, etcd v$ETCD_VERSION) in $WORK" >&2
start=$(date +%s)
# go build -v names each package as it compiles it; the total is the packages go list
# finds stale (not in the build cache), so a warm rebuild counts only what it redoes.
export CGO_ENABLED=0
total=$(go list -trimpath -deps -f '{{if .Stale}}x{{end}}' "${pkgs[@]}" 2>/dev/null | grep -c x || true)
log="$WORK/build.log"
progress_start "k8s-binaries" "$log" "${total:-?}" packages '^[^[:space:]#]'
if ! go build -v -trimpath -ldflags "$ld" -o "$BIN/" "${pkgs[@]}" >"$log" 2>&1; then
  progress_stop
  grep -vE '^[a-zA-Z0-9_./-]+$' "$log" | tail -n 40 >&2
  echo "building the Kubernetes binaries failed; full log: $log" >&2
  exit 1
fi
progress_stop
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
