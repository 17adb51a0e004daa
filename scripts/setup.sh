#!/usr/bin/env bash
# Installs the Debian packages spmdc needs (when missing), then configures
# and builds into build/ (override with BUILD_DIR). Safe to rerun.
#   scripts/setup.sh            # everything
#   BUILD_TYPE=Debug scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ pkg-config ccache
  libtorch-dev libgloo-dev
  libcli11-dev nlohmann-json3-dev libspdlog-dev catch2
  libzip-dev libvalijson-dev libsimdjson-dev libbenchmark-dev
  clang-format clang-tidy python3
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup: built into $build/"
