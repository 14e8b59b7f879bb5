#!/usr/bin/env bash
# Installs the project's build tools at pinned versions into a cache dir outside the tracked
# tree and prints that dir. Usage: hack/tools.sh [tool...]   (default: all)
set -euo pipefail
CACHE=${NUMAPREF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numapref}
declare -A pkgs=(
  [controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
  [helm]=helm.sh/helm/v3/cmd/helm@v3.21.4
)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${!pkgs[@]}")
for t in "${want[@]}"; do
  spec=${pkgs[$t]:?unknown tool $t}
  dir="$CACHE/tools/${spec##*@}"
  if [ ! -x "$dir/$t" ]; then
    echo "installing $spec" >&2
    GOBIN="$dir" CGO_ENABLED=0 GOFLAGS=-trimpath go install "$spec" >&2
  fi
  ln -sfn "$dir/$t" "$CACHE/tools/$t"
done
echo "$CACHE/tools"
