#!/usr/bin/env bash
# Builds a pinned InfluxDB 2.x (influxd) from the Go module proxy and caches it by version.
# Why from source: no registry reachable here ships an influxd binary (see shared/notes/influxdb.md).
# Usage: infra/build_influxdb.sh            -> prints the path of the cached binary
# Env:   REFLEX_INFLUXDB_VERSION (default 2.9.1), REFLEX_CACHE (default ~/.cache/reflex)
# The whole body sits in main(), called on the last line: bash then parses the file before
# running any of it, so editing this script during a 30-minute build cannot break that build
# (it did once: "syntax error near unexpected token" after the compile had finished).
set -euo pipefail

main() {

version="${REFLEX_INFLUXDB_VERSION:-2.9.1}"
cache="${REFLEX_CACHE:-$HOME/.cache/reflex}"
binary="$cache/influxd-$version"
log="$cache/influxd-$version.build.log"
work="$cache/build-influxdb-$version"

if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi
mkdir -p "$cache" "$work"
: >"$log"
began=$(date +%s)

step() { echo "[build-influxdb $(date +%H:%M:%S)] $*" | tee -a "$log" >&2; }
# The newest line of the compiler's own output, for the progress line (never our own lines).
last_build_line() { grep -v '^\[build-influxdb ' "$log" | tail -n 1 | cut -c1-120 || true; }
fail() {
  echo "InfluxDB $version build FAILED: $*. Last lines of $log:" >&2
  tail -n 60 "$log" >&2
  exit 1
}
run() { "$@" >>"$log" 2>&1 || fail "'$*' exited $?"; }

# Debian's real pkg-config must be on PATH: influxdata's wrapper delegates to it.
if ! command -v pkg-config >/dev/null; then
  step "installing pkg-config (apt)"
  run apt-get update -q
  run apt-get install -y -q pkg-config
fi
for tool in go cargo rustc; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done

step "downloading influxdb v$version from the Go module proxy"
moddir=$(go mod download -json "github.com/influxdata/influxdb/v2@v$version" 2>>"$log" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || fail "go mod download"
src="$work/src"
rm -rf "$src"
cp -r "$moddir" "$src"
chmod -R u+w "$src"

# The pkg-config wrapper builds libflux (Rust) on demand; it must not shadow the real one on PATH.
pkgver=$(awk '$1=="github.com/influxdata/pkg-config"{print $2}' "$src/go.mod")
step "building influxdata pkg-config wrapper $pkgver"
run env GOBIN="$work/bin" go install "github.com/influxdata/pkg-config@$pkgver"
export PKG_CONFIG="$work/bin/pkg-config"

# libflux pins an older Rust in rust-toolchain.toml; use the installed one, never download.
export RUSTUP_TOOLCHAIN="${RUSTUP_TOOLCHAIN:-stable}"
export RUSTUP_AUTO_INSTALL=0
unset CARGO_TARGET_DIR
# Its crates use deny(warnings); newer lints would break them. RUSTFLAGS misses build scripts,
# so cap lints through a rustc wrapper that touches only real compilations.
cat >"$work/bin/rustc-cap-lints" <<'WRAP'
#!/bin/sh
rustc="$1"; shift
case " $* " in
  *" --crate-name "*) exec "$rustc" "$@" --cap-lints warn ;;
  *) exec "$rustc" "$@" ;;
esac
WRAP
chmod +x "$work/bin/rustc-cap-lints"
export RUSTC_WRAPPER="$work/bin/rustc-cap-lints"

# An interrupted earlier build leaves a partial libflux copy that the wrapper would reuse.
gocache=$(go env GOCACHE)
if [ ! -f "$work/.libflux-ok" ]; then
  rm -rf "$gocache"/pkgconfig/github.com/influxdata/flux@* 2>/dev/null || true
fi

step "building influxd (libflux + Go; about 8 min cold on 2 cores, 30 s warm; log: $log)"
start=$(date +%s)
(
  cd "$src"
  # -X main.version: otherwise influxd reports "dev" in `influxd version` and X-Influxdb-Version.
  go build -v -tags sqlite_foreign_keys,sqlite_json \
    -ldflags "-X main.version=v$version -X main.commit=reflex-build-influxdb" \
    -o "$work/influxd" ./cmd/influxd
) >>"$log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 30
  step "still building ($(($(date +%s) - start)) s): $(last_build_line)"
done
wait "$pid" || fail "go build exited non-zero"
touch "$work/.libflux-ok"
mv "$work/influxd" "$binary"
step "built $binary in $(($(date +%s) - start)) s (compile), $(($(date +%s) - began)) s in all"
"$binary" version >>"$log" 2>&1 || fail "the built binary does not run"
echo "$binary"
}

main "$@"
