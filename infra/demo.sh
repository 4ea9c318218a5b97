#!/usr/bin/env bash
# The main job on a fresh machine: venv, then `reflex demo` on the embedded default (no database).
set -euo pipefail
cd "$(dirname "$0")/.."
infra/setup_venv.sh
exec .venv/bin/reflex demo "$@"
