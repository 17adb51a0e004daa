"""The end-to-end part of scripts/gpu-check.sh: fresh exports, spmd-run on
the GPU against PyTorch eager on the same GPU, and a timing table.

    python3 scripts/gpu_check.py SPMDC SPMD_RUN [--device cuda|cpu] [--work DIR] [--quick] [--dry-run]

Per model (exported here with this torch by testdata/export_models.py):
  - eager reference on the device (inference models: the exported program
    moved to the device by torch.export.passes.move_to_device_pass; train
    steps: the eager loss and gradients the export wrote, computed on the
    CPU, compared with a looser tolerance);
  - spmd-run at 1 rank (NCCL on CUDA), at 2 ranks on one device (Gloo with
    device tensors) under dp, fsdp (parameters all-gathered; a train step's
    gradients reduce-scattered) and Megatron TP, an all-to-all (mlp, batch
    split in, columns split out) at 2 ranks, and TP over NCCL at every GPU
    when there are several; every output compared with the reference;
  - step time of spmd-run at 1 rank against eager's, same inputs: both the
    median over synchronized steps after warm-up (spmd-run's "step X ms" is
    the slowest rank's median, its first step left out).
Every row reports its own failure (a reference or an export that fails
included) and the table goes on; exits non-zero on any failure. --device
cpu runs the same flow on the CPU (what CI does, so the script cannot rot
between GPU runs); --quick leaves out the compute-bound model.

Then the throughput table (gpu_throughput.py): a 1B-class Llama train step
(bf16 compute, float32 master weights, AdamW) and its inference step on one
device, spmd-run with and without --cuda-graph against eager PyTorch and
torch.compile, in tokens/s and MFU. --dry-run (CI, on the CPU) runs the
whole flow, --quick's correctness rows and the throughput rows at a tiny
size, every throughput row labelled "dry-run": it proves the script works
and measures nothing.

reference(model_dir, device) and reference_outputs() are importable; the
test tests/gpucheck/test_reference.py runs them on the meta device standing
in for CUDA.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file
from torch.export.passes import move_to_device_pass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_throughput  # noqa: E402: beside this script
INFER = ["mlp", "gpt_block", "llama"]
TRAIN = ["llama_train"]
BIG = "llama_big"
TP = {"mlp": "mlp_tp.json", "gpt_block": "gpt_block_tp.json", "llama": "llama_tp.json",
      "llama_big": "llama_tp.json"}
# mlp with its batch split in and its columns split out: the output's
# reshard from S(0) to S(1) is an all-to-all (2 ranks: 32 rows and 64
# columns split evenly).
ALL_TO_ALL = {
    "version": 1,
    "mesh": {"shape": [2], "axes": ["dp"]},
    "inputs": [{"match": "x", "placements": {"dp": "S(0)"}}],
    "outputs": [{"match": "output.0", "placements": {"dp": "S(1)"}}],
}
FAILURES = []


def sh(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
    return r.stdout


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def export_models(work, names):
    """Exports test models `names` with this torch into work/<name> (testdata/export_models.py)."""
    sh([sys.executable, os.path.join(ROOT, "testdata", "export_models.py"), work, "--only", ",".join(names)],
       timeout=1200)


def reference(model_dir, device):
    """The eager reference of an exported model on `device`: (module, inputs).

    The exported program goes to the device through PyTorch's own
    torch.export.passes.move_to_device_pass, which moves the parameters,
    buffers and constants and rewrites the devices torch.export baked into
    factory ops (the causal mask's aten.full(..., device=cpu) in gpt_block
    and llama); ep.module().to(device) moves only the first and fails there.
    Not the original nn.Module: testdata/export_models.py builds each model
    inside the function that exports it and keeps no handle on it, and the
    program is what spmdc compiles, with the same weights and ops.
    """
    ep = torch.export.load(os.path.join(model_dir, "model.pt2"))
    ep = move_to_device_pass(ep, device)
    ins = load_file(os.path.join(model_dir, "inputs.safetensors"))
    args = [ins[f"input.{i}"].to(device) for i in range(len(ins))]
    return ep.module(), args


def reference_outputs(mod, args):
    """The reference's outputs, a tuple of tensors on its device."""
    with torch.no_grad():
        out = mod(*args)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def eager(model_dir, device, steps):
    """Eager outputs (on the CPU) and the median ms per synchronized step."""
    mod, args = reference(model_dir, device)
    outs = reference_outputs(mod, args)
    times = []
    with torch.no_grad():
        for _ in range(3):
            mod(*args)
        for _ in range(steps):
            sync(device)
            t = time.perf_counter()
            mod(*args)
            sync(device)
            times.append(time.perf_counter() - t)
    return {f"output.{i}": o.detach().cpu() for i, o in enumerate(outs)}, 1e3 * statistics.median(times)


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


def row(model, label, n, ms, verdict):
    """Prints one table row; a verdict other than ok counts as a failure."""
    if not verdict.startswith("ok"):
        FAILURES.append(f"{model} {label} n={n}: {verdict}")
    print(f"{model:12s} {label:14s} {n:>2d}  {ms:9.3f} ms  {verdict}", flush=True)


def run_case(a, work, model, layout, n, want, rtol, atol, repeat, collective=None):
    """Compiles `model` under `layout` for n ranks, runs it, checks it; returns ms/step.

    `collective` ("spmd.all_to_all", ...): the program must hold it, so the
    row cannot pass without exercising it."""
    d = os.path.join(work, model)
    label = os.path.basename(layout).replace(".json", "")
    prog = os.path.join(work, f"{model}.{label}.{n}.spmd")
    out = os.path.join(work, f"{model}.{label}.{n}.safetensors")
    try:
        sh([a.spmdc, "compile", os.path.join(d, "model.pt2"), "--mesh", str(n), "--schema", layout,
            "-o", prog, "-q"])
        if collective and collective + "(" not in sh([a.spmdc, "dump", prog]):
            raise RuntimeError(f"the program has no {collective}: the row would not exercise it")
        text = sh([a.spmd_run, "-n", str(n), prog, "--device", a.device, "--inputs",
                   os.path.join(d, "inputs.safetensors"), "--output", out, "--repeat", str(repeat)])
        m = re.search(r"step ([0-9.]+) ms", text)
        ms = float(m.group(1)) if m else float("nan")
        verdict = compare(out, want, rtol, atol)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        ms, verdict = float("nan"), f"FAILED: {e}"
    row(model, label, n, ms, verdict)
    return ms


def check_model(a, work, m, gpus, steps):
    """Every row of model `m`; returns (m, spmd-run ms at 1 rank, eager ms)."""
    examples = os.path.join(ROOT, "schemas", "examples")
    try:
        export_models(work, [m])
        d = os.path.join(work, m)
        if m in TRAIN:
            # The joint graph's eager reference: the loss and gradients the
            # export computed (CPU); the device's kernels differ in rounding.
            want, eager_ms = load_file(os.path.join(d, "expected.safetensors")), float("nan")
            rtol, atol = 2e-3, 1e-4
        else:
            want, eager_ms = eager(d, a.device, steps)
            rtol, atol = 1e-4, 1e-5
    except Exception as e:  # noqa: BLE001: any failure of the reference is this model's row
        row(m, "reference", 1, float("nan"), f"FAILED: {type(e).__name__}: {str(e).strip()[-2000:]}")
        return None
    ms1 = run_case(a, work, m, "dp", 1, want, rtol, atol, steps)
    if m == BIG:
        return m, ms1, eager_ms
    run_case(a, work, m, "dp", 2, want, rtol, atol, 3)
    run_case(a, work, m, "fsdp", 2, want, rtol, atol, 3,
             collective="spmd.reduce_scatter" if m in TRAIN else None)
    if m in TP:
        run_case(a, work, m, os.path.join(examples, TP[m]), 2, want, rtol, atol, 3)
        if gpus > 2:
            run_case(a, work, m, os.path.join(examples, TP[m]), gpus, want, rtol, atol, 3)
    if m == "mlp":
        layout = os.path.join(work, "mlp_alltoall.json")
        with open(layout, "w") as f:
            json.dump(ALL_TO_ALL, f)
        run_case(a, work, m, layout, 2, want, rtol, atol, 3, collective="spmd.all_to_all")
    return m, ms1, eager_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--work")
    ap.add_argument("--quick", action="store_true", help="leave out the compute-bound model")
    ap.add_argument("--dry-run", action="store_true",
                    help="the whole flow on the CPU at tiny sizes (--device cpu --quick; throughput rows labelled)")
    a = ap.parse_args()
    if a.dry_run:
        a.device, a.quick = "cpu", True
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu-check: error: torch sees no GPU", file=sys.stderr)
        return 2
    gpus = torch.cuda.device_count() if a.device == "cuda" else 1
    work = a.work or tempfile.mkdtemp(prefix="spmdc-gpu-check-")
    os.makedirs(work, exist_ok=True)
    models = INFER + TRAIN + ([] if a.quick else [BIG])
    print(f"torch {torch.__version__}, device {a.device}"
          + (f" ({torch.cuda.get_device_name(0)}, {gpus} GPU)" if a.device == "cuda" else ""), flush=True)
    steps = 100 if a.device == "cuda" else 10
    print(f"{'model':12s} {'layout':14s} {'n':>2s}  {'step':>12s}  result")
    timing = [t for t in (check_model(a, work, m, gpus, steps) for m in models) if t]
    print(f"\n== step time at 1 rank, {a.device} ({steps} steps; the median step after warm-up, each "
          "step synchronized: spmd-run's 'step' against eager's)")
    print(f"{'model':12s} {'spmd-run ms':>12s} {'eager ms':>10s} {'ratio':>7s}")
    for m, ms, e in timing:
        print(f"{m:12s} {ms:12.3f} {e:10.3f} {ms / e if e == e and e > 0 else float('nan'):7.2f}")
    throughput = gpu_throughput.table(a, work, sh, FAILURES)
    with open(os.path.join(work, "gpu-check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "device": a.device, "timing": timing, "throughput": throughput,
                   "failures": FAILURES}, f, indent=1)
    if FAILURES:
        print(f"\ngpu-check: {len(FAILURES)} failed:\n  " + "\n  ".join(FAILURES), file=sys.stderr)
        return 1
    print("\ngpu-check: all cases match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
