#!/usr/bin/env bash
# Builds numapref's image from the Dockerfile with the container engine this machine has
# (docker or podman), tagged IMG; --push pushes it, --archive FILE saves it (docker save's
# format, which `kind load image-archive`, `ctr images import` and `podman load` read).
# The binary is compiled here with the pinned Go toolchain, static, for GOARCH (default:
# this machine's), and put in a build context of its own with LICENSE and the Dockerfile.
# Usage: IMG=<registry>/numapref:<tag> hack/image.sh [--push] [--archive FILE]
#   (make image IMG=... [PUSH=1] [ARCHIVE=FILE])
#   ENGINE  the engine's CLI (default: docker, else podman, from PATH)
#   BASE    the Dockerfile's base image (default: distroless/static; scratch works offline)
set -euo pipefail
cd "$(dirname "$0")/.."
img=${IMG:?"image: IMG=<registry>/numapref:<tag> is required"}
push=0 archive=
while [ $# -gt 0 ]; do
  case $1 in
    --push) push=1 ;;
    --archive) archive=${2:?"image: --archive needs a file"}; shift ;;
    *) echo "usage: IMG=<ref> $0 [--push] [--archive FILE]" >&2; exit 2 ;;
  esac
  shift
done
engine=${ENGINE:-$(command -v docker || command -v podman || true)}
[ -n "$engine" ] || { echo "image: no container engine: install docker or podman, or set ENGINE" >&2; exit 1; }
arch=${GOARCH:-$(go env GOARCH)}

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags='-s -w' -o "$context/numapref" ./cmd/numapref
cp Dockerfile LICENSE "$context/"

args=(build --network none -t "$img")
if [ -n "${BASE:-}" ]; then args+=(--build-arg "BASE=$BASE"); fi
if [ "$arch" != "$(go env GOHOSTARCH)" ]; then args+=(--platform "linux/$arch"); fi
"$engine" "${args[@]}" "$context"
echo "image: built $img (linux/$arch) with $engine"
if [ -n "$archive" ]; then
  "$engine" save -o "$archive" "$img"
  echo "image: saved $img to $archive"
fi
if [ $push = 1 ]; then
  "$engine" push "$img"
  echo "image: pushed $img"
fi
