#!/usr/bin/env bash
# Regenerates testdata/golden/programs/ (called by scripts/regen-golden.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mkdir -p testdata/golden/programs
grep -v '^#' tests/golden/programs.txt | while read -r name model schema mesh; do
  tests/golden/compile-dump.sh "$build/tools/spmdc/spmdc" "testdata/pt2/$model/model.pt2" "$schema" "$mesh" \
    >"testdata/golden/programs/$name.txt"
done
