"""The throughput table of scripts/gpu-check.sh (scripts/gpu_check.py calls
table()): a 1B-class Llama on one device, a train step and an inference
step, spmd-run with and without CUDA graphs against eager PyTorch and
torch.compile of the same model and optimizer, in tokens/s and MFU.

The model is testdata/export_models.py's Llama at hidden 2048, 16 layers,
16 heads (head 128), FFN 5632, vocabulary 32000 (0.95B parameters, 0.89B
of them in matmuls; untied output head), batch 4 x sequence 1024 = 4,096 tokens a step: every matmul
at least 4096 x 2048 x 2048, compute-bound on an H100/H200.

  train   bf16 compute, float32 master weights, AdamW (lr 1e-3, weight
          decay 0.01). spmd-run: the joint step exported in mixed
          precision (spmdc_export precision="bf16"), `spmdc compile --mesh 1
          --optimizer adamw --mixed-precision bf16`, `--steps 10`.
          PyTorch: torch.autocast(bf16) over the float32 model,
          torch.optim.AdamW(fused=True); torch.compile of the model (the
          fused AdamW step is one kernel already).
  infer   the model in bf16 (weights and compute), one forward. spmd-run:
          the bf16 model exported and compiled at mesh 1, `--repeat 10`.

Timing: PyTorch 3 warm-up + 5 timed steps, each synchronized, the median;
spmd-run its "step" (the median over its runs, the first left out; with
--cuda-graph on, runs 1-2 are eager warm-up, 3 is the capture, the rest
replays). MFU = model FLOPs per step / step time / 989 TFLOP/s (H100/H200
SXM dense bf16): 6·N·tokens (train; N = the parameters that take part in
matmuls: all but the token embedding) plus attention, 12·layers·hidden·seq
per token (QK^T and AV, forward and backward, the causal half not taken
off); inference 2·N·tokens + 4·layers·hidden·seq per token.

Numbers are checked, not only timed: spmd-run's first train loss against
the export's eager mixed-precision loss (relative 1e-2), the losses with
and without CUDA graphs against each other (relative 1e-2, every step),
and the inference outputs against the export's eager bf16 outputs
(spmd-run --verify-against, RMS relative 2e-2). A wrong number fails the
row and the check.

Time budget on the device (whole check: 8 minutes; estimates, as no GPU
has run this yet): train export (trace + eager step + 4 GB written) ~40 s,
compile ~20 s, two spmd-run rows ~25 s each (load 4 GB weights + 8 GB AdamW
states, 10 steps of ~60 ms), PyTorch eager ~15 s, torch.compile ~90 s
(inductor's first compile); inference: export ~20 s, compile ~10 s, two
spmd-run rows ~10 s each, eager ~5 s, torch.compile ~40 s. About 5 minutes.

--dry-run (CI, the CPU): the same flow at hidden 64, 2 layers, 2 x 16
tokens, torch.compile with the aot_eager backend (no C++ toolchain
needed), spmd-run with --cuda-graph auto (off on a CPU) plus a check that
--cuda-graph on is refused in one line; every row labelled dry-run.

    python3 scripts/gpu_throughput.py --torch-side train|infer --size gpu|dry-run --device D --work DIR
    python3 scripts/gpu_throughput.py --export train|infer --size gpu|dry-run --device D --work DIR
(the PyTorch side and the export, each in a process of its own so that
its device memory is free before spmd-run starts.)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"gpu": {"vocab": 32000, "d": 2048, "heads": 16, "ffn": 5632, "layers": 16, "batch": 4, "seq": 1024},
         "dry-run": {"vocab": 256, "d": 64, "heads": 4, "ffn": 128, "layers": 2, "batch": 2, "seq": 16}}
PEAK_FLOPS = 989e12  # H100/H200 SXM dense bf16
WARMUP, TIMED = 3, 5
SPMD_RUNS = 10
LR, WD = 1e-3, 0.01
LOSS_RTOL = 1e-2
OUT_RTOL, OUT_ATOL = 2e-2, 1e-3


def build(kind, size, device):
    """(module, inputs) of the table's model, seeded: the same weights in every process."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "testdata"))
    import export_models as em

    # bf16 compute: rope's float32 cos/sin tables would promote q and k back
    # to float32 (and the step fail at att @ v); they follow x's dtype, as
    # in Llama implementations that keep the tables in the compute dtype.
    if not getattr(em, "_rope_follows_dtype", False):
        rope = em.rope
        em.rope = lambda x, cos, sin: rope(x, cos.to(x.dtype), sin.to(x.dtype))
        em._rope_follows_dtype = True
    z = SIZES[size]
    kw = {k: z[k] for k in ("vocab", "d", "heads", "ffn", "layers")}
    torch.manual_seed(0)
    mod = (em.LlamaLoss if kind == "train" else em.Llama)(max_seq=z["seq"], **kw)
    g = torch.Generator().manual_seed(1)
    tok = [torch.randint(0, z["vocab"], (z["batch"], z["seq"]), generator=g) for _ in range(2)]
    if kind == "infer":
        mod, tok = mod.to(torch.bfloat16), tok[:1]
    return mod.to(device), [t.to(device) for t in tok]


def model_flops(kind, size, matmul_params):
    """Model FLOPs of one step (see the module docstring)."""
    z = SIZES[size]
    tokens = z["batch"] * z["seq"]
    attention = z["layers"] * z["d"] * z["seq"] * tokens
    return 6 * matmul_params * tokens + 12 * attention if kind == "train" else 2 * matmul_params * tokens + 4 * attention


def matmul_params(size):
    """Parameters of the Llama that take part in matmuls (all but the token embedding)."""
    z = SIZES[size]
    d, f = z["d"], z["ffn"]
    per_layer = 4 * d * d + 3 * d * f + 2 * d  # attention, SwiGLU FFN, two norms
    return z["layers"] * per_layer + d + d * z["vocab"]  # final norm, output head


def torch_side(a):
    """Eager and torch.compile step times (ms) of a.torch_side, printed as JSON."""
    import torch

    cuda = a.device == "cuda"
    res = {}
    for name, backend in (("eager", None), ("compile", "inductor" if cuda else "aot_eager")):
        mod, inputs = build(a.torch_side, a.size, a.device)
        fn = torch.compile(mod, backend=backend) if backend else mod
        if a.torch_side == "train":
            opt = torch.optim.AdamW(mod.parameters(), lr=LR, weight_decay=WD, fused=True)

            def step():
                with torch.autocast(device_type=a.device, dtype=torch.bfloat16):
                    loss = fn(*inputs)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        else:
            def step():
                with torch.inference_mode():
                    fn(*inputs)
        times = []
        for i in range(WARMUP + TIMED):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            if i >= WARMUP:
                times.append(time.perf_counter() - t0)
        res[name] = {"ms": 1e3 * statistics.median(times), "backend": backend}
        del mod, fn
        if backend:
            torch._dynamo.reset()
    print(json.dumps(res))


def export(a):
    """Exports the table's model of kind a.export into a.work/<kind>."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import spmdc_export

    mod, inputs = build(a.export, a.size, a.device)
    out = os.path.join(a.work, a.export)
    if a.export == "train":
        spmdc_export.export_train_step(mod, inputs, out, precision="bf16")
    else:
        spmdc_export.export(mod, inputs, out)


# ------------------------------------------------------------------ the table (in gpu_check.py's process)


def me(a, size, *args):
    """This script in a process of its own; returns its stdout."""
    cmd = [sys.executable, os.path.abspath(__file__), *args, "--size", size, "--device", a.device, "--work",
           a.throughput_work]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(args)}\n{r.stderr.strip()[-2000:]}")
    return r.stdout


def spmd_run(a, sh, prog, d, graph, extra):
    """One spmd-run row: (ms per step, stdout)."""
    text = sh([a.spmd_run, "-n", "1", prog, "--device", a.device, "--inputs", os.path.join(d, "inputs.safetensors"),
               "--cuda-graph", graph, *extra])
    m = re.search(r"step ([0-9.]+) ms", text)
    if not m:
        raise RuntimeError(f"spmd-run printed no step time:\n{text[-500:]}")
    return float(m.group(1)), text


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def check_losses(got, want_first, other=None):
    """Problems of a train row's losses (empty: none)."""
    if not got or any(x is None for x in got):
        return f"non-finite loss in {got}"
    if abs(got[0] - want_first) > LOSS_RTOL * abs(want_first):
        return f"first loss {got[0]:.6g}, the export's eager step {want_first:.6g}"
    if other is not None:
        bad = [i for i, (x, y) in enumerate(zip(got, other)) if abs(x - y) > LOSS_RTOL * abs(y)]
        if bad or len(got) != len(other):
            return f"losses differ from --cuda-graph off's at step {bad[:1] or len(got)}"
    return ""


def spmd_rows(a, sh, kind, size, graphs):
    """spmd-run's rows of `kind`: {label: (ms, problem)}."""
    from safetensors.torch import load_file

    d = os.path.join(a.throughput_work, kind)
    prog = os.path.join(a.throughput_work, f"{kind}.spmd")
    compile_args = ["--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(WD), "--mixed-precision", "bf16"]
    sh([a.spmdc, "compile", os.path.join(d, "model.pt2"), "--schema", "dp", "--mesh", "1", "-o", prog, "-q",
        *(compile_args if kind == "train" else [])])
    rows, seen = {}, None
    for graph in graphs:
        try:
            if kind == "train":
                log = os.path.join(a.throughput_work, f"{kind}.{graph}.jsonl")
                ms, _ = spmd_run(a, sh, prog, d, graph, ["--steps", str(SPMD_RUNS), "--loss-log", log])
                got = losses(log)
                want = float(load_file(os.path.join(d, "expected.safetensors"))["loss"])
                problem = check_losses(got, want, seen)
                seen = seen or got
            else:
                ms, _ = spmd_run(a, sh, prog, d, graph,
                                 ["--repeat", str(SPMD_RUNS), "--verify-against", os.path.join(d, "expected.safetensors"),
                                  "--rtol", str(OUT_RTOL), "--atol", str(OUT_ATOL)])
                problem = ""
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            ms, problem = float("nan"), f"FAILED: {str(e).strip()[-1500:]}"
        rows[f"spmd-run, --cuda-graph {graph}"] = (ms, problem)
    return rows, prog


def refusal_row(a, prog, d):
    """On the CPU: --cuda-graph on is refused with one line and exit 2."""
    r = subprocess.run([a.spmd_run, "-n", "1", prog, "--device", "cpu", "--inputs",
                        os.path.join(d, "inputs.safetensors"), "--cuda-graph", "on"],
                       capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    if r.returncode == 2 and len(lines) == 1 and "--cuda-graph on" in lines[0]:
        return ""
    return f"expected one line and exit 2, got exit {r.returncode}: {r.stderr.strip()[-500:]}"


def table(a, work, sh, failures):
    """Prints the throughput table; appends failing rows to `failures`; returns the rows."""
    size = "dry-run" if a.dry_run or a.device == "cpu" else "gpu"
    a.throughput_work = os.path.join(work, "throughput")
    os.makedirs(a.throughput_work, exist_ok=True)
    z = SIZES[size]
    tokens = z["batch"] * z["seq"]
    label = " [dry-run: tiny model on the CPU, not a measurement]" if size == "dry-run" else ""
    print(f"\n== throughput, 1 {a.device} device: Llama hidden {z['d']}, {z['layers']} layers, vocabulary "
          f"{z['vocab']} ({matmul_params(size) / 1e6:,.1f}M matmul parameters), {z['batch']} x {z['seq']} tokens"
          f"{label}", flush=True)
    print(f"{'step':6s} {'side':40s} {'ms':>10s} {'tokens/s':>12s} {'MFU':>7s}  result")
    graphs = ["on", "off"] if a.device == "cuda" else ["auto", "off"]
    out = []
    for kind in ("train", "infer"):
        flops = model_flops(kind, size, matmul_params(size))
        rows = {}
        try:
            me(a, size, "--export", kind)
            spmd, prog = spmd_rows(a, sh, kind, size, graphs)
            rows.update(spmd)
            if a.device == "cpu":
                rows["spmd-run, --cuda-graph on (refused)"] = (float("nan"), refusal_row(
                    a, prog, os.path.join(a.throughput_work, kind)))
            side = json.loads(me(a, size, "--torch-side", kind).strip().splitlines()[-1])
            for name, r in side.items():
                what = "eager" if name == "eager" else f"torch.compile ({r['backend']})"
                rows[f"{what}{', AdamW fused' if kind == 'train' else ''}"] = (r["ms"], "")
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            rows["(setup)"] = (float("nan"), f"FAILED: {str(e).strip()[-1500:]}")
        for name, (ms, problem) in rows.items():
            tps = tokens / (ms / 1e3) if ms == ms and ms > 0 else float("nan")
            mfu = flops / (ms / 1e3) / PEAK_FLOPS if ms == ms and ms > 0 else float("nan")
            verdict = problem or "ok"
            if problem:
                failures.append(f"throughput {kind} {name}: {problem}")
            print(f"{kind:6s} {name:40s} {ms:10.2f} {tps:12.0f} {100 * mfu:6.2f}%  {verdict}{label and ' (dry-run)'}",
                  flush=True)
            out.append({"step": kind, "side": name, "ms": ms, "tokens_per_s": tps, "mfu": mfu, "size": size,
                        "result": verdict})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-side", choices=["train", "infer"])
    ap.add_argument("--export", choices=["train", "infer"])
    ap.add_argument("--size", choices=list(SIZES), required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if a.torch_side:
        torch_side(a)
    elif a.export:
        export(a)
    else:
        ap.error("--torch-side or --export")
    return 0


if __name__ == "__main__":
    sys.exit(main())
