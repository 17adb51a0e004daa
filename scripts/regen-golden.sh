#!/usr/bin/env bash
# Regenerates every golden text file under testdata/golden/ from the current
# build (default: build/). Review `git diff testdata/golden` before committing:
# a golden changes only when the new output is right. The lit tests that
# read whole models (tests/lit/ir/models.test, tests/lit/passes/models-*.test)
# hold CHECK lines, not goldens: edit the lines your change moves.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ -x scripts/regen-golden-programs.sh ]; then scripts/regen-golden-programs.sh "$build"; fi
if [ -x tests/explain/regen.sh ]; then tests/explain/regen.sh "$build"; fi
echo "goldens regenerated; review: git diff --stat testdata/golden"
