#!/usr/bin/env bash
# The random-layout differential test at full count: N random placement
# schemas (default 1,000) over the test models, each compiled, run on
# simulated ranks and compared with eager PyTorch. CI runs 40 of them.
#   scripts/random-layouts.sh            # 1,000 cases from seed 1
#   scripts/random-layouts.sh 5000 1001  # 5,000 cases from seed 1001
# A failure prints its seed and schema; SPMD_RANDOM_SEED=<seed>
# SPMD_RANDOM_LAYOUTS=1 build/tests/e2e/e2e_random_layouts_test reruns it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake --build "$build" --target e2e_random_layouts_test >/dev/null
SPMD_RANDOM_LAYOUTS=${1:-1000} SPMD_RANDOM_SEED=${2:-1} "$build/tests/e2e/e2e_random_layouts_test"
