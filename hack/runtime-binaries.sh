#!/usr/bin/env bash
# Builds a current container runtime for the local node, the kind node image and the kernel
# lab's VM from the Go module proxy: containerd 2.x (containerd, containerd-shim-runc-v2, ctr; it has NRI,
# Debian's 1.6 has not), runc, and crictl (sigs.k8s.io/cri-tools), the CRI client the
# kernel lab starts its pod with. Each is built inside its own module as the proxy serves
# it, with that module's go.mod and go.sum, so the dependencies are the ones upstream
# released with. Every binary is static: the kernel lab's initramfs has no libc. The
# binaries live in a cache dir outside the tracked tree, keyed by the three versions; a
# warm run builds nothing.
#
#   hack/runtime-binaries.sh     prints the directory that holds the binaries
#                                (go run ./hack/localnode up ... -runtime-dir DIR)
#
# CONTAINERD_VERSION, RUNC_VERSION and CRICTL_VERSION pick other versions. runc needs cgo
# and libseccomp, linked statically as upstream's `make static` does (gcc, pkg-config,
# libseccomp-dev, whose libseccomp.a it links: hack/install-deps.sh localnode or
# kernellab); containerd and crictl are pure Go.
set -euo pipefail
# shellcheck source=lib/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.4.2}
RUNC_VERSION=${RUNC_VERSION:-1.4.4}
CRICTL_VERSION=${CRICTL_VERSION:-1.37.0}
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}
# "static" names the runc build: a cache of the earlier, dynamically linked runc is not
# taken for it.
WORK="$CACHE/runtime-containerd-v$CONTAINERD_VERSION-runc-v$RUNC_VERSION-static-crictl-v$CRICTL_VERSION"
BIN="$WORK/bin"
CONTAINERD=github.com/containerd/containerd/v2
RUNC=github.com/opencontainers/runc
CRITOOLS=sigs.k8s.io/cri-tools

need_containerd=0 need_runc=0 need_crictl=0
for t in containerd containerd-shim-runc-v2 ctr; do [ -x "$BIN/$t" ] || need_containerd=1; done
[ -x "$BIN/runc" ] || need_runc=1
[ -x "$BIN/crictl" ] || need_crictl=1
if [ $need_containerd = 0 ] && [ $need_runc = 0 ] && [ $need_crictl = 0 ]; then echo "$BIN"; exit 0; fi

if [ $need_runc = 1 ]; then
  for tool in gcc pkg-config; do
    command -v "$tool" >/dev/null || { echo "runtime-binaries: runc needs $tool: run hack/install-deps.sh localnode (or kind, or kernellab)" >&2; exit 1; }
  done
  if ! pkg-config --exists libseccomp || [ ! -f "$(pkg-config --variable=libdir libseccomp)/libseccomp.a" ]; then
    echo "runtime-binaries: runc needs libseccomp's headers and static library (libseccomp-dev): run hack/install-deps.sh localnode (or kind, or kernellab)" >&2
    exit 1
  fi
fi

mkdir -p "$BIN"
# srcdir MODULE VERSION: the module's source in the module cache, downloaded if missing.
srcdir() {
  local dir
  dir=$(go mod download -json "$1@v$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "runtime-binaries: the module proxy has no $1 v$2" >&2; exit 1; }
  echo "$dir"
}

# build LABEL SRC CGO TAGS LDFLAGS [-buildmode=MODE] PKG...: go build in the module's own
# directory (its go.mod selects the dependencies) into $BIN, with progress lines while it
# compiles; its log is $WORK/build-LABEL.log.
build() {
  local label=$1 src=$2 cgo=$3 tags=$4 ld=$5 log="$WORK/build-$1.log" total mode=()
  shift 5
  case "$1" in -buildmode=*) mode=("$1"); shift ;; esac
  total=$(CGO_ENABLED=$cgo go -C "$src" list -trimpath -tags "$tags" -deps -f '{{if .Stale}}x{{end}}' "$@" 2>/dev/null | grep -c x || true)
  progress_start "runtime-binaries $label" "$log" "${total:-?}" packages '^[^[:space:]#]'
  if ! CGO_ENABLED=$cgo go -C "$src" build -v -trimpath "${mode[@]}" -tags "$tags" -ldflags "$ld" -o "$BIN/" "$@" >"$log" 2>&1; then
    progress_stop
    grep -vE '^[a-zA-Z0-9_./-]+$' "$log" | tail -n 40 >&2
    echo "building $label failed; full log: $log" >&2
    exit 1
  fi
  progress_stop
}

start=$(date +%s)
if [ $need_containerd = 1 ]; then
  src=$(srcdir "$CONTAINERD" "$CONTAINERD_VERSION")
  echo "building containerd v$CONTAINERD_VERSION (containerd, containerd-shim-runc-v2, ctr) in $WORK" >&2
  # containerd's Makefile: urfave_cli_no_docs everywhere, no_grpc for the shim, the version
  # package filled at link time. Built without cgo (static), so without the btrfs
  # snapshotter (cgo only); devmapper and zfs are left out too: the node uses overlayfs.
  tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
  ld="-X $CONTAINERD/version.Version=v$CONTAINERD_VERSION -X $CONTAINERD/version.Package=$CONTAINERD"
  build containerd "$src" 0 "$tags" "$ld" ./cmd/containerd ./cmd/ctr
  build containerd-shim "$src" 0 "$tags no_grpc" "$ld" ./cmd/containerd-shim-runc-v2
fi
if [ $need_runc = 1 ]; then
  src=$(srcdir "$RUNC" "$RUNC_VERSION")
  echo "building runc v$RUNC_VERSION (static) in $WORK" >&2
  # runc's Makefile, `make static` on amd64: seccomp (libseccomp through cgo; pods with the
  # RuntimeDefault profile need it) and urfave_cli_no_docs, plus netgo and osusergo (no
  # glibc NSS at run time), a static PIE linked by gcc. Its version is embedded from its
  # VERSION file; there is no git commit to put in main.gitCommit.
  build runc "$src" 1 "seccomp urfave_cli_no_docs netgo osusergo" "-linkmode external -extldflags -static-pie" -buildmode=pie .
fi
if [ $need_crictl = 1 ]; then
  src=$(srcdir "$CRITOOLS" "$CRICTL_VERSION")
  echo "building crictl v$CRICTL_VERSION in $WORK" >&2
  # cri-tools' Makefile: the version package filled at link time (without the v), no cgo.
  build crictl "$src" 0 "" "-X $CRITOOLS/pkg/version.Version=$CRICTL_VERSION" ./cmd/crictl
fi
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
