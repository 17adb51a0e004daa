#!/usr/bin/env bash
# Regenerates every golden text file under testdata/golden/ from the current
# build (default: build/). Review `git diff testdata/golden` before committing:
# a golden changes only when the new output is right.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
spmdc=$build/tools/spmdc/spmdc
mkdir -p testdata/golden/ir
for dir in testdata/pt2/*/; do
  model=$(basename "$dir")
  "$spmdc" inspect --ir "$dir/model.pt2" >"testdata/golden/ir/$model.ir"
done
if [ -x scripts/regen-golden-programs.sh ]; then scripts/regen-golden-programs.sh "$build"; fi
if [ -x tests/explain/regen.sh ]; then tests/explain/regen.sh "$build"; fi
echo "goldens regenerated; review: git diff --stat testdata/golden"
