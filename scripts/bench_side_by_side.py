#!/usr/bin/env python3
"""spmd-run against PyTorch, side by side, in one run (issue 14).

    .venv/bin/python scripts/bench_side_by_side.py [--build build] [--short] [--json OUT]

Prints the tables behind docs/PERFORMANCE.md's "Current figures" (the
rows, the compile row and the route rows):

* single device: `spmd-run -n 1` (the program compiled at mesh 1) against
  eager PyTorch in one process, same inputs and the same intra-op thread
  count (OMP_NUM_THREADS / torch.set_num_threads), on llama, llama_train
  with AdamW and a compute-bound stack of 8 Linear(1024, 1024) + GELU;
* distributed on CPU: `spmd-run -n N` against the same layout in PyTorch
  (DTensor parallelize_module for Megatron TP, FSDP2 fully_shard for fsdp;
  Gloo, launched with torchrun, cores / N threads per rank on both sides),
  llama and llama_train at N = 2 and 4;
* compute-bound train step (issue 30), llama_big_train: a Llama (hidden
  512, 8 heads, FFN 1024, 4 layers, vocabulary 256) on batch 8 x sequence
  256 = 2,048 tokens a step, the joint train step exported with
  spmdc_export, `spmdc compile --optimizer adamw`, `spmd-run --steps K`.
  One device: against eager PyTorch with torch.optim.AdamW(foreach=True),
  AdamW(fused=True), and torch.compile of the model (forward and backward
  compiled by inductor; fused AdamW step; the first, compiling step left out
  like every first step). A PyTorch side that cannot run here (fused AdamW
  on this CPU build, inductor without a C++ compiler) gives a row that says
  why instead of a figure. Two ranks: DDP against the dp preset, FSDP2
  against fsdp, DTensor TP against llama_tp.json (AdamW foreach on
  PyTorch's side);
* compile: `spmdc compile` of llama_deep_train (TP, mesh 2) against tracing
  the same DTensor-TP forward+backward with make_fx (torch.distributed._spmd's
  route; fake process group) and against torch.export producing the archive;
* route: the whole spmdc route, export (spmdc_export's export_train_step, in
  process, timed once) plus `spmdc compile --optimizer adamw` (TP, mesh 2;
  median of 3 processes), for llama_deep_train and llama_big_train, next to
  compile alone and make_fx; for llama_deep_train also the export by
  torch.export's joint route (export_train_step(fast=False), the route
  before the one-pass trace of python/spmdc_export/joint.py).
  `--only compile` measures just these rows (the compile row's model).

Rounds (--rounds, default 3; 1 with --short): every row and the compile
row are measured that many times, the two sides alternated (PyTorch's
worker, then spmd-run, per round), so that a drift of the machine's speed
reaches both sides; on 2 shared cores one process's figure moves by 10-40%
from run to run.

Columns: step = median per rank of the timed steps (the first left out),
max over ranks, then the median over the rounds; ratio = the two medians'
ratio, spmd-run / PyTorch (below 1: spmd-run faster); rounds = the lowest
and highest of the rounds' own ratios;
bytes = sent per rank per step, ring convention, max over ranks (spmd-run's
own count; PyTorch: ProcessGroup pre-hooks on one extra step,
tests/reference/reference_comm.py's Recorder); colls = collectives per step
(spmdc's --report; PyTorch: the same hooks); peak = peak resident memory
per rank in MiB (spmd-run: wait4's ru_maxrss over the launcher's process
tree; PyTorch: VmHWM of each rank, reset before each case, interpreter and
torch included); diff = max |spmd-run - eager| over every output (train:
loss, gradients and parameters after the last step; llama_big_train: the
loss after the last step, against eager with AdamW foreach, tolerance 1e-3,
a loose bound for 2,048 tokens through a 10.8M-parameter model (sums
in another order: the other PyTorch sides differ from foreach too, printed
under the table); the largest difference over every gradient and parameter
is printed there as well, and kept in the json as pdiff).

--gloo N (by hand, instead of the table): the latency of Gloo's all-reduce
on 2 ranks as spmd-run drives it (`spmd-run --calibrate`: MeshComm, the
kernels of spmd.all_reduce) against torch.distributed's all_reduce in Python
(the same measurement: per size, the median over repetitions of the mean of
back-to-back calls, a barrier before each repetition, the slowest rank), the
two alternated N times; prints the medians and their ratio per size.

Models are built by tests/reference/reference_comm.py's make_case (seeded:
every process gets the same weights) with a batch of 8, exported with
python/spmdc_export into a temporary folder. --short (CI, ctest
bench_side_by_side): 3 steps, a 256-wide compute-bound model, a 64-wide
2-layer llama_big_train on 4 x 16 tokens (torch.compile with the aot_eager
backend: the capture path without inductor's C++ build) and mlp_train for
the compile and route rows; proves the script works, times nothing
meaningful. Exit status 1 when a row fails to run or diff exceeds its
tolerance (1e-4; llama_big_train's loss 1e-3).
"""
import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("testdata", os.path.join("tests", "reference"), "python"):
    sys.path.insert(0, os.path.join(ROOT, sub))

BATCH = 8
TOLERANCE = 1e-4
BIG = "llama_big_train"  # the compute-bound train step (issue 30)
# Llama(...) arguments and the batch; --short: a tiny one, the same code
BIG_SIZE = {False: {"d": 512, "heads": 8, "ffn": 1024, "layers": 4, "batch": 8, "seq": 256},
            True: {"d": 64, "heads": 4, "ffn": 128, "layers": 2, "batch": 4, "seq": 16}}
BIG_TOLERANCE = 1e-3  # |loss - eager's| after the steps (see the docstring)
# PyTorch's single-device sides for BIG: (name, row label, AdamW options, torch.compile)
BIG_VARIANTS = [("foreach", "eager, AdamW foreach", {"foreach": True}, False),
                ("fused", "eager, AdamW fused", {"fused": True}, False),
                ("compile", "torch.compile, AdamW fused", {"fused": True}, True)]
# distributed sides for BIG at n = 2: (PyTorch recipe, spmdc schema, row label)
BIG_DIST = [("ddp", "dp", "DDP / dp"), ("fsdp", "fsdp", "FSDP2 / fsdp"),
            ("tp", None, "DTensor TP / Megatron TP")]  # None: TP_SCHEMA
SINGLE = ["llama", "llama_train", "mlp_wide", BIG]
DIST = [(m, lay) for m in ("llama", "llama_train") for lay in ("tp", "fsdp")]
TP_SCHEMA = os.path.join(ROOT, "schemas", "examples", "llama_tp.json")
# compile row: model -> (its Megatron schema, reference_comm's tp plan)
COMPILE = {"llama_deep_train": ("llama_tp.json", "llama_train"), "mlp_train": ("mlp_tp.json", "mlp_train")}
ADAMW = {"lr": 1e-3, "weight_decay": 0.01}  # torch.optim.AdamW's defaults, given to spmdc too
GLOO_BYTES = (4 << 10, 32 << 10, 256 << 10)  # --gloo: spmd-run --calibrate's small sizes (llama's TP all-reduce: 32 KiB)
GLOO_REPEATS = 5  # as spmd-run --calibrate (Calibrate.cpp's Plan::repeats)


def steps_for(model, short, n):
    """Timed steps per process (n ranks): on one device about half a second
    to a second of each model's steps, so that the short llama steps are not
    a tenth of a second of the machine's noise."""
    if short:
        return 3
    if model == BIG:
        return 4  # 3 timed: 2-6 s a step on 2 cores
    if n == 1:
        return {"llama": 500, "llama_train": 100, "mlp_wide": 40}[model]
    return {"llama": 100, "llama_train": 30}[model]


# ------------------------------------------------------------------ models


def build(model, short):
    """(module, inputs, is_train) of a bench model, the same in every process."""
    import torch
    import reference_comm as rc

    if model == BIG:
        import export_models as em

        z = BIG_SIZE[short]
        torch.manual_seed(0)
        mod = em.LlamaLoss(vocab=256, d=z["d"], heads=z["heads"], ffn=z["ffn"], layers=z["layers"],
                           max_seq=z["seq"])
        torch.manual_seed(1)
        return mod, [em.tokens(z["batch"], z["seq"]), em.tokens(z["batch"], z["seq"])], True
    if model != "mlp_wide":
        mod, inputs = rc.make_case(model, batch=BATCH)
        return mod, inputs, model.endswith("_train")
    width = 256 if short else 1024
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    torch.manual_seed(1)
    return torch.nn.Sequential(*layers), [torch.randn(256, width)], False


def peak_reset():
    """Frees what the last case left and restarts this process's VmHWM."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def torch_steps(mod, batch, train, n, capture=False, adamw=None, compiled=None):
    """Runs n steps (train: forward, backward, AdamW, zero_grad); returns the
    step times (s) and, with capture, the last step's outputs as spmd-run
    names them (train: loss, grad.<fqn>, parameter.<fqn> after the update).
    adamw: extra torch.optim.AdamW options (foreach, fused; default: its
    per-parameter loop on CPU); compiled: a torch.compile backend for the
    forward and backward (the first step compiles)."""
    import torch

    params = mod
    if compiled:
        mod = torch.compile(mod, backend=compiled)

    times, out = [], {}
    if not train:
        with torch.inference_mode():
            for _ in range(n):
                t0 = time.perf_counter()
                y = mod(*batch)
                times.append(time.perf_counter() - t0)
        return times, {"output.0": y}
    # foreach cannot mix DTensors and plain tensors (TP leaves the embedding
    # and the norms plain): one parameter group each
    groups = {}
    for p in params.parameters():
        groups.setdefault(type(p).__name__ == "DTensor", []).append(p)
    opt = torch.optim.AdamW([{"params": g} for g in groups.values()], **ADAMW, **(adamw or {}))
    for i in range(n):
        t0 = time.perf_counter()
        loss = mod(*batch)
        loss.backward()
        if i == n - 1 and capture:
            out = {"loss": loss.detach().clone()}
            out.update({f"grad.{k}": p.grad.detach().clone() for k, p in params.named_parameters()})
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
    if capture:
        out.update({f"parameter.{k}": p.detach().clone() for k, p in params.named_parameters()})
    return times, out


def median_ms(times):
    return statistics.median(times[1:] if len(times) > 1 else times) * 1e3


# ------------------------------------------------------------------ workers (subprocesses)


def worker_eager(a):
    """One process: with --export, exports every model (spmdc_export, into
    the work folder); then runs each in turn: eager steps, peak memory,
    outputs."""
    import torch
    from safetensors.torch import load_file, save_file
    import spmdc_export

    torch.set_num_threads(a.threads)
    res = {"torch": torch.__version__, "export_s": {}}
    for model in a.models.split(",") if a.export else []:
        mod, inputs, train = build(model, a.short)
        d = os.path.join(a.work, model)
        t0 = time.perf_counter()
        (spmdc_export.export_train_step if train else spmdc_export.export)(mod, inputs, d)
        res["export_s"][model] = time.perf_counter() - t0
    for model in a.models.split(","):
        given = load_file(os.path.join(a.work, model, "inputs.safetensors"))
        batch = [given[f"input.{i}"] for i in range(len(given))]
        steps = a.steps or steps_for(model, a.short, 1)
        # BIG: every PyTorch side in turn, foreach first (its outputs are the
        # reference); the others keep only their loss
        sides = BIG_VARIANTS if model == BIG else [(None, None, None, False)]
        if a.variants and model == BIG:
            sides = [v for v in sides if v[0] in a.variants.split(",")]
        for name, _, adamw, compiled in sides:
            key = f"{model}:{name}" if name else model
            peak_reset()
            mod, _, train = build(model, a.short)
            backend = ("aot_eager" if a.short else "inductor") if compiled else None
            try:
                times, out = torch_steps(mod, batch, train, steps, capture=True, adamw=adamw, compiled=backend)
            except Exception as e:  # noqa: BLE001 - a side this build cannot run: the table says why
                if name in (None, "foreach"):
                    raise
                res[key] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120]}"}
                continue
            if name in (None, "foreach"):
                save_file({k: v.contiguous() for k, v in out.items()}, reference_path(a, model, steps))
            res[key] = {"ms": median_ms(times), "peak": peak_mib(), "backend": backend,
                        "loss": float(out["loss"]) if "loss" in out else None}
            del mod, out
            if compiled:
                torch._dynamo.reset()
    with open(a.out, "w") as f:
        json.dump(res, f)


def reference_path(a, model, steps):
    """Eager's outputs after `steps` steps (a train step's parameters and
    loss depend on the count; an inference model's outputs do not)."""
    return os.path.join(a.work, model, f"eager.{steps if model.endswith('_train') else 1}.safetensors")


def worker_dtensor(a):
    """A torchrun rank: each (model, layout) in turn under DTensor / FSDP2."""
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    import reference_comm as rc

    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    meshes = {"1d": init_device_mesh("cpu", (world,))}
    rec = rc.Recorder()
    res = {}
    for case in a.cases.split(","):
        model, layout = case.split(":")
        peak_reset()
        mod, inputs, train = build(model, a.short)
        # BIG is a LlamaLoss: llama_train's plans (FSDP2 per layer, the TP plan)
        plan = "llama_train" if model == BIG else model
        mod, _ = rc.apply_recipe(layout, plan, mod, meshes, rec, reshard_after_forward=not train)
        batch = rc.local_batch(layout, inputs, rank, world, None)
        adamw = {"foreach": True} if model == BIG else None
        times, _ = torch_steps(mod, batch, train, steps_for(model, a.short, world), adamw=adamw)
        dist.barrier()
        rec.reset()
        rec.hook_all_groups()
        rec.on = True
        torch_steps(mod, batch, train, 1, adamw=adamw)
        rec.on = False
        dist.barrier()
        got = {"ms": median_ms(times), "peak": peak_mib(),
               "bytes": sum(e["bytes_per_rank"] for e in rec.hook), "colls": len(rec.hook)}
        every = [None] * world
        dist.all_gather_object(every, got)
        res[case] = {k: max(r[k] for r in every) for k in got}
        del mod
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def worker_compile(a):
    """torch.export of the train step (the archive spmdc compiles), then
    make_fx of the DTensor-TP forward+backward on a fake 2-rank group."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import export_models as em
    import reference_comm as rc
    import spmdc_export

    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)

    def model():
        torch.manual_seed(0)
        if a.model == "llama_deep_train":
            return em.LlamaLoss(layers=32, d=32, heads=4, ffn=64), [em.tokens(2, 16), em.tokens(2, 16)]
        return rc.make_case(a.model)

    plan = COMPILE[a.model][1]
    t_export = t_torch = None  # exported and timed in the first round only
    if a.export:
        mod, inputs = model()
        t0 = time.perf_counter()
        spmdc_export.export_train_step(mod, inputs, a.work)
        t_export = time.perf_counter() - t0
        mod, inputs = model()
        t0 = time.perf_counter()  # the same step by torch.export's joint route (what the export took before)
        spmdc_export.export_train_step(mod, inputs, a.work + ".torch", fast=False)
        t_torch = time.perf_counter() - t0

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    mod, inputs = model()
    t0 = time.perf_counter()
    mod, _ = rc.apply_recipe("tp", plan, mod, {"1d": init_device_mesh("cpu", (2,))}, None)
    params, buffers = dict(mod.named_parameters()), dict(mod.named_buffers())

    def step(params, buffers, *batch):
        loss = functional_call(mod, {**params, **buffers}, tuple(batch))
        return loss, torch.autograd.grad(loss, list(params.values()))

    gm = make_fx(step)(params, buffers, *inputs)
    t_makefx = time.perf_counter() - t0
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "export_s": t_export, "export_torch_s": t_torch, "makefx_s": t_makefx,
                   "makefx_nodes": len(gm.graph.nodes)}, f)


def worker_allreduce(a):
    """A torchrun rank: all_reduce latency measured as spmd-run --calibrate
    measures it (lib/runtime/Calibrate.cpp: medianSeconds, itersFor)."""
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    n = dist.get_world_size()
    token = torch.zeros(1)
    res = {}
    for size in GLOO_BYTES:
        elems = max(size // 4 // n, 1) * n
        whole = torch.zeros(elems)
        iters = max(2, min(50, (32 << 20) // (elems * 4)))
        dist.all_reduce(whole)  # warm-up
        times = []
        for _ in range(GLOO_REPEATS):
            dist.all_reduce(token)  # the group starts each repetition together
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(whole)
            times.append((time.perf_counter() - t0) / iters)
        slowest = torch.tensor([statistics.median(times)], dtype=torch.double)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        res[str(elems * 4)] = slowest.item()
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


# ------------------------------------------------------------------ driver


def run(cmd, env=None, timeout=900):
    """Runs cmd; returns (stdout, peak RSS MiB of its process tree). Raises
    RuntimeError with the command and the tail of its stderr on failure.
    A child's peak starts at the RSS of the process that forked it (exec
    records the old address space's high-water mark), so the driver must
    stay small: it never imports torch."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if p.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{tail}")
    return stdout, usage.ru_maxrss / 1024


def env_threads(n):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(n)
    return env


def spmd_row(a, model, schema, n, threads):
    """Compiles and runs one spmd-run row; returns its figures."""
    work = os.path.join(a.work, model)
    prog = os.path.join(work, f"{os.path.basename(schema)}.{n}.spmd")
    report = prog + ".json"
    cmd = [a.spmdc, "compile", os.path.join(work, "model.pt2"), "--schema", schema, "--mesh", str(n),
           "-o", prog, "--report", report, "-q"]
    if model.endswith("_train"):
        cmd += ["--optimizer", "adamw", "--lr", str(ADAMW["lr"]), "--weight-decay", str(ADAMW["weight_decay"])]
    if prog not in a.compiled:  # once per run: later rounds only run it
        run(cmd)
        a.compiled.add(prog)
    with open(report) as f:
        colls = len(json.load(f).get("collectives", []))
    out = os.path.join(work, f"{os.path.basename(schema)}.{n}.out.safetensors")
    steps = steps_for(model, a.short, n)
    flag = ["--steps", str(steps)] if model.endswith("_train") else ["--repeat", str(steps)]
    text, peak = run([a.spmd_run, "-n", str(n), prog, "--inputs", os.path.join(work, "inputs.safetensors"),
                      "--output", out] + flag, env=env_threads(threads))
    line = [x for x in text.splitlines() if x.startswith("spmd-run:")][-1]
    ms = float(line.split(" step ")[1].split(" ms")[0])
    sent = int(line.split(" ms, ")[1].split(" B")[0].replace(",", ""))
    ref = reference_path(a, model, steps)
    got = {"ms": ms, "bytes": sent, "colls": colls, "peak": peak, "diff": max_diff(out, ref)}
    if model == BIG:  # compared by its loss (see the docstring); pdiff: every output
        got.update(pdiff=got["diff"], diff=max_diff(out, ref, ["loss"]))
    return got


def max_diff(got_path, ref_path, keys=None):
    import numpy as np
    from safetensors.numpy import load_file  # the driver stays free of torch (see run())

    got, ref = load_file(got_path), load_file(ref_path)
    keys = keys or list(ref)
    missing = [k for k in keys if k not in got]
    if missing:
        raise RuntimeError(f"{got_path}: no {missing[0]} (and {len(missing) - 1} more) among spmd-run's outputs")
    return max(float(np.abs(got[k].astype(np.float64) - ref[k].astype(np.float64)).max()) for k in keys)


def me(a, threads, *args, work=None):
    """The command line that runs this script as one of its workers."""
    return [sys.executable, os.path.abspath(__file__), "--work", work or a.work, "--threads", str(threads)] + list(
        args) + (["--short"] if a.short else [])


def single_rows(a, rows):
    out = os.path.join(a.work, "eager.json")
    # One worker exports every model (its timings are not used); then each
    # round times one model in a fresh eager worker and right after in spmd-run.
    run(me(a, a.threads, "--worker", "eager", "--models", ",".join(SINGLE), "--export", "--out", out),
        env=env_threads(a.threads))
    with open(out) as f:
        a.export_s = json.load(f)["export_s"]
    for model in SINGLE:
        sides = [(v[0], f"single, {v[1]}") for v in BIG_VARIANTS] if model == BIG else [(None, "single")]
        spmd, torch_side = [], {name: [] for name, _ in sides}
        for _ in range(a.rounds):
            run(me(a, a.threads, "--worker", "eager", "--models", model, "--out", out), env=env_threads(a.threads))
            with open(out) as f:
                eager = json.load(f)
            a.torch_version = eager["torch"]
            for name, _ in sides:
                torch_side[name].append(dict(eager[f"{model}:{name}" if name else model], bytes=0, colls=0))
            spmd.append(spmd_row(a, model, "dp", 1, a.threads))
        for name, label in sides:
            rows.append(row(model, label, 1, spmd, torch_side[name]))


def torchrun(a, n, threads, worker):
    """Runs a worker on n ranks under torchrun (from this Python). PyTorch's
    own Gloo ranks now and then abort at start-up (SIGABRT before the first
    case); such a run is retried once, and the retry is said on stderr."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}"] + worker[1:]
    try:
        run(cmd, env=env_threads(threads))
    except RuntimeError as e:
        progress(f"PyTorch's workers failed ({str(e).splitlines()[0][-60:]}); retrying once")
        run(cmd, env=env_threads(threads))


def dist_rows(a, rows):
    # A train model runs fewer steps per rank than on one device: eager's
    # outputs after that many steps, once (its timing is not used).
    for model, ns in [(m, (2, 4)) for m in sorted({m for m, _ in DIST if m.endswith("_train")})] + [(BIG, (2,))]:
        for steps in sorted({steps_for(model, a.short, n) for n in ns}):
            if not os.path.exists(reference_path(a, model, steps)):
                run(me(a, a.threads, "--worker", "eager", "--models", model, "--steps", str(steps), "--variants",
                       "foreach", "--out", os.path.join(a.work, "eager-ref.json")), env=env_threads(a.threads))
    for n in (2, 4):
        threads = max(1, a.threads // n)
        out = os.path.join(a.work, f"dtensor{n}.json")
        # (model, PyTorch recipe, spmdc schema, row label); BIG at n = 2 only
        every = [(m, lay, TP_SCHEMA if lay == "tp" else "fsdp", "Megatron TP" if lay == "tp" else "fsdp")
                 for m, lay in DIST]
        if n == 2:
            every += [(BIG, lay, schema or TP_SCHEMA, label) for lay, schema, label in BIG_DIST]
        cases = ",".join(f"{m}:{lay}" for m, lay, _, _ in every)
        spmd, torch_side = {c[:2]: [] for c in every}, {c[:2]: [] for c in every}
        for _ in range(a.rounds):
            torchrun(a, n, threads, me(a, threads, "--worker", "dtensor", "--cases", cases, "--out", out))
            with open(out) as f:
                got = json.load(f)
            for model, layout, schema, _ in every:
                torch_side[(model, layout)].append(got[f"{model}:{layout}"])
                spmd[(model, layout)].append(spmd_row(a, model, schema, n, threads))
        for model, layout, _, label in every:
            rows.append(row(model, label, n, spmd[(model, layout)], torch_side[(model, layout)]))


def row(model, layout, n, ss, ts):
    """One table row from each side's figures per round: medians of the step
    times, the extremes of the rounds' ratios, the largest peak and diff;
    bytes and collectives come from the last round (they do not vary). A
    PyTorch side that failed (BIG's fused AdamW or torch.compile) gives a
    row with its error and no ratio."""
    errors = [t["error"] for t in ts if "error" in t]
    if errors:
        return {"model": model, "layout": layout, "n": n, "spmd_ms": statistics.median(s["ms"] for s in ss),
                "torch_error": errors[0], "rounds": len(ss), "diff": max(x["diff"] for x in ss),
                "pdiff": max(x.get("pdiff", x["diff"]) for x in ss), "spmd_peak": max(x["peak"] for x in ss)}
    s_ms, t_ms = statistics.median(s["ms"] for s in ss), statistics.median(t["ms"] for t in ts)
    per_round = [s["ms"] / t["ms"] for s, t in zip(ss, ts)]
    s, t = ss[-1], ts[-1]
    return {"model": model, "layout": layout, "n": n, "spmd_ms": s_ms, "torch_ms": t_ms,
            "ratio": s_ms / t_ms, "ratio_lo": min(per_round), "ratio_hi": max(per_round), "rounds": len(ss),
            "spmd_bytes": s["bytes"], "torch_bytes": t["bytes"], "spmd_colls": s["colls"],
            "torch_colls": t["colls"], "spmd_peak": max(x["peak"] for x in ss),
            "torch_peak": max(x["peak"] for x in ts), "diff": max(x["diff"] for x in ss),
            "pdiff": max(x.get("pdiff", x["diff"]) for x in ss),
            "torch_loss": ts[-1].get("loss"), "backend": ts[-1].get("backend")}


def compile_row(a):
    model = "mlp_train" if a.short else "llama_deep_train"
    schema = os.path.join(ROOT, "schemas", "examples", COMPILE[model][0])
    work = os.path.join(a.work, "compile")
    out = os.path.join(a.work, "compile.json")
    makefx, spmdc, spmdc_opt, r = [], [], [], {}
    for i in range(a.rounds):
        first = ["--export"] if i == 0 else []
        run(me(a, a.threads, "--worker", "compile", "--model", model, "--out", out, *first, work=work))
        with open(out) as f:
            got = json.load(f)
        r.setdefault("export_s", got["export_s"])  # the first round exports
        r.setdefault("export_torch_s", got["export_torch_s"])
        a.__dict__.setdefault("torch_version", got["torch"])  # when the single-device phase did not run
        r["makefx_nodes"] = got["makefx_nodes"]
        makefx.append(got["makefx_s"])
        spmdc.append(compile_seconds(a, os.path.join(work, "model.pt2"), schema))
        spmdc_opt.append(compile_seconds(a, os.path.join(work, "model.pt2"), schema, adamw=True))
    per_round = [m / s for m, s in zip(makefx, spmdc)]
    r.update(model=model, spmdc_s=statistics.median(spmdc), makefx_s=statistics.median(makefx),
             ratio_lo=min(per_round), ratio_hi=max(per_round), spmdc_adamw_s=statistics.median(spmdc_opt))
    return r


def compile_seconds(a, archive, schema, adamw=False):
    """Median wall time of 3 `spmdc compile` processes (TP, mesh 2)."""
    times = []
    for _ in range(3):
        cmd = [a.spmdc, "compile", archive, "--schema", schema, "--mesh", "2", "-o", archive + ".tp.spmd", "-q"]
        if adamw:
            cmd += ["--optimizer", "adamw", "--lr", str(ADAMW["lr"]), "--weight-decay", str(ADAMW["weight_decay"])]
        t0 = time.perf_counter()
        run(cmd)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def route_rows(a, comp):
    """The spmdc route end to end: export (timed once, in process) plus
    `spmdc compile --optimizer adamw` (TP, mesh 2), for the compile row's
    model and for BIG (its archive from the single-device phase)."""
    big = os.path.join(a.work, BIG, "model.pt2")
    rows = [{"model": comp["model"], "export_s": comp["export_s"], "export_torch_s": comp["export_torch_s"],
             "compile_s": comp["spmdc_adamw_s"], "makefx_s": comp["makefx_s"]}]
    if a.only != "compile":
        rows.append({"model": BIG, "export_s": a.export_s[BIG], "export_torch_s": None,
                     "compile_s": compile_seconds(a, big, TP_SCHEMA, adamw=True), "makefx_s": None})
    return rows


def print_table(rows, comp, route):
    head = ["model", "layout", "n", "spmd-run ms", "PyTorch ms", "ratio", "rounds", "bytes spmd", "bytes torch",
            "colls spmd/torch", "peak MiB spmd", "peak MiB torch", "max|diff|"]
    body = []
    for r in rows:
        diff = f"loss {r['diff']:.1e}" if r["model"] == BIG else f"{r['diff']:.1e}"
        if "torch_error" in r:
            body.append([r["model"], r["layout"], str(r["n"]), f"{r['spmd_ms']:.2f}",
                         f"could not run: {r['torch_error']}", "", "", "", "", "", f"{r['spmd_peak']:.0f}", "", diff])
            continue
        body.append([r["model"], r["layout"], str(r["n"]), f"{r['spmd_ms']:.2f}", f"{r['torch_ms']:.2f}",
                     f"{r['ratio']:.2f}x", f"{r['ratio_lo']:.2f}-{r['ratio_hi']:.2f}x", f"{r['spmd_bytes']:,}",
                     f"{r['torch_bytes']:,}", f"{r['spmd_colls']}/{r['torch_colls']}", f"{r['spmd_peak']:.0f}",
                     f"{r['torch_peak']:.0f}", diff])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in body:
        print("| " + " | ".join(b) + " |")
    print()
    big = [r for r in rows if r["model"] == BIG]
    ref = next((r["torch_loss"] for r in big if r["layout"].endswith("foreach") and r.get("torch_loss") is not None),
               None)
    if ref is not None:
        others = ", ".join(f"{r['layout'].split(', ', 1)[-1]} {abs(r['torch_loss'] - ref):.1e}" for r in big
                           if r["n"] == 1 and r.get("torch_loss") is not None and not r["layout"].endswith("foreach"))
        backend = next((r["backend"] for r in big if r.get("backend")), "none")
        print(f"{BIG}: loss after the last step: eager foreach {ref:.6f}; the other PyTorch sides against it: "
              f"{others}; spmd-run's largest |diff| over every gradient and parameter: "
              f"{max(r['pdiff'] for r in big):.1e}; torch.compile backend: {backend}\n")
    print("| compile | spmdc compile s | make_fx s | torch.export s | make_fx / spmdc | rounds | "
          "torch.export / spmdc |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {comp['model']} (TP, mesh 2; make_fx: {comp['makefx_nodes']:,} nodes) | {comp['spmdc_s']:.3f} | "
          f"{comp['makefx_s']:.2f} | {comp['export_s']:.2f} | {comp['makefx_s'] / comp['spmdc_s']:.0f}x | "
          f"{comp['ratio_lo']:.0f}-{comp['ratio_hi']:.0f}x | {comp['export_s'] / comp['spmdc_s']:.0f}x |")
    print()
    print("| route (TP, mesh 2, AdamW) | export s | spmdc compile s | export + compile s | make_fx s | "
          "export by torch.export's joint s | export / torch.export's |")
    print("|---|---|---|---|---|---|---|")
    for r in route:
        mfx = f"{r['makefx_s']:.2f}" if r["makefx_s"] is not None else "not measured"
        tor = r.get("export_torch_s")
        old = f"{tor:.2f} | {r['export_s'] / tor:.2f}x" if tor else "not measured | "
        print(f"| {r['model']} | {r['export_s']:.2f} | {r['compile_s']:.3f} | {r['export_s'] + r['compile_s']:.2f} | "
              f"{mfx} | {old} |")


def gloo_compare(a):
    """--gloo N: all_reduce latency on 2 ranks, spmd-run against torch.distributed,
    alternated N times; returns the exit status."""
    spmd, torch_side = {b: [] for b in GLOO_BYTES}, {b: [] for b in GLOO_BYTES}
    with tempfile.TemporaryDirectory(prefix="spmdc-gloo-") as work:
        out, prof = os.path.join(work, "torch.json"), os.path.join(work, "profile.json")
        worker = me(a, 1, "--worker", "allreduce", "--out", out, work=work)
        for i in range(a.gloo):
            torchrun(a, 2, 1, worker)
            with open(out) as f:
                for b, t in json.load(f).items():
                    torch_side[int(b)].append(t)
            text, _ = run([a.spmd_run, "--calibrate", "-n", "2", "-o", prof], env=env_threads(1))
            for line in text.splitlines():  # "      32,768     355.4 us     298.2 us"
                cols = line.split()
                if len(cols) == 5 and cols[0].replace(",", "").isdigit() and int(cols[0].replace(",", "")) in spmd:
                    spmd[int(cols[0].replace(",", ""))].append(float(cols[1]) * 1e-6)
            progress(f"gloo {i + 1}/{a.gloo}: load average {load_line()}")
    print(f"all_reduce on 2 Gloo ranks, 1 thread each, {a.gloo} alternations; medians (load average {load_line()})\n")
    print("| bytes | spmd-run us | torch.distributed us | spmd-run / torch |")
    print("|---|---|---|---|")
    for b in GLOO_BYTES:
        if not spmd[b] or not torch_side[b]:
            print(f"error: no {b}-byte figure from {'spmd-run --calibrate' if not spmd[b] else 'torch'}",
                  file=sys.stderr)
            return 1
        ms, mt = statistics.median(spmd[b]), statistics.median(torch_side[b])
        print(f"| {b:,} | {ms * 1e6:.1f} | {mt * 1e6:.1f} | {ms / mt:.2f}x |")
    return 0


def baselines(a):
    """Peak MiB of spmd-run and of Python importing torch doing nothing:
    the floor under every peak column."""
    return (run([a.spmd_run, "--version"])[1],
            run([sys.executable, "-c", "import torch; torch.ones(1)"])[1])


def progress(msg):
    print(f"[bench_side_by_side] {msg}", file=sys.stderr, flush=True)


def load_line():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder (default build/)")
    ap.add_argument("--spmdc", help="spmdc binary (default BUILD/tools/spmdc/spmdc)")
    ap.add_argument("--spmd-run", dest="spmd_run", help="spmd-run binary (default BUILD/tools/spmd-run/spmd-run)")
    ap.add_argument("--short", action="store_true", help="3 steps, small models (CI)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads (default: all cores)")
    ap.add_argument("--rounds", type=int, help="measurements per row, the sides alternated (default 3; --short: 1)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--only", choices=["compile"],
                    help="compile: only the compile and route rows of the compile row's model")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (archives, programs, outputs) and keep it")
    ap.add_argument("--gloo", type=int, metavar="N",
                    help="instead of the table: Gloo all_reduce latency, spmd-run against torch.distributed, N times")
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=["eager", "dtensor", "compile", "allreduce"], help=argparse.SUPPRESS)
    ap.add_argument("--models", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--export", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--variants", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        workers = {"eager": worker_eager, "dtensor": worker_dtensor, "compile": worker_compile,
                   "allreduce": worker_allreduce}
        return workers[a.worker](a) or 0
    if a.rounds is None:
        a.rounds = 1 if a.short else 3
    if a.rounds < 1:
        print(f"error: --rounds {a.rounds}: give at least 1", file=sys.stderr)
        return 2
    a.compiled = set()  # programs compiled in this run (spmd_row)
    a.spmdc = os.path.abspath(a.spmdc or os.path.join(a.build, "tools", "spmdc", "spmdc"))
    a.spmd_run = os.path.abspath(a.spmd_run or os.path.join(a.build, "tools", "spmd-run", "spmd-run"))
    for b in (a.spmdc, a.spmd_run):
        if not os.access(b, os.X_OK):
            print(f"error: {b}: not built; build spmdc and spmd-run, or pass --build DIR", file=sys.stderr)
            return 2
    if a.gloo:
        try:
            return gloo_compare(a)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1

    t0, load0 = time.time(), load_line()
    rows, comp, route = [], {}, []
    phases = [("export and single device", lambda: single_rows(a, rows)),
              ("distributed", lambda: dist_rows(a, rows)), ("compile", lambda: comp.update(compile_row(a))),
              ("route", lambda: route.extend(route_rows(a, comp)))]
    if a.only == "compile":
        phases = phases[2:]
    try:
        with tempfile.TemporaryDirectory(prefix="spmdc-side-") as work:
            a.work = os.path.abspath(a.keep) if a.keep else work
            for what, phase in phases:
                t = time.time()
                phase()
                progress(f"{what}: {time.time() - t:.0f} s")
            base = baselines(a)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    mode = "--short" if a.short else "full"
    print(f"bench_side_by_side ({mode}): torch {a.torch_version}, {os.cpu_count()} cores, {a.threads} threads "
          f"on one device, cores / n per rank; batch {BATCH}; {a.rounds} rounds; load average {load0} before, {load_line()} after; "
          f"{time.time() - t0:.0f} s; idle peak MiB: spmd-run {base[0]:.0f}, python + torch {base[1]:.0f}\n")
    print_table(rows, comp, route)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "compile": comp, "route": route, "short": a.short, "torch": a.torch_version},
                      f, indent=1)
    expected = len(SINGLE) - 1 + len(BIG_VARIANTS) + 2 * len(DIST) + len(BIG_DIST)
    if a.only == "compile":
        expected = 0
    if len(rows) != expected:
        print(f"error: {len(rows)} rows, expected {expected}", file=sys.stderr)
        return 1
    for r in rows:
        if "torch_error" in r:
            print(f"note: {r['model']} {r['layout']}: PyTorch's side could not run here: {r['torch_error']}",
                  file=sys.stderr)
    tol = {BIG: BIG_TOLERANCE}
    bad = [r for r in rows if not r["diff"] <= tol.get(r["model"], TOLERANCE)]
    for r in bad:
        print(f"error: {r['model']} {r['layout']} n={r['n']}: spmd-run differs from eager by {r['diff']:.2e} "
              f"(tolerance {tol.get(r['model'], TOLERANCE)})", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
