#!/usr/bin/env bash
# The GPU check on a CPU, in two CTest steps so the long compile overlaps
# other tests and only the run holds the Gloo lock:
#   build: bundle the dependencies and build spmdc and spmd-run from the
#          bundle with the NCCL path (scripts/gpu-build.sh checks nothing
#          came from the system);
#   check: run scripts/gpu-check.sh's whole flow with --dry-run on that
#          build (SKIP_BUILD: the build step ran gpu-build.sh already): fresh exports, spmd-run at 1 and 2 ranks against eager,
#          and the throughput table at a tiny size (spmd-run with
#          --cuda-graph auto and off, its refusal of --cuda-graph on, eager
#          and torch.compile).
# So the GPU scripts cannot rot between GPU runs.
#   tests/bundle/bundle-build.sh build|check WORK_DIR PYTHON
set -euo pipefail
cd "$(dirname "$0")/../.."
step=$1
work=$2
python=$3
case $step in
  build)
    rm -rf "$work"
    mkdir -p "$work"
    scripts/gpu-bundle.sh "$work/bundle"
    scripts/gpu-build.sh "$work/bundle" "$work/build" "$python" | grep -v '^\['
    ;;
  check)
    [ -x "$work/build/tools/spmd-run/spmd-run" ] ||
      { echo "bundle-build: no bundle build in $work (run the build step first)" >&2; exit 1; }
    SKIP_BUILD=1 BUNDLE="$work/bundle" BUILD_DIR="$work/build" PYTHON="$python" WORK="$work/check" \
      scripts/gpu-check.sh --dry-run | tee "$work/check.log"
    grep -q 'NCCL path compiled' "$work/check.log" ||
      { echo "bundle-build: the NCCL path was not compiled" >&2; exit 1; }
    grep -q '^train  spmd-run, --cuda-graph auto .* ok (dry-run)' "$work/check.log" ||
      { echo "bundle-build: the throughput table's spmd-run train row did not pass" >&2; exit 1; }
    ;;
  *)
    echo "usage: tests/bundle/bundle-build.sh build|check WORK_DIR PYTHON" >&2
    exit 2
    ;;
esac
