#!/usr/bin/env bash
# Debian packages the project needs. Installs only what is missing.
#   pkg-config                 the InfluxDB build
#   chromium, chromium-driver  headless rendering of incident reports in the tests
#   openssl                    a test certificate for the push endpoint's TLS test
set -euo pipefail
needed=()
command -v pkg-config >/dev/null || needed+=(pkg-config)
[ -x /usr/bin/chromium ] || needed+=(chromium)
[ -x /usr/bin/chromedriver ] || needed+=(chromium-driver)
command -v openssl >/dev/null || needed+=(openssl)
if [ ${#needed[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${needed[@]}"
fi
