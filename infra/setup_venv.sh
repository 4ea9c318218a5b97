#!/usr/bin/env bash
# Creates .venv with Python 3.11 and installs Reflex with its dev tools. Idempotent: a venv whose
# pyproject.toml stamp matches is reused. Python 3.11 because bytewax 0.21.1 has no 3.13 wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for candidate in python3.11 python3.12 "$HOME/.pyenv/versions/3.11.7/bin/python3.11" python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else 1)'; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

stamp=".venv/.reflex-installed"
# The stamp covers what the install builds from: the compiled decoder's source too.
wanted="$(cat pyproject.toml setup.py schemas/plain_*.[ch] | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0
fi
python=$(find_python) || {
  echo "setup_venv: need Python 3.11 or 3.12 (bytewax 0.21.1 has no wheels for newer)." >&2
  exit 1
}
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  apt-get update -q && apt-get install -y -q python3-venv
fi
# A C compiler and Python's headers build the line decoder's fast path (schemas/plain_lines.c);
# without them the install still works and the replay decodes with numpy, about 3 times slower.
headers="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h"
if ! command -v gcc >/dev/null 2>&1 || [ ! -f "$headers" ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    gcc libc6-dev "python3-dev"
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# dev = every extra (agent, flow, all) and the tools: what `make demo` and `make test` need. A
# node installs only its own: pip install 'reflex-localize[agent]' (see docs/installs-and-operations.md).
.venv/bin/python -m pip install -q -e '.[dev]'
echo "$wanted" >"$stamp"
