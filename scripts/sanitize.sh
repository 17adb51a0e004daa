#!/usr/bin/env bash
# Builds everything with sanitizers into its own folder and runs the tests.
#
#   scripts/sanitize.sh                 # ASan + UBSan, the whole suite (build-asan/)
#   scripts/sanitize.sh address -R pt2  # ... only the tests matching a regex (ctest's flags)
#   scripts/sanitize.sh thread          # TSan on the tests that run ranks as threads (build-tsan/),
#                                       # and the canaries that show scripts/tsan.supp hides no race of ours
#
# LibTorch, Gloo and Python are not instrumented: ASan still checks every
# access our code makes (and LibTorch's through our pointers), UBSan our
# arithmetic; leak checking is limited to the compiler's tools and tests,
# which do not load LibTorch (its process-lifetime allocations are not
# leaks). Findings stop the test that made them (halt_on_error).
# Expects scripts/setup.sh to have run (Debian packages and .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
shift || true
case "$mode" in
  address) build=${BUILD_DIR:-build-asan} sanitize="address,undefined" ;;
  thread) build=${BUILD_DIR:-build-tsan} sanitize="thread" ;;
  *) echo "usage: scripts/sanitize.sh [address|thread] [ctest args]" >&2; exit 2 ;;
esac
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_SANITIZE="$sanitize" \
  -DSPMD_BUILD_BENCH=OFF >/dev/null
# The threaded-ranks tests (every rank a thread of one process: runtime::runThreaded)
# and the TSan canaries (tests/tsan: deliberate races in spmd code that must be reported).
threaded="e2e_threaded_test e2e_random_layouts_test e2e_train_test numeric_test"
canaries="tsan_canary_plain tsan_canary_torch"
if [ "$mode" = thread ]; then
  cmake --build "$build" -j"$(nproc)" --target $threaded tsan_canary
else
  cmake --build "$build" -j"$(nproc)"
fi
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=0:detect_odr_violation=0:protect_shadow_gap=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp:${TSAN_OPTIONS:-}"
cd "$build"
if [ "$mode" = thread ]; then
  ctest --output-on-failure --timeout 3600 -R "^(${threaded// /|}|${canaries// /|})\$" "$@"
else
  ctest --output-on-failure --timeout 3600 -j"$(nproc)" "$@"
fi
