#!/usr/bin/env bash
# Installs the Debian packages the demo and the tests need, when missing. Idempotent;
# installing needs root.
#
#   hack/install-deps.sh [GROUP...]          install what is missing (default: every group)
#   hack/install-deps.sh --missing [GROUP...] print the missing packages, install nothing
#
# Groups: base (every target), localnode (make demo, make e2e: a real node on this
# machine), kind (make e2e-kind: Docker and the offline node image), kernellab (make
# kernel-lab: qemu, the kernel source and its build tools), kernellab-server (make
# kernel-lab-server: mmdebstrap), monitoring (make
# monitoring-test, make e2e: promtool and a Prometheus server).
set -euo pipefail

declare -A groups=(
  # base also holds the linter make lint (and so make verify) runs over hack/ and .ci/.
  [base]="make git procps iproute2 curl util-linux ca-certificates shellcheck"
  # The local node (test/localnode): container runtime, CNI plugins, iptables for the
  # chains kubelet makes and teardown removes. gcc, pkg-config and libseccomp-dev build
  # runc for hack/runtime-binaries.sh (containerd 2.x with NRI): runc links libseccomp
  # through cgo, and pods with the RuntimeDefault seccomp profile need it.
  [localnode]="containerd runc containernetworking-plugins iptables gcc pkg-config libseccomp-dev"
  # kind (test/kindnode, hack/kind/node-image.sh): Debian's Docker engine (20.10; the suite
  # starts its own dockerd where no engine runs), mmdebstrap for the node image's Debian
  # rootfs, iptables for the host snapshot's rule check; gcc, pkg-config and libseccomp-dev
  # build the static runc the node image holds (hack/runtime-binaries.sh).
  [kind]="docker.io mmdebstrap iptables gcc pkg-config libseccomp-dev"
  # The kernel lab (hack/kernel): qemu, Debian's 6.12 source for the patched kernel and
  # what building it takes; the control kernel is downloaded with apt-get download.
  # pkg-config and libseccomp-dev (with build-essential's gcc) build the static runc the
  # lab's VM runs its CRI pod with (hack/runtime-binaries.sh links libseccomp.a).
  [kernellab]="qemu-system-x86 linux-source-6.12 flex bison libelf-dev bc cpio xz-utils patch build-essential pkg-config libseccomp-dev"
  # The kernel lab's forking server (make kernel-lab-server): mmdebstrap for its image's
  # Debian rootfs (hack/kernel/server-image.sh).
  [kernellab-server]="mmdebstrap"
  # Monitoring (test/monitoring, test/e2e/monitoring_test.go): Debian's Prometheus 2.42, its
  # promtool for the rules' unit tests, and the server the e2e starts by hand and stops by
  # pid (no service starts while installing: policy-rc.d below).
  [monitoring]="prometheus"
)
order=(base localnode kind kernellab kernellab-server monitoring)

check_only=0
if [ "${1:-}" = --missing ]; then check_only=1; shift; fi
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${order[@]}")

missing=()
for g in "${want[@]}"; do
  [ -n "${groups[$g]+x}" ] || { echo "install-deps: unknown group $g (known: ${order[*]})" >&2; exit 2; }
  for p in ${groups[$g]}; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
done

if [ $check_only = 1 ]; then
  [ ${#missing[@]} -eq 0 ] || echo "${missing[*]}"
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "install-deps: installing ${missing[*]} needs root: sudo $0 ${want[*]}" >&2; exit 1; }
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  # Installing docker.io starts dockerd through its init script unless policy-rc.d says no:
  # the suite starts its own, with its own directories and no iptables rules, and a system
  # one would change the host (docker0, iptables chains). Say no for this install only.
  policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# hack/install-deps.sh: no service starts while it installs\nexit 101\n' > "$policy"
    chmod 755 "$policy"; made_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || { [ $made_policy = 0 ] || rm -f "$policy"; exit 1; }
  [ $made_policy = 0 ] || rm -f "$policy"
fi
# The kernel lab fetches its control kernel with apt-get download, which needs the
# archive's package lists: a fresh Debian image has none, and the apt-get update above
# runs only when a package is missing.
case " ${want[*]} " in
*" kernellab "*)
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "install-deps: the kernel lab needs apt's package lists: sudo apt-get update" >&2; exit 1; }
    echo "install-deps: no apt package lists (the kernel lab's control kernel is fetched with apt-get download): apt-get update" >&2
    apt-get update -qq
  fi
  ;;
esac
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "install-deps: Go is required (/usr/local/go on these machines)" >&2; exit 1; }
