#!/usr/bin/env bash
# The test command: installs what the tests use when it is absent
# (Prometheus, Node.js, Chromium, jq, curl and podman from Debian's packages, the JS SDK client's npm
# packages, the Python virtualenvs of test/python, the Java agent by Maven coordinates), then runs every Go test. Under CI=true a dependency that cannot
# be installed fails the run; tests never skip for it.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# promtool (the alert rules' unit tests) comes with the same package.
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v jq >/dev/null 2>&1 || missing+=(jq)
# curl: the README's walkthrough; podman: the container image is built.
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v podman >/dev/null 2>&1 || missing+=(podman)
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing ${missing[*]} from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "test.sh: missing ${missing[*]}; install them (apt-get install -y ${missing[*]})" >&2
    [ "${CI:-}" = true ] && exit 1
  fi
fi

if command -v npm >/dev/null 2>&1; then
  (cd test/jsclient && npm ci --no-audit --no-fund --loglevel=error)
elif [ "${CI:-}" = true ]; then
  echo "test.sh: npm is required under CI=true" >&2
  exit 1
fi

# The seed's Python stack (test/python: the SDK, FastAPI 0.142 and 0.143,
# uvicorn, gunicorn, pytest; uv and Poetry for the scan tests), each requirements file's exact pins in a
# virtualenv cached under ${XDG_CACHE_HOME:-~/.cache}/doubletake (built once
# per machine; the e2e tests find them the same way).
if ! scripts/pyenv.sh test/python/requirements-*.txt >/dev/null; then
  echo "test.sh: the Python virtualenvs of test/python could not be built" >&2
  [ "${CI:-}" = true ] && exit 1
fi

# The OpenTelemetry Java agent and the Java test app's dependencies
# (test/java/pom.xml, by Maven coordinates), copied into the same cache and
# the app compiled there (scripts/javadeps.sh).
if ! scripts/javadeps.sh >/dev/null; then
  echo "test.sh: the Java agent and test/java's dependencies could not be fetched" >&2
  [ "${CI:-}" = true ] && exit 1
fi

# The files mdatagen generates from each metadata.yaml match what is
# committed (scripts/generate.sh regenerates them; CI=true fails on a
# difference, elsewhere it is reported and the run goes on).
if ! scripts/generate.sh --check; then
  [ "${CI:-}" = true ] && exit 1
  echo "test.sh: generated files are stale (see above); continuing outside CI" >&2
fi

go vet ./...

# The linter (.golangci.yml), at a pinned version built from the Go module
# proxy into bin/ when absent. It runs by default and fails on any
# finding; LINT=0 skips it.
golangci_version=v2.15.0
if [ "${LINT:-1}" = 1 ]; then
  lint=bin/golangci-lint
  if ! [ -x "$lint" ] || ! "$lint" version 2>/dev/null | grep -q "version ${golangci_version#v} "; then
    echo "test.sh: installing golangci-lint $golangci_version into bin/" >&2
    GOBIN="$PWD/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_version"
  fi
  "$lint" run ./...
fi

go test -count=1 -timeout 40m ./... "$@"

# The concurrent paths again under the race detector.
go test -count=1 -race ./processor/... ./internal/capture/ ./internal/groupcommit/
go test -count=1 -race -run GroupCommit ./exporter/dedupotlpexporter/

# Every fuzz target, briefly, from its committed seed corpus
# (testdata/fuzz/<Target>): FUZZTIME=0 skips this step.
# The budget is a count of executions, not a duration: with a duration,
# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
# failure ("context deadline exceeded", no crasher written) when a loaded
# machine starves a worker at the boundary (golang/go#75804, fixed in 1.27).
# A count has no deadline to race. FUZZTIME=30s still works, with that risk.
fuzztime=${FUZZTIME:-20000x}
fuzzlog=$(mktemp)
trap 'rm -f "$fuzzlog"' EXIT
if [ "$fuzztime" != 0 ]; then
  for pkg in $(go list ./...); do
    for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
      echo "fuzz: $pkg $target ($fuzztime)"
      if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$fuzzlog" 2>&1; then
        cat "$fuzzlog"
        exit 1
      fi
    done
  done
fi
