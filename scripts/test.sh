#!/usr/bin/env bash
# Sets up (Debian packages, .venv with pip's torch, build) and runs the whole
# test suite: unit, golden, numeric and end-to-end tests, fresh exports from
# the installed torch, the GPU check's bundle build (CPU run) through CTest,
# then the lint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
"$build/tools/spmd-run/spmd-run" --version
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 1800)
scripts/lint.sh "$build"
