#!/usr/bin/env bash
# The main job on the bundled model: set up (Debian packages, .venv, build), compile
# the 2-layer llama with Megatron-style tensor parallelism for 8 ranks, run
# it on 8 CPU worker processes, and verify against the single-device run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=testdata/pt2/llama
echo "== spmdc inspect $model/model.pt2"
"$build/tools/spmdc/spmdc" inspect "$model/model.pt2" | head -4
echo "== spmdc compile (Megatron TP, mesh 8)"
"$build/tools/spmdc/spmdc" compile "$model/model.pt2" --mesh 8 --schema schemas/examples/llama_tp.json \
  -o "$work/llama.spmd" --report "$work/report.json"
echo "== spmd-run -n 8 (Gloo on CPU), verified against the single-device run"
"$build/tools/spmd-run/spmd-run" -n 8 "$work/llama.spmd" --device cpu --inputs "$model/inputs.safetensors" \
  --output "$work/out.safetensors" --verify "$model/model.pt2" --quiet
echo "== done: outputs match the single-device run"
