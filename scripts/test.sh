#!/usr/bin/env bash
# Runs the whole test suite (unit, golden, numeric, end-to-end) and the lint.
# Expects scripts/setup.sh to have built build/ (override with BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/lint.sh "$build"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 1200
