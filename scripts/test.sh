#!/usr/bin/env bash
# Sets up (Debian packages, .venv with pip's torch, build) and runs the whole
# test suite: unit, golden, numeric and end-to-end tests, fresh exports from
# the installed torch, the GPU check's bundle build (CPU run) through CTest,
# with the lint and a short run of every fuzzer beside it. No test may skip.
set -euo pipefail
cd "$(dirname "$0")/.."
# No test may skip here: a test that cannot run (a missing package, tool or
# capability) fails (tests/CMakeLists.txt, SPMD_ALLOW_SKIPS).
SPMD_CMAKE_ARGS="${SPMD_CMAKE_ARGS:-} -DSPMD_ALLOW_SKIPS=OFF" scripts/setup.sh
build=${BUILD_DIR:-build}
"$build/tools/spmd-run/spmd-run" --version
log=$(mktemp)
side=$(mktemp)
trap 'rm -f "$log" "$side"' EXIT
# The lint and the fuzzers run beside CTest on one core: most tests take
# turns on the Gloo lock, which leaves the other core mostly idle.
(
  LINT_JOBS=1 scripts/lint.sh "$build"
  # Every reader of untrusted bytes is fuzzed for a short while (about 4
  # minutes with the clang build); scripts/fuzz.sh 600 runs them long by hand.
  SPMD_FUZZ_JOBS=1 SPMD_FUZZ_SPMDC="$build/tools/spmdc/spmdc" scripts/fuzz.sh "${SPMD_CI_FUZZ_SECONDS:-15}"
) >"$side" 2>&1 &
side_pid=$!
rc=0
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 1800) 2>&1 | tee "$log" || rc=$?
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
skipped=$(grep -c '(Skipped)$' "$log" || true)
echo "test.sh: ${total:-0} tests run by ctest, $skipped skipped"
side_rc=0
wait "$side_pid" || side_rc=$?
cat "$side"
[ "$rc" -eq 0 ] || exit "$rc"
[ "${total:-0}" -gt 0 ] || { echo "test.sh: error: ctest ran no test" >&2; exit 1; }
[ "$skipped" -eq 0 ] || { echo "test.sh: error: $skipped test(s) skipped; none may skip here" >&2; exit 1; }
[ "$side_rc" -eq 0 ] || { echo "test.sh: error: the lint or a fuzzer failed (above)" >&2; exit "$side_rc"; }
