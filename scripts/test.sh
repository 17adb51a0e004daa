#!/usr/bin/env bash
# Sets up (Debian packages + build) and runs the whole test suite: unit,
# golden, numeric and end-to-end tests through CTest, then the lint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 1200)
scripts/lint.sh "$build"
