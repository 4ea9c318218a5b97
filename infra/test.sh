#!/usr/bin/env bash
# The whole test suite on a fresh machine: venv, apt packages, the InfluxDB build, lint
# (ruff check, ruff format --check, mypy), pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
infra/setup_venv.sh
infra/apt_packages.sh
# Tests need the real InfluxDB; build it now (cached by version) so the fixture finds it.
REFLEX_INFLUXD="$(infra/build_influxdb.sh)"
export REFLEX_INFLUXD
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
set +e
# Three workers on two cores: the longest tests mostly wait (paced pushes, outages, restarts
# on a clock), and a third worker computes meanwhile (pytest took 19 min 18 s at two workers,
# then 11 min 54 s at three with two tests' reads of InfluxDB 90 s shorter in all). Each test
# file runs whole on one worker, handed out in
# collection order, files with a slow test first (tests/conftest.py): xdist's default order, by
# number of tests, left three-minute single-test files for last.
.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here, not a pass." >&2
  exit 1
fi
exit "$rc"
