#!/usr/bin/env bash
# scripts/pyenv.sh REQUIREMENTS...: for each requirements file (exact
# versions, the whole tree), makes sure a virtualenv with exactly those
# packages exists in the cache and prints its directory, one line per file.
# The cache is ${DOUBLETAKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/doubletake}
# and a virtualenv is keyed by its requirements file's hash and the Python
# it was built with, so it is built once per machine and rebuilt when a pin
# changes. A virtualenv is usable once it holds .complete (written last);
# an interrupted build is removed and redone. Builds hold a lock, so two
# callers never build the same one at once. Exits non-zero, saying why,
# when python3 or an install fails.
set -euo pipefail
cache=${DOUBLETAKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/doubletake}
python=${DOUBLETAKE_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "pyenv.sh: $python not found" >&2; exit 1; }
pyver=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
mkdir -p "$cache"
exec 9>"$cache/.pyenv.lock"
flock 9
for req in "$@"; do
  [ -f "$req" ] || { echo "pyenv.sh: $req: no such file" >&2; exit 1; }
  key=$( { cat "$req"; echo "python $pyver"; } | sha256sum | cut -c1-16)
  dir="$cache/venv-$(basename "$req" .txt)-$key"
  if ! [ -f "$dir/.complete" ]; then
    echo "pyenv.sh: building $dir from $req (Python $pyver)" >&2
    # Built in place: a virtualenv's scripts name its own path.
    rm -rf "$dir"
    "$python" -m venv "$dir" >&2
    if ! "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$req" >&2 ||
      ! "$dir/bin/python" -m pip check >&2; then
      rm -rf "$dir"
      echo "pyenv.sh: installing $req failed" >&2
      exit 1
    fi
    touch "$dir/.complete"
  fi
  echo "$dir"
done
