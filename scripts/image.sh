#!/usr/bin/env bash
# Builds the doubletake container image from deploy/Containerfile:
#   scripts/image.sh [VERSION] [TAG]
# VERSION (default: dev) is stamped into the binary and the image's labels;
# TAG defaults to doubletake:VERSION. Uses podman, or docker when podman is
# absent. Nothing is pulled: the image is FROM scratch.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-dev}
tag=${2:-doubletake:$version}
engine=${CONTAINER_ENGINE:-$(command -v podman || command -v docker || true)}
if [ -z "$engine" ]; then
  echo "image.sh: neither podman nor docker is installed" >&2
  exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/var/lib" "$ctx/rootfs/tmp" "$ctx/data"
chmod 1777 "$ctx/rootfs/tmp"
cp deploy/image/passwd deploy/image/group "$ctx/rootfs/etc/"
certs=${CA_CERTIFICATES:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -f "$certs" ]; then
  echo "image.sh: $certs not found (Debian's ca-certificates; CA_CERTIFICATES=FILE names another)" >&2
  exit 1
fi
cp "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
pkg=github.com/doubletake/doubletake/internal/buildinfo
commit=$(git rev-parse HEAD 2>/dev/null || true)
modified=
[ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no)" ] && modified=true
# The same flags as scripts/release.sh: one build cache serves both.
CGO_ENABLED=0 GOOS=linux GOARCH=${GOARCH:-$(go env GOARCH)} go build -trimpath -buildvcs=false \
  -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.Modified=$modified" \
  -o "$ctx/doubletake" ./cmd/doubletake
cp deploy/Containerfile "$ctx/Containerfile"
"$engine" build --build-arg "VERSION=$version" -t "$tag" -f "$ctx/Containerfile" "$ctx"
echo "$tag"
