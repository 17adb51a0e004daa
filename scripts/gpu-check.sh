#!/usr/bin/env bash
# The GPU check, for a machine with a GPU, pip's CUDA torch in python3, CMake,
# a compiler and the CUDA toolkit, but no package registry. What the build
# needs beyond torch comes in a bundle made beforehand where the packages
# are (scripts/gpu-bundle.sh -> .deps/gpu-bundle, an ignored folder that
# travels with the tree).
#
#   scripts/gpu-check.sh                          # on the GPU machine
#   scripts/gpu-check.sh --device cpu --quick     # the correctness rows on a CPU
#   scripts/gpu-check.sh --dry-run                # the whole flow on a CPU at tiny sizes (CI)
#
# 1. builds spmdc and spmd-run from the bundle against this machine's torch,
#    with the NCCL path (scripts/gpu-build.sh);
# 2. exports the test models and a compute-bound one (8 layers, width 1024)
#    with this torch, runs them with spmd-run on the GPU (1 rank on NCCL;
#    2 ranks on one GPU over Gloo with CUDA tensors under dp, fsdp with its
#    reduce-scatter, Megatron TP and an all-to-all; NCCL across GPUs where
#    there are several) and compares every output with PyTorch eager on the
#    same GPU (scripts/gpu_check.py; the program moved there by
#    torch.export.passes.move_to_device_pass); a failing row is reported and
#    the rest still run;
# 3. prints a step-time table at 1 rank: spmd-run's median step against
#    eager's, both synchronized per step;
# 4. prints the throughput table (scripts/gpu_throughput.py): a 1B-class
#    Llama train step (bf16, AdamW) and inference step, spmd-run with and
#    without --cuda-graph against eager and torch.compile, tokens/s and MFU,
#    each checked against PyTorch's numbers. Budget: the whole check in 8
#    minutes on one H100/H200 (build ~3, correctness rows ~1, throughput ~5:
#    per-row estimates in gpu_throughput.py).
# Exits non-zero on any failure. Environment: BUNDLE (.deps/gpu-bundle),
# BUILD_DIR (build-gpu), PYTHON (python3), WORK (a temp folder), SKIP_BUILD (use
# BUILD_DIR as built by scripts/gpu-build.sh, as ctest gpu_bundle_build does).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${BUNDLE:-.deps/gpu-bundle}
build=${BUILD_DIR:-build-gpu}
python=${PYTHON:-python3}
[ -f "$bundle/MANIFEST" ] || { echo "gpu-check: error: no bundle at $bundle: run scripts/gpu-bundle.sh first" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$(date +%s)
if [ -n "${SKIP_BUILD:-}" ]; then
  [ -x "$build/tools/spmd-run/spmd-run" ] || { echo "gpu-check: error: SKIP_BUILD set but no build in $build" >&2; exit 2; }
  echo "gpu-check: using the build in $build (SKIP_BUILD)"
  "$build/tools/spmd-run/spmd-run" --version
else
  scripts/gpu-build.sh "$bundle" "$build" "$python" | grep -v '^\['
  echo "gpu-check: built in $(($(date +%s) - t0)) s"
fi
args=()
[ -n "${WORK:-}" ] && args+=(--work "$WORK")
"$python" scripts/gpu_check.py "$build/tools/spmdc/spmdc" "$build/tools/spmd-run/spmd-run" "${args[@]}" "$@"
