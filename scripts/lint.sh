#!/usr/bin/env bash
# clang-format check over all sources, and the curated clang-tidy checks
# over every library (the runtime included) and the tools. The runtime's
# files parse LibTorch's headers (about 9 s each); test.sh runs this beside
# CTest, so it adds little to CI's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mapfile -t sources < <(git ls-files '*.cpp' '*.h')
if ! clang-format --dry-run -Werror "${sources[@]}" 2>/tmp/spmdc-format.log; then
  head -40 /tmp/spmdc-format.log
  echo "lint: files are not clang-formatted; run: clang-format -i \$(git ls-files '*.cpp' '*.h')"
  exit 1
fi
mapfile -t tidy < <(git ls-files 'lib/*.cpp' 'tools/*.cpp')
if [ -f "$build/compile_commands.json" ] && [ ${#tidy[@]} -gt 0 ]; then
  printf '%s\n' "${tidy[@]}" | xargs -P"${LINT_JOBS:-$(nproc)}" -n4 clang-tidy -p "$build" --quiet 2>/dev/null
fi
echo "lint: ok"
