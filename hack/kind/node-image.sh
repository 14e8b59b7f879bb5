#!/usr/bin/env bash
# Builds a kind node image offline, for machines that cannot pull kindest/node (no image
# registry reachable, as on the machines this project is developed on), and prints the path
# of its tarball: a root filesystem for `docker import` (test/kindnode gives it kind's image
# settings: ENTRYPOINT, STOPSIGNAL, container=docker).
#
#   hack/kind/node-image.sh                   build (or find in the cache) and print the path
#   hack/kind/node-image.sh --unless-engine   print nothing where a Docker engine answers: there
#                                             kind's published node image is the default
#
# What it holds, in the place kind's own base and node images put it:
#   - a Debian rootfs (mmdebstrap, from the Debian archive) with the packages kind's base
#     image installs that exist in Debian 12 and that a node needs: systemd, the CNI plugins,
#     iptables, the mount and network tools, curl, jq;
#   - containerd 2.x (containerd, containerd-shim-runc-v2, ctr) and a static runc, built from
#     the Go module proxy by hack/runtime-binaries.sh (cached), in /usr/local/bin and
#     /usr/local/sbin where kind's own base image puts them; its configuration
#     (hack/kind/node/etc/containerd/config.toml) turns NRI on, at /var/run/nri/nri.sock.
#     Debian 12's containerd 1.6 has no NRI; the local node keeps it (make e2e);
#   - kind's own entrypoint, systemd units and helper scripts, taken from the kind module
#     (the version hack/tools.sh pins) at build time;
#   - this project's Kubernetes binaries (hack/k8s-binaries.sh): kubelet, kubeadm, kubectl
#     in /usr/bin, and /kind/version;
#   - the images `kubeadm config images list` names, built from the static binaries with
#     go-containerregistry (hack/kind/images): kube-apiserver, kube-controller-manager,
#     kube-scheduler, etcd and pause (the e2e workload's pause role), in /kind/images and
#     imported into containerd at boot (numapref-preload-images.service). kube-proxy and
#     CoreDNS are not built: the kind provider runs without kube-proxy (its image needs
#     iptables userland, which a one-binary image lacks) and skips kubeadm's CoreDNS addon
#     (nothing in the suite resolves cluster names, and without kube-proxy no pod could
#     reach the DNS Service).
#
# Cached like the other builds: under $NUMAPREF_CACHE/kind-node/<key>, where the key hashes
# every input (this script, hack/kind/node, the image writer and the pause binary's sources,
# the versions and the package list). A warm run prints the path at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
if [ "${1:-}" = --unless-engine ]; then
  if timeout 10 docker info >/dev/null 2>&1; then exit 0; fi
  shift
fi

SUITE=bookworm
# kind's base image package list (images/base/Dockerfile), as Debian 12 has it, less what
# only rootless kind, network storage or storage e2e tests use (fuse-overlayfs, nfs-common,
# open-iscsi), plus Debian's CNI plugins (kind builds its own). The container runtime is
# not Debian's: see the header.
PACKAGES=(
  systemd systemd-sysv dbus
  conntrack iptables nftables iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz e2fsprogs
  bash ca-certificates curl jq procps
  containernetworking-plugins
)
K8S_VERSION=${K8S_VERSION:-1.37.2}
KIND_VERSION=$(hack/tools.sh --version kind)
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}

[ "$(id -u)" = 0 ] || { echo "node-image: mmdebstrap needs root here (sudo $0)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "node-image: mmdebstrap is missing: hack/install-deps.sh kind" >&2; exit 1; }

bin=$(hack/k8s-binaries.sh kind)
# The directory's name holds the runtime's versions.
runtime=$(hack/runtime-binaries.sh)
inputs() {
  printf '%s\n' "suite=$SUITE" "packages=${PACKAGES[*]}" "k8s=$K8S_VERSION" "kind=$KIND_VERSION" "bin=$bin" "runtime=$runtime"
  find hack/kind/node-image.sh hack/kind/node hack/kind/images test/localnode/images.go \
    test/e2e/workload internal/testutil/rawfork -type f | LC_ALL=C sort | xargs sha256sum
}
key=$(inputs | sha256sum | cut -c1-16)
out="$CACHE/kind-node/$key"
if [ -f "$out/node-image.tar" ]; then echo "$out/node-image.tar"; exit 0; fi

start=$(date +%s)
work=$(mktemp -d "$CACHE/kind-node/.build-XXXXXX" 2>/dev/null || { mkdir -p "$CACHE/kind-node"; mktemp -d "$CACHE/kind-node/.build-XXXXXX"; })
trap 'rm -rf "$work"' EXIT
echo "building the kind node image (Kubernetes v$K8S_VERSION, kind $KIND_VERSION, Debian $SUITE) in $work" >&2

# kind's files, from the module at the pinned version.
kindsrc=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
files="$kindsrc/images/base/files"
[ -f "$files/usr/local/bin/entrypoint" ] || { echo "node-image: no kind entrypoint in $kindsrc" >&2; exit 1; }
stage="$work/stage"
install -D -m 0755 "$files/usr/local/bin/entrypoint" "$stage/usr/local/bin/entrypoint"
install -d -m 0755 "$stage/kind/bin" "$stage/etc/systemd/system/kubelet.service.d" "$stage/etc/default" \
  "$stage/etc/kubernetes/manifests" "$stage/kind/images" "$stage/usr/bin"
install -m 0755 "$files"/kind/bin/*.sh "$stage/kind/bin/"
for u in kubelet.service kubelet.slice undo-mount-hacks.service containerd.service; do
  install -m 0644 "$files/etc/systemd/system/$u" "$stage/etc/systemd/system/$u"
done
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/*.conf "$stage/etc/systemd/system/kubelet.service.d/"
install -m 0644 "$files/etc/default/kubelet" "$stage/etc/default/kubelet"
# kind's containerd.service starts /usr/local/bin/containerd, where the runtime goes.
grep -q '^ExecStart=/usr/local/bin/containerd$' "$stage/etc/systemd/system/containerd.service" ||
  { echo "node-image: kind's containerd.service changed shape" >&2; exit 1; }
install -d -m 0755 "$stage/usr/local/bin" "$stage/usr/local/sbin"
for b in containerd containerd-shim-runc-v2 ctr; do install -m 0755 "$runtime/$b" "$stage/usr/local/bin/$b"; done
install -m 0755 "$runtime/runc" "$stage/usr/local/sbin/runc"
# kind's sysctl.d files are left out: systemd-sysctl is masked below (see there), and what
# they set only matters to kindnetd and kind's DNS rewrite, neither of which runs here.

# This project's binaries and files.
for b in kubelet kubeadm kubectl; do install -m 0755 "$bin/$b" "$stage/usr/bin/$b"; done
echo "v$K8S_VERSION" > "$stage/kind/version"
cp -r hack/kind/node/. "$stage/"

# The images kubeadm asks for, from the static binaries.
go build -trimpath -ldflags='-s -w' -o "$work/workload" ./test/e2e/workload
specs=()
while read -r ref; do
  name=${ref#registry.k8s.io/}; name=${name%%:*}
  case "$name" in
    kube-apiserver|kube-controller-manager|kube-scheduler|etcd) specs+=("$ref=$bin/$name") ;;
    pause) specs+=("$ref=$work/workload,pause"); pause=$ref ;;
    kube-proxy|coredns/coredns) ;; # not used: see the header
    *) echo "node-image: kubeadm asks for an image this script does not know: $ref" >&2; exit 1 ;;
  esac
done < <("$bin/kubeadm" config images list --kubernetes-version "v$K8S_VERSION" 2>/dev/null)
[ -n "${pause:-}" ] || { echo "node-image: kubeadm named no pause image" >&2; exit 1; }
CGO_ENABLED=0 go run ./hack/kind/images -out "$stage/kind/images" "${specs[@]}"
sed -i "s#@PAUSE_IMAGE@#$pause#" "$stage/etc/containerd/config.toml"

# The rootfs. The customize hook does what kind's base Dockerfile does after installing
# packages: no services but the node's own, no kmsg in journald, /etc/kubernetes/manifests.
# It also masks two units that would change the host from inside a privileged node:
# systemd-binfmt (binfmt_misc is kernel-global; kind masks it too) and systemd-sysctl
# (Debian's sysctl.d sets kernel.pid_max and other settings that are not per namespace).
chroot_script='
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo ReadKMsg=no >> /etc/systemd/journald.conf
systemctl enable kubelet.service containerd.service undo-mount-hacks.service numapref-preload-images.service
systemctl mask systemd-binfmt.service systemd-sysctl.service
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
'
log="$work/mmdebstrap.log"
if ! mmdebstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --customize-hook="sync-in $stage /" \
    --customize-hook="chroot \"\$1\" sh -euc '$chroot_script'" \
    "$SUITE" "$work/node-image.tar" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "node-image: mmdebstrap failed; log above" >&2
  exit 1
fi
mkdir -p "$out"
mv "$work/node-image.tar" "$out/node-image.tar"
# Older images (other keys) are of no use any more: ~1 GiB each.
find "$CACHE/kind-node" -mindepth 1 -maxdepth 1 -type d -regextype egrep -regex '.*/[0-9a-f]{16}' ! -name "$key" -exec rm -rf {} +
echo "kind node image built in $(( $(date +%s) - start ))s: $(du -h "$out/node-image.tar" | cut -f1)" >&2
echo "$out/node-image.tar"
