#!/usr/bin/env bash
# Sets up (Debian packages, .venv with pip's torch, build) and runs the whole
# test suite: unit, golden, numeric and end-to-end tests, fresh exports from
# the installed torch, the GPU check's bundle build (CPU run) through CTest,
# then the lint (and, with CI=true, a short run of every fuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
"$build/tools/spmd-run/spmd-run" --version
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 1800)
scripts/lint.sh "$build"
# CI also fuzzes every reader of untrusted bytes for a short while (about
# 4 minutes with the clang build); scripts/fuzz.sh 600 runs them long by hand.
if [ "${CI:-}" = true ]; then
  SPMD_FUZZ_SPMDC="$build/tools/spmdc/spmdc" scripts/fuzz.sh "${SPMD_CI_FUZZ_SECONDS:-15}"
fi
