#!/usr/bin/env python3
"""Fused against math attention in exported train steps, beside eager
PyTorch, side by side in one run (a benchmark, not in ctest).

Usage:
    .venv/bin/python scripts/bench_attention.py build/tools/spmdc/spmdc build/tools/spmd-run/spmd-run \
        [--seq 1024 2048] [--steps 3] [--json OUT]

The model is tests/e2e/cp_llama.py's causal SDPA Llama (2 layers, hidden
64, 4 heads, vocabulary 256, batch 1, random weights, seed 0): at sequence
1024 and more the attention's [heads, seq, seq] scores dominate its
activations. One train step (loss and gradients, no optimizer), one CPU
thread everywhere:

- eager PyTorch, the model as written (F.scaled_dot_product_attention runs
  the fused CPU kernel);
- spmd-run of the step exported with `--attention math` (matmul, softmax,
  matmul: the [b, h, s, s] probabilities saved for the backward);
- spmd-run of the step exported with `--attention fused` (the default: the
  fused CPU kernel and its backward, the output and log-sum-exp saved).

Step time: the median of --steps steps after one warm-up (eager: wall time
of forward and backward; spmd-run: --profile's step_ms). Peak: the live
tensor bytes at their most during one step (eager: torch.profiler's memory
timeline, as tests/e2e/cp_bench.py measures it; spmd-run: --profile's
peak_bytes, its metering CPU allocator), weights, inputs and gradients
included; the ratios are against eager. The load average is printed first:
step times on a shared machine measure the contention too; peaks do not.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "python"))
import cp_bench  # noqa: E402  (the eager step's time and peak)
import cp_llama  # noqa: E402  (the model)

import torch  # noqa: E402

from spmdc_export import core  # noqa: E402


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_attention: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def spmd(a, d, seq, mode):
    """(median step seconds, peak bytes) of the `mode` export on one spmd-run worker."""
    case = d / f"{mode}{seq}"
    torch.manual_seed(0)
    model = cp_llama.Llama("sdpa", True, seq)
    tokens = torch.randint(0, cp_llama.VOCAB, (1, seq))
    labels = torch.randint(0, cp_llama.VOCAB, (1, seq))
    core.export_train_step(model, (tokens, labels), case, attention=mode)
    sfile, prog, prof = d / "one.json", case / "p.spmd", case / "prof.json"
    sfile.write_text(json.dumps({"version": 1, "preset": "dp", "mesh": {"shape": [1], "axes": ["dp"]}}))
    run([a.spmdc, "compile", case / "model.pt2", "--schema", sfile, "-o", prog, "-q"])
    run([a.spmd_run, "-n", 1, prog, "--inputs", case / "inputs.safetensors", "--repeat", a.steps + 1,
         "--profile", prof, "-q"])
    rank = json.loads(prof.read_text())["ranks"][0]
    return rank["step_ms"] / 1e3, rank["peak_bytes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--seq", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    print(f"bench_attention: causal SDPA Llama train step (2 layers, hidden 64, 4 heads, batch 1), "
          f"{a.steps} steps; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="spmdc-attn-") as tmp:
        d = Path(tmp)
        for seq in a.seq:
            sec, peak, _ = cp_bench.eager("sdpa", seq, a.steps)
            rows.append({"seq": seq, "run": "eager PyTorch (SDPA fused)", "step_s": sec, "peak_bytes": peak})
            for mode in ("math", "fused"):
                sec, peak = spmd(a, d, seq, mode)
                rows.append({"seq": seq, "run": f"spmd-run, --attention {mode}", "step_s": sec, "peak_bytes": peak})
    print(f"{'seq':>5} {'run':<30} {'step ms':>9} {'x eager':>8} {'peak MB':>9} {'x eager':>8} {'x math':>7}")
    for r in rows:
        base = next(x for x in rows if x["seq"] == r["seq"])
        math_row = next((x for x in rows if x["seq"] == r["seq"] and x["run"].endswith("math")), r)
        print(f"{r['seq']:>5} {r['run']:<30} {r['step_s'] * 1e3:>9.1f} {r['step_s'] / base['step_s']:>8.2f} "
              f"{r['peak_bytes'] / 1e6:>9.1f} {r['peak_bytes'] / base['peak_bytes']:>8.2f} "
              f"{r['peak_bytes'] / math_row['peak_bytes']:>7.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
