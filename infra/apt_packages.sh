#!/usr/bin/env bash
# Debian packages the project needs: pkg-config for the InfluxDB build. Installs only what is missing.
set -euo pipefail
needed=()
command -v pkg-config >/dev/null || needed+=(pkg-config)
if [ ${#needed[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${needed[@]}"
fi
