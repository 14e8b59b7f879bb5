#!/usr/bin/env bash
# Installs the project's build tools at pinned versions into a cache dir outside the tracked
# tree and prints that dir. Usage: hack/tools.sh [tool...]   (default: all)
#                                   hack/tools.sh --version TOOL   (its pinned module version)
set -euo pipefail
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}
declare -A pkgs=(
  [controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
  [helm]=helm.sh/helm/v3/cmd/helm@v3.21.4
  [kube-score]=github.com/zegl/kube-score/cmd/kube-score@v1.20.0
  # kind: the e2e suite's kind provider (E2E_PROVIDER=kind) and, from the same module
  # version, the node image's entrypoint and systemd units (hack/kind/node-image.sh).
  [kind]=sigs.k8s.io/kind@v0.33.0
  # golangci-lint: make lint (config in .golangci.yml). It reads its own version from the
  # module's build info, so a plain go install reports v2.15.0 without link flags.
  [golangci-lint]=github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
)
# Link-time settings a plain `go install` misses. helm's release builds stamp its version and
# the Kubernetes version of its client-go (v0.36 -> 1.36); without them `helm version` says
# v3.21 and `helm template`/`helm lint` assume Kubernetes v1.20 (.Capabilities.KubeVersion,
# Chart.yaml kubeVersion checks, API deprecation lint). kube-score's goreleaser stamps its
# version (`kube-score version` says "development" without it); its commit stays "N/A".
declare -A ldflags=(
  [helm]="-X helm.sh/helm/v3/internal/version.version=v3.21.4 -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=36 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=36"
  [kube-score]="-X main.version=v1.20.0"
)
if [ "${1:-}" = --version ]; then
  spec=${pkgs[${2:?usage: hack/tools.sh --version TOOL}]:?unknown tool $2}
  echo "${spec##*@}"
  exit 0
fi
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${!pkgs[@]}")
for t in "${want[@]}"; do
  spec=${pkgs[$t]:?unknown tool $t}
  ld=${ldflags[$t]:-}
  dir="$CACHE/tools/${spec##*@}"
  # A change of link flags is a different build: give it its own dir.
  [ -z "$ld" ] || dir="$dir-$(printf %s "$ld" | sha256sum | cut -c1-8)"
  if [ ! -x "$dir/$t" ]; then
    echo "installing $spec" >&2
    GOBIN="$dir" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags="$ld" "$spec" >&2
  fi
  ln -sfn "$dir/$t" "$CACHE/tools/$t"
done
echo "$CACHE/tools"
