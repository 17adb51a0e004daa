"""The end-to-end part of scripts/gpu-check.sh: fresh exports, spmd-run on
the GPU against PyTorch eager on the same GPU, and a timing table.

    python3 scripts/gpu_check.py SPMDC SPMD_RUN [--device cuda|cpu] [--work DIR] [--quick]

Per model (exported here with this torch by testdata/export_models.py):
  - eager reference on the device (inference models: the exported module
    on the device; train steps: the eager loss and gradients the export
    wrote, computed on the CPU, compared with a looser tolerance);
  - spmd-run at 1 rank (NCCL on CUDA), at 2 ranks on one device (Gloo with
    device tensors) under dp and Megatron TP, and at every GPU under TP over
    NCCL when there are several; every output compared with the reference;
  - step time of spmd-run at 1 rank against eager's, same inputs.
Exits non-zero on any failure. --device cpu runs the same flow on the CPU
(what CI does, so the script cannot rot between GPU runs); --quick leaves
out the compute-bound model.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFER = ["mlp", "gpt_block", "llama"]
TRAIN = ["llama_train"]
BIG = "llama_big"
TP = {"mlp": "mlp_tp.json", "gpt_block": "gpt_block_tp.json", "llama": "llama_tp.json",
      "llama_big": "llama_tp.json"}
FAILURES = []


def sh(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
    return r.stdout


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def eager(model_dir, device, steps):
    """Eager outputs on `device` and ms per step of the exported module."""
    ep = torch.export.load(os.path.join(model_dir, "model.pt2"))
    mod = ep.module().to(device)
    ins = load_file(os.path.join(model_dir, "inputs.safetensors"))
    args = [ins[f"input.{i}"].to(device) for i in range(len(ins))]
    with torch.no_grad():
        out = mod(*args)
        for _ in range(3):
            mod(*args)
        sync(device)
        t = time.perf_counter()
        for _ in range(steps):
            mod(*args)
        sync(device)
    ms = 1e3 * (time.perf_counter() - t) / steps
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return {f"output.{i}": o.detach().cpu() for i, o in enumerate(outs)}, ms


def compare(got_path, want, rtol, atol):
    got = load_file(got_path)
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            return f"{name} missing"
        g, w = got[name].double(), w.double()
        if g.shape != w.shape:
            return f"{name}: shape {tuple(g.shape)} vs {tuple(w.shape)}"
        err = float((g - w).abs().max()) if g.numel() else 0.0
        worst = max(worst, err)
        if not torch.allclose(g, w, rtol=rtol, atol=atol):
            return f"{name}: max abs {err:.3g} above rtol {rtol} atol {atol}"
    return f"ok (max abs {worst:.2g})"


def run_case(a, work, model, layout, n, want, rtol, atol, repeat):
    """Compiles `model` under `layout` for n ranks, runs it, checks it; returns ms/step."""
    d = os.path.join(work, model)
    label = os.path.basename(layout).replace(".json", "")
    prog = os.path.join(work, f"{model}.{label}.{n}.spmd")
    out = os.path.join(work, f"{model}.{label}.{n}.safetensors")
    try:
        sh([a.spmdc, "compile", os.path.join(d, "model.pt2"), "--mesh", str(n), "--schema", layout,
            "-o", prog, "-q"])
        text = sh([a.spmd_run, "-n", str(n), prog, "--device", a.device, "--inputs",
                   os.path.join(d, "inputs.safetensors"), "--output", out, "--repeat", str(repeat)])
        m = re.search(r"step ([0-9.]+) ms", text)
        ms = float(m.group(1)) if m else float("nan")
        verdict = compare(out, want, rtol, atol)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        ms, verdict = float("nan"), f"FAILED: {e}"
    if not verdict.startswith("ok"):
        FAILURES.append(f"{model} {label} n={n}: {verdict}")
    print(f"{model:12s} {label:14s} {n:>2d}  {ms:9.3f} ms  {verdict}", flush=True)
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--work")
    ap.add_argument("--quick", action="store_true", help="leave out the compute-bound model")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu-check: error: torch sees no GPU", file=sys.stderr)
        return 2
    gpus = torch.cuda.device_count() if a.device == "cuda" else 1
    work = a.work or tempfile.mkdtemp(prefix="spmdc-gpu-check-")
    models = INFER + TRAIN + ([] if a.quick else [BIG])
    print(f"torch {torch.__version__}, device {a.device}"
          + (f" ({torch.cuda.get_device_name(0)}, {gpus} GPU)" if a.device == "cuda" else ""), flush=True)
    sh([sys.executable, os.path.join(ROOT, "testdata", "export_models.py"), work, "--only", ",".join(models)],
       timeout=1200)
    steps = 100 if a.device == "cuda" else 10
    examples = os.path.join(ROOT, "schemas", "examples")
    timing = []
    print(f"{'model':12s} {'layout':14s} {'n':>2s}  {'step':>12s}  result")
    for m in models:
        d = os.path.join(work, m)
        if m in TRAIN:
            # The joint graph's eager reference: the loss and gradients the
            # export computed (CPU); the device's kernels differ in rounding.
            want, eager_ms = load_file(os.path.join(d, "expected.safetensors")), float("nan")
            rtol, atol = 2e-3, 1e-4
        else:
            want, eager_ms = eager(d, a.device, steps)
            rtol, atol = 1e-4, 1e-5
        ms1 = run_case(a, work, m, "dp", 1, want, rtol, atol, steps)
        timing.append((m, ms1, eager_ms))
        if m == BIG:
            continue
        run_case(a, work, m, "dp", 2, want, rtol, atol, 3)
        if m in TP:
            run_case(a, work, m, os.path.join(examples, TP[m]), 2, want, rtol, atol, 3)
            if gpus > 2:
                run_case(a, work, m, os.path.join(examples, TP[m]), gpus, want, rtol, atol, 3)
    print(f"\n== step time at 1 rank, {a.device} ({steps} steps; spmd-run's last step vs eager's mean)")
    print(f"{'model':12s} {'spmd-run ms':>12s} {'eager ms':>10s} {'ratio':>7s}")
    for m, ms, e in timing:
        print(f"{m:12s} {ms:12.3f} {e:10.3f} {ms / e if e == e and e > 0 else float('nan'):7.2f}")
    with open(os.path.join(work, "gpu-check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "device": a.device, "timing": timing,
                   "failures": FAILURES}, f, indent=1)
    if FAILURES:
        print(f"\ngpu-check: {len(FAILURES)} failed:\n  " + "\n  ".join(FAILURES), file=sys.stderr)
        return 1
    print("\ngpu-check: all cases match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
