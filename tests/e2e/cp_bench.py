#!/usr/bin/env python3
"""Context parallelism's step time and memory against the single-device
eager step, side by side in one run (a benchmark, not in ctest).

Usage:
    cp_bench.py SPMDC SPMD_RUN [--seq 1024] [--steps 5] [--json OUT]

The model is cp_llama.py's sdpa_causal Llama (2 layers, hidden 64, 4 heads,
vocabulary 256, batch 1, random weights, seed 0): at sequence 1024 and more
the attention's [heads, seq, seq] scores dominate its activations. One
train step (loss and gradients, no optimizer) is measured:

- eager PyTorch on one CPU thread, the model as written (its
  F.scaled_dot_product_attention runs the fused CPU kernel, which never
  holds the scores) and with the matmul-softmax-matmul attention (the
  pattern a train step exported with the default --attention math holds,
  so this is the math spmd-run runs; scripts/bench_attention.py measures
  --attention fused);
- spmd-run of the spmdc program on 1 worker and with context parallelism
  at cp 2 and cp 4: "rotate": "ring" (the compile must say ring attention,
  load-balanced: the causal head-tail split, on by default) and, beside
  it, "allgather" (keys and values all-gathered); gloo, one CPU thread
  per worker.

Step time is the median of --steps steps after one warm-up (eager:
wall time of forward and backward; spmd-run: --profile's step_ms, its
slowest rank). Peak is the live tensor bytes at their most during one step:
for eager, torch.profiler's memory timeline (profile_memory=True, summed
over its categories, parameters and gradients included); for spmd-run,
--profile's peak_bytes per rank (its metering CPU allocator, weights,
inputs and gradients included). RSS growth (VmHWM after clear_refs) is
printed beside both. Ratios are against eager as written.

The machine's load average is printed first: on a shared machine with
fewer cores than cp's workers the step times of cp 2 and cp 4 measure the
contention as much as the program; the peaks do not depend on load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cp_llama  # noqa: E402  (the model, its export and the schemas)

import torch  # noqa: E402


def rss_bytes(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def eager(attn, seq, steps):
    """Median step seconds, tensor peak bytes and RSS growth of one eager train step."""
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    model = cp_llama.Llama(attn, True, seq)
    tokens = torch.randint(0, cp_llama.VOCAB, (1, seq))
    labels = torch.randint(0, cp_llama.VOCAB, (1, seq))

    def step():
        for p in model.parameters():
            p.grad = None
        model(tokens, labels).backward()

    step()  # warm-up
    Path("/proc/self/clear_refs").write_text("5")
    base = rss_bytes("VmRSS")
    seconds = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - t0)
    rss = max(0, rss_bytes("VmHWM") - base)
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        timeline = Path(tmp) / "timeline.json"
        prof.export_memory_timeline(str(timeline), device="cpu")
        _, sizes = json.loads(timeline.read_text())
    return statistics.median(seconds), max(sum(s) for s in sizes), rss


def spmd(a, d, cp, steps, rotate="ring"):
    """Median step seconds (slowest rank), peak bytes per rank and RSS growth per rank under spmd-run -n cp."""
    sfile, prog, prof = (d / f"cp{cp}{rotate}.{x}" for x in ("json", "spmd", "prof.json"))
    s = cp_llama.schema({"cp": cp})
    s["context_parallel"]["rotate"] = rotate
    sfile.write_text(json.dumps(s if cp > 1 else
                                {"version": 1, "preset": "dp", "mesh": {"shape": [1], "axes": ["cp"]}}))
    r = cp_llama.run([a.spmdc, "compile", d / "model" / "model.pt2", "--schema", sfile, "-o", prog])
    said = r.stdout + r.stderr
    if cp > 1 and rotate == "ring" and ("ring attention" not in said or "load-balanced" not in said):
        sys.exit(f"cp_bench: the cp {cp} compile did not say ring attention, load-balanced:\n{said}")
    cp_llama.run([a.spmd_run, "-n", cp, prog, "--inputs", d / "model" / "inputs.safetensors",
                  "--repeat", steps + 1, "--profile", prof, "-q"])
    ranks = json.loads(prof.read_text())["ranks"]
    return (max(r["step_ms"] for r in ranks) / 1e3, [r["peak_bytes"] for r in ranks],
            [r["rss_growth_bytes"] for r in ranks])


def mb(x):
    return f"{x / 1e6:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    print(f"cp_bench: sdpa_causal Llama train step, seq {a.seq}, batch 1, {a.steps} steps; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    rows = []
    for label, attn in (("eager, SDPA fused (as written)", "sdpa"), ("eager, matmul-softmax attention", "eager")):
        sec, peak, rss = eager(attn, a.seq, a.steps)
        rows.append({"run": label, "step_s": sec, "peak_bytes": [peak], "rss_growth_bytes": [rss]})
    with tempfile.TemporaryDirectory(prefix="spmdc-cpbench-") as tmp:
        d = Path(tmp)
        cp_llama.export("sdpa_causal", d / "model", seq=a.seq, batch=1)
        for cp, rotate in ((1, "ring"), (2, "allgather"), (2, "ring"), (4, "allgather"), (4, "ring")):
            sec, peaks, rss = spmd(a, d, cp, a.steps, rotate)
            label = {"ring": " (ring, load-balanced causal)", "allgather": " (all-gather K/V)"}[rotate]
            rows.append({"run": f"spmd-run cp {cp}" + (label if cp > 1 else ""),
                         "step_s": sec, "peak_bytes": peaks, "rss_growth_bytes": rss})
    base = rows[0]
    print(f"{'run':<44} {'step ms':>8} {'x eager':>8} {'peak/rank MB':>14} {'x eager':>8}  RSS growth/rank MB")
    for r in rows:
        peak = max(r["peak_bytes"])
        print(f"{r['run']:<44} {r['step_s'] * 1e3:>8.1f} {r['step_s'] / base['step_s']:>8.2f} "
              f"{mb(peak):>14} {peak / max(base['peak_bytes']):>8.2f}  "
              f"{' '.join(mb(x) for x in r['rss_growth_bytes'])}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
