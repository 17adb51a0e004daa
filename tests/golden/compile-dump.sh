#!/usr/bin/env bash
# compile-dump.sh SPMDC MODEL SCHEMA MESH: compiles MODEL and prints
# `spmdc dump` of the result (used by the golden program tests).
set -euo pipefail
spmdc=$1 model=$2 schema=$3 mesh=$4
out=$(mktemp --suffix=.spmd)
trap 'rm -f "$out"' EXIT
"$spmdc" compile "$model" --schema "$schema" --mesh "$mesh" -o "$out" -q
"$spmdc" dump "$out"
