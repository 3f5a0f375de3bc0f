#!/usr/bin/env bash
# Regenerates what mdatagen makes from each component's metadata.yaml: the
# type and stability (internal/metadata/generated_status.go), the telemetry
# builder (internal/metadata/generated_telemetry.go, internal/metadatatest),
# documentation.md and the generated component tests (generated_*_test.go).
#
# mdatagen is pinned in internal/tools/go.mod at v0.150.0, a release
# whose tool builds here: v0.161.0 requires
# go.opentelemetry.io/collector/internal/schemagen v0.161.0, which is not
# served, and its replace directives make `go run mdatagen@v0.161.0`
# refuse it.
#
#   scripts/generate.sh          regenerate in place
#   scripts/generate.sh --check  regenerate, then fail when the result
#                                differs from what git has committed
set -euo pipefail
cd "$(dirname "$0")/.."

components=(processor/dedupprocessor extension/guardextension exporter/dedupotlpexporter
  exporter/dedupotlphttpexporter exporter/serieslimitprometheusexporter
  extension/encoding/otlpjsonencodingextension extension/logstorageextension)

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd internal/tools && go build -o "$bin/mdatagen" go.opentelemetry.io/collector/cmd/mdatagen)
for c in "${components[@]}"; do
  (cd "$c" && "$bin/mdatagen" metadata.yaml)
done

[ "${1:-}" = --check ] || exit 0

generated=()
for c in "${components[@]}"; do
  generated+=("$c/metadata.yaml" "$c/internal/metadata" "$c/internal/metadatatest"
    "$c/documentation.md" "$c"/generated_*_test.go)
done
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "generate.sh: not a git checkout, cannot compare the generated files" >&2
  exit 1
fi
changed=$(git status --porcelain --untracked-files=all -- "${generated[@]}")
if [ -n "$changed" ]; then
  echo "generate.sh: generated files differ from what is committed:" >&2
  echo "$changed" >&2
  git --no-pager diff --stat -- "${generated[@]}" >&2
  echo "generate.sh: run scripts/generate.sh and commit the result with its metadata.yaml" >&2
  exit 1
fi
