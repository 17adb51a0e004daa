#!/usr/bin/env bash
# The GPU check on a CPU: bundle the dependencies, build spmdc and spmd-run
# from the bundle with the NCCL path (scripts/gpu-build.sh checks nothing
# came from the system), then run scripts/gpu-check.sh's whole flow with
# --dry-run: fresh exports, spmd-run at 1 and 2 ranks against eager, and
# the throughput table at a tiny size (spmd-run with --cuda-graph auto and
# off, its refusal of --cuda-graph on, eager and torch.compile). So the GPU
# scripts cannot rot between GPU runs.
#   tests/bundle/bundle-build.sh WORK_DIR PYTHON
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$1
python=$2
rm -rf "$work"
mkdir -p "$work"
scripts/gpu-bundle.sh "$work/bundle"
BUNDLE="$work/bundle" BUILD_DIR="$work/build" PYTHON="$python" WORK="$work/check" \
  scripts/gpu-check.sh --dry-run | tee "$work/check.log"
grep -q 'NCCL path compiled' "$work/check.log" || { echo "bundle-build: the NCCL path was not compiled" >&2; exit 1; }
grep -q '^train  spmd-run, --cuda-graph auto .* ok (dry-run)' "$work/check.log" ||
  { echo "bundle-build: the throughput table's spmd-run train row did not pass" >&2; exit 1; }
