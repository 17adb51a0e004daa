#!/usr/bin/env bash
# Regenerates testdata/golden/explain/ from BUILD (default: build/); called by
# scripts/regen-golden.sh. Review `git diff testdata/golden/explain`.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
mkdir -p testdata/golden/explain
grep -v '^#' tests/explain/goldens.txt | while read -r name model schema mesh optimizer schema_b mesh_b; do
  # Schema files as absolute paths, as ctest passes them (provenance keeps file names only).
  [ -f "$schema" ] && schema=$PWD/$schema
  [ -n "$schema_b" ] && [ -f "$schema_b" ] && schema_b=$PWD/$schema_b
  tests/explain/explain-json.sh "$build/tools/spmdc/spmdc" "$PWD/testdata/pt2/$model/model.pt2" "$schema" "$mesh" \
    "$optimizer" ${schema_b:+"$schema_b"} ${mesh_b:+"$mesh_b"} >"testdata/golden/explain/$name.json"
done
