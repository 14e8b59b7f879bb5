#!/usr/bin/env bash
# Installs the Debian packages the tests need, when missing. Idempotent; needs root.
set -euo pipefail
pkgs=(make git procps iproute2 curl
  # The local node (test/localnode): container runtime, CNI plugins, iptables for the
  # chains kubelet makes and teardown removes.
  containerd runc containernetworking-plugins iptables)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v go >/dev/null || { echo "Go is required (/usr/local/go on these machines)" >&2; exit 1; }
