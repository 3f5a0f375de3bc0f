#!/usr/bin/env bash
# Makes a release's archives:
#   scripts/release.sh VERSION [OUTDIR]
# builds doubletake for linux and darwin on amd64 and arm64 (static,
# CGO_ENABLED=0, -trimpath) with VERSION and the commit stamped in, and
# writes OUTDIR (default dist/) with
#   doubletake_VERSION_OS_ARCH.tar.gz   doubletake, LICENSE, README.md, CHANGELOG.md
#                                       in a directory of the same name
#   SHA256SUMS                          their sha256 sums (sha256sum -c SHA256SUMS)
# TARGETS="linux/amd64" builds fewer targets. A checkout with uncommitted
# changes is refused unless ALLOW_DIRTY=1 (the binary then says so).
# The archives are reproducible: same commit, same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release.sh: VERSION must be a semantic version such as v1.2.3 (got '${version}')" >&2
  echo "usage: scripts/release.sh VERSION [OUTDIR]" >&2
  exit 2
fi
out=${2:-dist}
targets=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}

commit=$(git rev-parse HEAD)
modified=
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  if [ "${ALLOW_DIRTY:-}" != 1 ]; then
    echo "release.sh: the checkout has uncommitted changes; commit them (ALLOW_DIRTY=1 builds anyway)" >&2
    exit 1
  fi
  modified=true
fi
# Every file in the archives gets the commit's time: same commit, same bytes.
epoch=$(git log -1 --format=%ct)

mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=github.com/doubletake/doubletake/internal/buildinfo
archives=()
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  name=doubletake_${version}_${os}_${arch}
  mkdir -p "$stage/$name"
  echo "release.sh: building $name" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.Modified=$modified" \
    -o "$stage/$name/doubletake" ./cmd/doubletake
  cp LICENSE README.md CHANGELOG.md "$stage/$name/"
  tar -C "$stage" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' -cf - "$name" | gzip -9 -n > "$out/$name.tar.gz"
  archives+=("$name.tar.gz")
done
(cd "$out" && sha256sum "${archives[@]}" > SHA256SUMS)
echo "release.sh: $out/SHA256SUMS" >&2
cat "$out/SHA256SUMS"
