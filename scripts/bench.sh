#!/usr/bin/env bash
# Runs the benchmarks and prints the figures recorded in docs/PERFORMANCE.md.
# Expects build/ from scripts/setup.sh (override with BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake --build "$build" --target bench_compiler bench_runtime spmdc spmd-run >/dev/null
echo "== reader and compiler (llama_deep_train: 8,882 nodes; llama_train: 632)"
"$build/bench/bench_compiler" --benchmark_min_time=0.5 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
echo "== spmdc compile as a process (median of 5)"
for args in "llama_train fsdp 2" "llama_deep_train fsdp 2" "llama_deep_train schemas/examples/llama_tp.json 4"; do
  set -- $args
  times=()
  for i in 1 2 3 4 5; do
    s=$(date +%s.%N)
    "$build/tools/spmdc/spmdc" compile "testdata/pt2/$1/model.pt2" --schema "$2" --mesh "$3" -o /tmp/spmdc-bench.spmd -q
    e=$(date +%s.%N)
    times+=("$(echo "$e - $s" | bc)")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
  echo "spmdc compile $1 --schema $(basename "$2") --mesh $3: ${median}s"
done
echo "== executor"
"$build/bench/bench_runtime" --benchmark_min_time=0.5 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
echo "== llama step on CPU workers (Megatron TP, Gloo), 200 steps each"
for n in 1 2 4; do
  "$build/tools/spmdc/spmdc" compile testdata/pt2/llama/model.pt2 --schema schemas/examples/llama_tp.json --mesh "$n" \
    -o "/tmp/spmdc-bench-$n.spmd" -q
  "$build/tools/spmd-run/spmd-run" -n "$n" "/tmp/spmdc-bench-$n.spmd" --inputs testdata/pt2/llama/inputs.safetensors \
    --repeat 200 | tail -n 1
done
echo "== llama_train with AdamW on CPU workers, 50 steps each"
for spec in "1 dp" "2 fsdp" "2 dp" "4 schemas/examples/llama_tp.json"; do
  set -- $spec
  "$build/tools/spmdc/spmdc" compile testdata/pt2/llama_train/model.pt2 --schema "$2" --mesh "$1" --optimizer adamw \
    -o "/tmp/spmdc-bench-train.spmd" -q
  s=$(date +%s.%N)
  "$build/tools/spmd-run/spmd-run" -n "$1" /tmp/spmdc-bench-train.spmd --inputs testdata/pt2/llama_train/inputs.safetensors \
    --steps 50 --loss-log /tmp/spmdc-bench-loss.jsonl | tail -n 1
  median=$(sed 's/.*"step_ms": \([0-9.]*\).*/\1/' /tmp/spmdc-bench-loss.jsonl | tail -n 40 | sort -n | sed -n 20p)
  echo "llama_train $(basename "$2") x$1: median step ${median} ms, $(echo "scale=1; 1000 / $median" | bc) steps/s"
done
