#!/usr/bin/env bash
# Builds kubectl-numapref's release archives for krew and renders its manifest:
# dist/kubectl-numapref_v<VERSION>_<os>_<arch>.tar.gz (the static binary and LICENSE) for
# each platform, and dist/numapref.yaml (hack/krew/numapref.yaml.tmpl) with their sha256.
# Usage: VERSION=<semver> hack/plugin-archive.sh   (make plugin-archive VERSION=...)
#   PLATFORMS  os/arch pairs (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
#   URL_BASE   where the release's archives are downloaded from
#              (default: https://github.com/numapref/numapref/releases/download/v<VERSION>)
#   DIST       the output directory (default: dist)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:?"plugin-archive: VERSION=<semver> is required, without a leading v"}
# Semantic versioning 2.0: MAJOR.MINOR.PATCH, an optional pre-release and build.
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
[[ $version =~ $semver ]] || { echo "plugin-archive: VERSION $version is not a semantic version (MAJOR.MINOR.PATCH)" >&2; exit 2; }
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
url_base=${URL_BASE:-https://github.com/numapref/numapref/releases/download/v$version}
dist=${DIST:-dist}
mkdir -p "$dist"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

entries=""
for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  name=kubectl-numapref_v${version}_${os}_${arch}.tar.gz
  mkdir -p "$work/$os-$arch"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="-s -w -X main.version=v$version" \
    -o "$work/$os-$arch/kubectl-numapref" ./cmd/kubectl-numapref
  cp LICENSE "$work/$os-$arch/"
  # Reproducible: fixed owner, mode and time, sorted names.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00:00Z' \
    -C "$work/$os-$arch" -cf - LICENSE kubectl-numapref | gzip -n >"$dist/$name"
  sum=$(sha256sum "$dist/$name" | cut -d' ' -f1)
  entries+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url_base/$name
    sha256: $sum
    bin: kubectl-numapref
    files:
    - from: kubectl-numapref
      to: .
    - from: LICENSE
      to: .
"
  echo "plugin-archive: $dist/$name ($sum)"
done
awk -v version="$version" -v platforms="$entries" '
  { gsub(/@VERSION@/, version) }
  /^@PLATFORMS@$/ { printf "%s", platforms; next }
  { print }' hack/krew/numapref.yaml.tmpl >"$dist/numapref.yaml"
echo "plugin-archive: $dist/numapref.yaml"
