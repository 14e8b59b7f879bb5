#!/usr/bin/env bash
# Builds the kernel lab's forking server image and prints the path of its tarball: Debian
# 12's PostgreSQL 15 in a Debian rootfs (mmdebstrap, from the Debian archive, like the kind
# node image), as a `docker save` tarball that `ctr images import` reads in the lab's VM
# (test/kernellab/agent's TestForkingServer, hack/kernel/lab.sh --server).
#
#   hack/kernel/server-image.sh      build (or find in the cache) and print the path
#
# What it holds:
#   - postgresql-15 and what it depends on, less what the lab never reads: documentation,
#     manual pages, message catalogues, and the JIT (libLLVM and the server's bitcode; the
#     server runs with jit=off). The VM's root is an initramfs in guest RAM, and the image
#     is held there three times (the tarball, containerd's content store, the snapshot).
#   - a database cluster in /var/lib/postgresql/data, made by initdb (trust
#     authentication, on 127.0.0.1 and a socket in /tmp), with pgbench's tables at scale 1
#     already loaded: under qemu's TCG neither needs to run in the VM.
#   - the image's user is postgres and its command the server in the foreground.
#
# Cached like the other builds: under $NUMAPREF_CACHE/server-image/<key>, where the key
# hashes every input (this script, the image writer's sources, the suite and the package
# list). A warm run prints the path at once. Needs root (mmdebstrap's chroot hooks).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin

SUITE=bookworm
PACKAGES=(postgresql-15)
REF=numapref.local/postgres:15
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}

[ "$(id -u)" = 0 ] || { echo "server-image: mmdebstrap needs root here (sudo $0)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "server-image: mmdebstrap is missing: hack/install-deps.sh kernellab-server" >&2; exit 1; }

inputs() {
  printf '%s\n' "suite=$SUITE" "packages=${PACKAGES[*]}" "ref=$REF"
  find hack/kernel/server-image.sh hack/kernel/rootfsimage test/localnode/images.go -type f |
    LC_ALL=C sort | xargs sha256sum
}
key=$(inputs | sha256sum | cut -c1-16)
out="$CACHE/server-image/$key"
if [ -f "$out/server-image.tar" ]; then echo "$out/server-image.tar"; exit 0; fi

start=$(date +%s)
mkdir -p "$CACHE/server-image"
work=$(mktemp -d "$CACHE/server-image/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building the forking server image (PostgreSQL 15, Debian $SUITE) in $work" >&2

# What dpkg leaves out of every package: read by no one in the lab.
excludes=(
  "/usr/share/doc/*" "/usr/share/man/*" "/usr/share/info/*" "/usr/share/locale/*" "/usr/share/i18n/*"
  "/usr/share/lintian/*" "/usr/lib/x86_64-linux-gnu/libLLVM*" "/usr/lib/postgresql/15/lib/bitcode/*"
)
dpkgopts=()
for e in "${excludes[@]}"; do dpkgopts+=(--dpkgopt="path-exclude=$e"); done
dpkgopts+=(--dpkgopt='path-include=/usr/share/doc/*/copyright')

# The cluster: the package's own main cluster dropped, one of the lab's made with initdb,
# started on its socket alone (the chroot shares the host's network) to load pgbench's
# tables, and stopped.
cat >"$work/setup.sh" <<'SETUP'
pg_dropcluster 15 main
bin=/usr/lib/postgresql/15/bin data=/var/lib/postgresql/data
install -d -o postgres -g postgres -m 0700 "$data"
su postgres -s /bin/sh -c "$bin/initdb -D $data -A trust -U postgres --no-sync --no-instructions" >/dev/null
cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '/tmp'
jit = off
max_connections = 50
shared_buffers = 16MB
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -o '-c listen_addresses=' -w start" >/dev/null
su postgres -s /bin/sh -c "$bin/pgbench -h /tmp -U postgres -i -s 1 -q postgres" >/dev/null 2>&1
su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -m fast -w stop" >/dev/null
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/postgresql/*
SETUP
log="$work/mmdebstrap.log"
if ! mmdebstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "${dpkgopts[@]}" \
    --customize-hook="chroot \"\$1\" sh -eu <'$work/setup.sh'" \
    "$SUITE" "$work/rootfs.tar" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "server-image: mmdebstrap failed; log above" >&2
  exit 1
fi
go run ./hack/kernel/rootfsimage -rootfs "$work/rootfs.tar" -ref "$REF" -user postgres \
  -env PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin \
  -out "$work/server-image.tar" -- postgres -D /var/lib/postgresql/data
mkdir -p "$out"
mv "$work/server-image.tar" "$out/server-image.tar"
# Older images (other keys) are of no use any more.
find "$CACHE/server-image" -mindepth 1 -maxdepth 1 -type d -regextype egrep -regex '.*/[0-9a-f]{16}' ! -name "$key" -exec rm -rf {} +
echo "server image built in $(( $(date +%s) - start ))s: $(du -h "$out/server-image.tar" | cut -f1)" >&2
echo "$out/server-image.tar"
