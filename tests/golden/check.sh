#!/usr/bin/env bash
# check.sh GOLDEN COMMAND...: runs COMMAND and compares its stdout with the
# GOLDEN file byte for byte; prints a unified diff on mismatch.
# Regenerate goldens with scripts/regen-golden.sh (and read the diff).
set -euo pipefail
golden=$1
shift
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
"$@" >"$actual"
if ! cmp -s "$golden" "$actual"; then
  echo "golden mismatch: $golden (regenerate with scripts/regen-golden.sh, then review the diff)"
  diff -u "$golden" "$actual" | head -60
  exit 1
fi
