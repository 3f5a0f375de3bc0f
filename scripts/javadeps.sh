#!/usr/bin/env bash
# scripts/javadeps.sh: copies the Java test app's dependencies and the
# OpenTelemetry Java agent (test/java/pom.xml, by Maven coordinates) into a
# directory of the cache keyed by the pom's hash, compiles test/java/App.java
# against them, and prints the directory: lib/ (the classpath), agent/ (the
# agent jar), classes/. The cache is
# ${DOUBLETAKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/doubletake}; the
# directory is usable once it holds .complete (written last). Exits non-zero,
# saying why, when mvn, javac or a download fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache=${DOUBLETAKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/doubletake}
for tool in mvn javac; do
  command -v "$tool" >/dev/null 2>&1 || { echo "javadeps.sh: $tool not found" >&2; exit 1; }
done
pom="$root/test/java/pom.xml"
key=$(cat "$pom" "$root/test/java/App.java" | sha256sum | cut -c1-16)
dir="$cache/java-$key"
mkdir -p "$cache"
exec 9>"$cache/.javadeps.lock"
flock 9
if ! [ -f "$dir/.complete" ]; then
  echo "javadeps.sh: building $dir from $pom" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dir/lib" \
    -DexcludeArtifactIds=opentelemetry-javaagent >&2 ||
    ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dir/agent" \
      -DincludeArtifactIds=opentelemetry-javaagent -DexcludeTransitive=true >&2 ||
    ! javac -d "$dir/classes" -cp "$dir/lib/*" "$root/test/java/App.java" >&2; then
    rm -rf "$dir"
    echo "javadeps.sh: fetching or compiling the Java app failed" >&2
    exit 1
  fi
  touch "$dir/.complete"
fi
echo "$dir"
