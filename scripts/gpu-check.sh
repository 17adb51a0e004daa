#!/usr/bin/env bash
# GPU checks, for a machine with one GPU, a CUDA LibTorch 2.x (pip's torch)
# and no package registry: configures against that LibTorch with the
# header-only dependencies from a plain include folder, builds, runs the
# end-to-end tests with --device cuda (NCCL at 1 worker; 2 and 4 workers over
# Gloo with CUDA tensors) and prints a timing table next to PyTorch eager.
#
#   DEPS=/path/to/include scripts/gpu-check.sh      # DEPS: nlohmann/, CLI/, catch2/, valijson/, simdjson.h, zip.h ...
set -euo pipefail
cd "$(dirname "$0")/.."
torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
build=${BUILD_DIR:-build-gpu}
deps=${DEPS:-$PWD/.deps/include}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" \
  -DSPMD_EXTRA_INCLUDE="$deps" -DSPMD_WITH_NCCL=ON -DSPMD_BUILD_TESTS=OFF -DSPMD_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target spmdc spmd-run
spmdc=$build/tools/spmdc/spmdc
run=$build/tools/spmd-run/spmd-run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-12s %-8s %-4s %s\n' model schema n result
for model in mlp gpt_block llama; do
  for n in 1 2 4; do
    "$spmdc" compile "testdata/pt2/$model/model.pt2" --schema "schemas/examples/${model}_tp.json" --mesh "$n" \
      -o "$work/$model.$n.spmd" -q
    out=$("$run" -n "$n" "$work/$model.$n.spmd" --device cuda --inputs "testdata/pt2/$model/inputs.safetensors" \
      --verify "testdata/pt2/$model/model.pt2" --repeat 100 2>&1 | grep -E 'spmd-run:|ABOVE' || true)
    printf '%-12s %-8s %-4s %s\n' "$model" tp "$n" "$out"
  done
done
echo "== PyTorch eager on the same GPU (step time, 100 steps)"
python3 - <<'PY'
import time, torch
from safetensors.torch import load_file
for m in ["mlp", "gpt_block", "llama"]:
    ep = torch.export.load(f"testdata/pt2/{m}/model.pt2")
    mod = ep.module().cuda()
    ins = load_file(f"testdata/pt2/{m}/inputs.safetensors")
    args = [ins[f"input.{i}"].cuda() for i in range(len(ins))]
    for _ in range(10): mod(*args)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(100): mod(*args)
    torch.cuda.synchronize()
    print(f"{m:12s} eager {1e3 * (time.perf_counter() - t) / 100:.3f} ms/step")
PY
