#!/usr/bin/env python3
"""Activation checkpointing, side by side: spmdc's "recompute" (none, full,
selective, auto at 75/50/30% of the plain peak) against PyTorch eager with
torch.utils.checkpoint on the same model, per-rank memory and step time.

Usage:
    .venv/bin/python scripts/bench_recompute.py [--layers 8] [--hidden 512] [--batch 2] [--seq 256]
                                                [--meshes 2,4] [--steps 3] [--json OUT]

The model is a transformers LlamaForCausalLM (random weights, seed 0;
hidden 512, 8 heads, MLP 1024, vocabulary 2,000), one train step (loss and
gradients, no optimizer) exported with spmdc_export. For each mesh size the
step is compiled under dp with "recompute" none, {"model.layers.*":
"full"}, {"save": ["aten.mm"]} and "auto", and run with `spmd-run --steps N
--profile` (rank 0's live-tensor peak, MemoryMeter) and
SPMD_MEMORY_TRACE (rank 0's live tensor bytes after every node).

Budgets. Recomputation changes activations only: what full recomputation
still holds at its peak (weights, inputs, gradients, the gradient
all-reduce's bucket, the layers' boundary values) no plan lowers. So the
budgets are full's estimated peak F plus 75%, 50% and 30% of what
recomputation can free at the peak, P0 - F (P0: the plain step's
estimated peak). Where P0 = F (the peak is the gradient all-reduce, not
activations) every budget is P0 and "auto" rightly recomputes nothing.

Activations, measured. The executor has no split of its live bytes by
kind, so the script makes one from the trace and the compiled program
(`--print-after async-collectives`): at each node, live bytes less the
state before the step (weights, inputs), less the gradients made by then
(each parameter gradient from the node that makes it), less a gradient
bucket's flat copy while it is live (from its aten.cat to its
all-reduce); the column is the largest of these over the step. The
compiler's estimate of saved activations (what the forward keeps for the
backward: `--report`'s per_rank.saved_activation_bytes, the compile
note's "saved activations B -> A" figure) is printed beside it. PyTorch's rows run the same module eagerly
in one process, without checkpointing, with transformers' gradient
checkpointing (torch.utils.checkpoint per decoder layer, non-reentrant)
and with create_selective_checkpoint_contexts saving aten.mm: the bytes
autograd saves for the backward (saved_tensors_hooks, distinct storages),
the growth of the process's peak resident set, and the median step time.

The goals (issue 32): auto at each budget at least as fast as full and
within 5% of the best hand policy that fits; full cutting the activations
at least 3x. The script prints the ratios; it does not judge them.
"""
import argparse
import re
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPMDC = ROOT / "build" / "tools" / "spmdc" / "spmdc"
SPMD_RUN = ROOT / "build" / "tools" / "spmd-run" / "spmd-run"
sys.path.insert(0, str(ROOT / "python"))
POLICIES = {"none": "none", "full": "full", "selective": {"save": ["aten.mm"]}}


def run(cmd, env=None, ok=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if ok and r.returncode != 0:
        sys.exit(f"bench_recompute: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def build_model(a):
    import torch
    from spmdc_export import hf
    torch.manual_seed(0)
    return hf.build("llama", train=True, layers=a.layers, hidden=a.hidden, heads=a.hidden // 64, vocab=2000,
                    batch=a.batch, seq=a.seq)


def vm_hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def eager_worker(a):
    """One PyTorch policy in this process: prints a JSON line."""
    import functools
    import torch
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    torch.set_num_threads(2)
    m = build_model(a)
    kw = {"none": None, "full": {"use_reentrant": False},
          "selective": {"use_reentrant": False, "context_fn": functools.partial(
              create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])}}[a.eager]
    if kw is None:
        m.module.gradient_checkpointing_disable()
    else:
        m.module.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    m.module.train()
    saved = {}

    def pack(t):
        try:
            s = t.untyped_storage()
            saved[s.data_ptr()] = s.nbytes()
        except (RuntimeError, NotImplementedError):
            pass
        return t

    def step():
        m.module.zero_grad(set_to_none=True)
        loss = m.loss_fn(m.module(*m.inputs), *m.targets)
        loss.backward()

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = vm_hwm()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()  # the first step: its growth is what it allocated (later ones reuse the allocator's pages)
    growth = vm_hwm() - base
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"saved_bytes": sum(saved.values()), "rss_growth_bytes": growth,
                      "step_ms": statistics.median(times) * 1e3}))


def eager_rows(a):
    rows = []
    for policy in POLICIES:
        r = run([sys.executable, __file__, "--eager", policy, *sys.argv[1:]],
                env={**os.environ, "OMP_NUM_THREADS": "2"})
        rows.append({"side": "PyTorch eager", "mesh": 1, "policy": policy, **json.loads(r.stdout.splitlines()[-1])})
    return rows


NODE = re.compile(r"^%(\S+): (\w+)\[([\d, ]*)\](?:\{[^}]*\})? = (\S+)\((?:self=%(\S+?)[,)])?")
VIEWS = {"aten.permute.default", "aten.view.default", "aten.reshape.default", "aten.t.default",
         "aten.transpose.int", "aten.alias.default", "aten._unsafe_view.default", "aten.squeeze.dims",
         "aten.unsqueeze.default", "aten.expand.default", "aten.slice.Tensor", "aten.select.int"}
OUTPUT = re.compile(r"^output %(\S+) gradient_to_parameter ")
TRACE = re.compile(r"^\[rank 0\] memory (\d+) (\d+) \d+ node %(\S+) ")
ELEMENT = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "bool": 1}


def program_kinds(listing):
    """From `--print-after async-collectives`: {node: gradient bytes it
    makes} and {bucket cat or its all-reduce: the bucket's bytes}."""
    nbytes, grads, buckets, viewOf = {}, {}, {}, {}
    for line in listing.splitlines():
        m = NODE.match(line)
        if m:
            if m.group(4) in VIEWS and m.group(5):
                viewOf[m.group(1)] = m.group(5)
            n = 1
            for d in filter(None, m.group(3).replace(" ", "").split(",")):
                n *= int(d)
            nbytes[m.group(1)] = n * ELEMENT.get(m.group(2), 4)
            if m.group(4) == "aten.cat.default" and m.group(1).startswith("bucket"):
                buckets[m.group(1)] = nbytes[m.group(1)]
                buckets[m.group(1) + "_all_reduce"] = nbytes[m.group(1)]
        m = OUTPUT.match(line)
        if m:  # the gradient before its all-reduce, through views to the node that makes it
            name = re.sub(r"_all_reduce(_bucketed)?$", "", m.group(1))
            origin = name
            while origin in viewOf:
                origin = viewOf[origin]
            grads[origin] = grads.get(origin, 0) + nbytes.get(name, 0)
    return grads, buckets


def traced_activations(trace, state, grads, buckets):
    """The largest live bytes less state, gradients made and a bucket's
    copy, over the last step of rank 0's trace; and that node."""
    best, at, made, last = -1, "", 0, -1
    for line in trace.splitlines():
        m = TRACE.match(line)
        if not m:
            continue
        i, live, name = int(m.group(1)), int(m.group(2)), m.group(3)
        if i <= last:  # a new step
            best, at, made = -1, "", 0
        last = i
        made += grads.get(name, 0)
        act = live - state - made - buckets.get(name, 0)
        if act > best:
            best, at = act, name
    return best, at


def spmd_row(a, d, n, policy, how, budget=None):
    sfile, prog, rep, prof = (d / f"{n}_{policy}{ext}" for ext in (".json", ".spmd", ".report.json", ".prof.json"))
    sfile.write_text(json.dumps({"version": 1, "preset": "dp", "recompute": {"model.layers.*": how}}))
    extra = ["--memory-budget", str(budget)] if budget else []
    r = run([SPMDC, "compile", d / "model.pt2", "--schema", sfile, "--mesh", n, "-o", prog, "--report", rep,
             "--print-after", "async-collectives", *extra], ok=False)
    row = {"side": "spmdc", "mesh": n, "policy": policy, "budget": budget}
    if r.returncode != 0:
        row["refused"] = r.stderr.strip()
        return row
    grads, buckets = program_kinds(r.stdout + r.stderr)
    report = json.loads(rep.read_text())
    row["estimated_peak"] = report["per_rank"]["peak_bytes_estimate"]
    row["peak_node"] = report["per_rank"].get("peak_node", "")  # where the compiler places the peak
    row["note"] = next((x for x in report["notes"] if x.startswith("recompute:")), "")
    row["saved_estimate"] = report["per_rank"]["saved_activation_bytes"]  # the note's "saved activations B -> A": A
    row["modeled_ms"] = report["cost"]["modeled_step_ms"]
    threads = str(max(1, 2 // n))
    tr = run([SPMD_RUN, "-n", n, prog, "--inputs", d / "inputs.safetensors", "--steps", a.steps, "--profile", prof],
             env={**os.environ, "OMP_NUM_THREADS": threads, "SPMD_MEMORY_TRACE": "1"})
    r0 = json.loads(prof.read_text())["ranks"][0]
    row.update(measured_peak=r0["peak_bytes"], state=r0.get("state_bytes", 0), step_ms=r0["step_ms"])
    row["above_state"] = row["measured_peak"] - row["state"]
    row["activations"], row["activation_peak_node"] = traced_activations(tr.stderr, row["state"], grads, buckets)
    row["gradients"] = a.grad_bytes
    row["bucket_bytes"] = max(buckets.values(), default=0)
    return row


def spmd_rows(a, d):
    rows = []
    for n in [int(x) for x in a.meshes.split(",")]:
        for policy, how in POLICIES.items():
            rows.append(spmd_row(a, d, n, policy, how))
        # Budgets: full's estimated peak F plus 75/50/30% of what
        # recomputation can free at the peak (P0 - F).
        plain, full = rows[-3], rows[-2]
        for frac in (0.75, 0.5, 0.3):
            budget = full["estimated_peak"] + int((plain["estimated_peak"] - full["estimated_peak"]) * frac)
            rows.append(spmd_row(a, d, n, f"auto {int(frac * 100)}%", "auto", budget))
    return rows


def mib(x):
    return f"{x / 2**20:8.2f}" if isinstance(x, (int, float)) else f"{'':>8}"


def print_table(eager, spmd):
    print(f"\n{'side':<14} {'mesh':>4} {'policy':<10} {'budget':>8} {'est MiB':>8} {'peak MiB':>8} "
          f"{'act MiB':>8} {'saved':>8} {'step ms':>8} {'vs none':>8} {'modeled':>8}  recomputed")
    for mesh in sorted({r["mesh"] for r in spmd}):
        group = [r for r in spmd if r["mesh"] == mesh]
        none = next(r for r in group if r["policy"] == "none")
        for r in group:
            if "refused" in r:
                print(f"{'spmdc':<14} {mesh:>4} {r['policy']:<10} {mib(r['budget'])} refused: {r['refused'][:90]}")
                continue
            ratio = r["step_ms"] / none["step_ms"]
            what = r["note"].split(";")[-1].strip() if "auto" in r["note"] else r["note"].split(";")[0][11:]
            print(f"{'spmdc':<14} {mesh:>4} {r['policy']:<10} {mib(r['budget'])} {mib(r['estimated_peak'])} "
                  f"{mib(r['measured_peak'])} {mib(r['activations'])} {mib(r['saved_estimate'])} "
                  f"{r['step_ms']:8.1f} {ratio:7.2f}x {r['modeled_ms'] / none['modeled_ms']:7.2f}x  {what[:60]}")
        full = next(r for r in group if r["policy"] == "full")
        print(f"{'':<14} {mesh:>4} full cuts the measured peak activations "
              f"{none['activations'] / max(1, full['activations']):.2f}x "
              f"({mib(none['activations']).strip()} at %{none['activation_peak_node']} -> "
              f"{mib(full['activations']).strip()} MiB at %{full['activation_peak_node']}) and the saved "
              f"activations {none['saved_estimate'] / max(1, full['saved_estimate']):.2f}x (estimate); "
              f"estimated peaks at %{none['peak_node']} and %{full['peak_node']} (largest gradient bucket "
              f"{mib(full['bucket_bytes']).strip()} MiB)")
        hand = [r for r in group if r["policy"] in POLICIES and "refused" not in r]
        for r in group:
            if not r["policy"].startswith("auto") or "refused" in r:
                continue
            fitting = [h for h in hand if h["estimated_peak"] <= r["budget"]]
            best = min(fitting, key=lambda h: h["modeled_ms"]) if fitting else None  # load-free
            print(f"{'':<14} {mesh:>4} {r['policy']}: measured peak {r['measured_peak'] - r['budget']:+,d} B "
                  f"against the budget; step {r['step_ms'] / full['step_ms']:.2f}x full's (modeled "
                  f"{r['modeled_ms'] / full['modeled_ms']:.2f}x)"
                  + (f", {r['step_ms'] / best['step_ms']:.2f}x the best hand policy that fits ({best['policy']}; "
                     f"modeled {r['modeled_ms'] / best['modeled_ms']:.2f}x)" if best else ", no hand policy fits"))
    base = next(r for r in eager if r["policy"] == "none")
    for r in eager:
        print(f"{r['side']:<14} {1:>4} {r['policy']:<10} {'':>8} {'':>8} {mib(r['rss_growth_bytes'])} "
              f"{'':>8} {mib(r['saved_bytes'])} {r['step_ms']:8.1f} {r['step_ms'] / base['step_ms']:7.2f}x  "
              "(peak: RSS growth; saved: bytes saved for backward)")
    print("act: rank 0's largest live bytes over the step less the state, the gradients made by then and a "
          "gradient bucket's copy; saved: the compiler's estimate of saved activations (eager: measured); "
          "modeled: the compiler's step time against none's; a hand policy fits a budget when its estimated "
          "peak does; the best that fits: the fastest modeled")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--meshes", default="2,4")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--eager", choices=list(POLICIES), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.eager:
        return eager_worker(a)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="spmdc-bench-recompute-") as tmp:
        d = Path(tmp)
        from spmdc_export import core
        m = build_model(a)
        params = {p.data_ptr(): p for p in m.module.parameters() if p.requires_grad}
        a.grad_bytes = sum(p.numel() * p.element_size() for p in params.values())
        core.export_train_step(m.module, m.inputs, d, loss_fn=m.loss_fn, targets=m.targets)
        spmd = spmd_rows(a, d)
    eager = eager_rows(a)
    print(f"bench_recompute: llama {a.layers} layers, hidden {a.hidden}, {a.batch}x{a.seq} tokens, "
          f"{a.steps} steps, {time.time() - t0:.0f} s")
    print_table(eager, spmd)
    if a.json:
        Path(a.json).write_text(json.dumps({"spmdc": spmd, "eager": eager}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
