#!/usr/bin/env python3
"""Communication volume of one training step: PyTorch's own recipes vs spmdc.

Usage:
    reference_comm.py SPMDC [--json OUT] [--only RECIPE|MODEL,...] [--allow-mismatch]
                      [--warmup N]

For each model (mlp_train, llama_train: the exact modules and inputs that
testdata/pt2/<model>/model.pt2 was exported from, built by
testdata/export_models.py), each recipe and each optimizer (SGD with
momentum 0.9, AdamW), the script

1. trains the model with the recipe in eager PyTorch on CPU with gloo, in
   processes started by torch.multiprocessing.spawn (FileStore; one spawn per
   world size, every recipe of that world size run in turn in it), and counts
   every collective that rank 0 issues during one steady-state step (forward,
   loss.backward(), optimizer.step(), zero_grad());
2. compiles the same joint graph with
   `SPMDC compile testdata/pt2/<model>/model.pt2 --schema S --mesh M
    --optimizer sgd|adamw [--momentum 0.9] --report R -q`
   and sums `collectives[*].bytes_per_rank` per kind from the report;
3. prints, per model x recipe x optimizer x kind, "count/bytes" on both sides
   and OK/MISMATCH on the bytes (counts differ legitimately: bucketing,
   per-module wrapping). Exit status 1 on any bytes mismatch, on an spmdc
   failure ("unsupported": e.g. a preset it does not know yet) or on a failed
   numerics check; --allow-mismatch only reports. --json OUT writes every
   figure, including each collective PyTorch issued.

Recipes (the global batch is the full export input; data-parallel recipes
split it over ranks on dim 0):

  ddp   DistributedDataParallel, world 2, default buckets (25 MiB, first 1 MiB;
        both models fit one bucket), broadcast_buffers=False (llama's rope
        cos/sin buffers are constants; the default would re-broadcast them
        every forward, which is not gradient traffic). A comm hook records
        each bucket and then runs the default all-reduce hook.
        spmdc: `--schema ddp --mesh 2` when the compiler accepts the alias,
        else `--schema dp --mesh 2`.
  fsdp  FSDP2 fully_shard, world 2, FSDP2's default reshard_after_forward
        (None: True but for the root): parameters are all-gathered in the
        forward, freed after it and all-gathered again for the backward,
        except the root's (its backward starts at once); gradients
        reduce-scattered once. Wrapping: llama: every LlamaLayer, then the
        root (torchtitan style; 3 + 2 all-gathers and 3 reduce-scatters);
        mlp: the root only (1 + 1).
        Bytes do not depend on the wrapping (all dims divide the mesh).
        spmdc: `--schema fsdp --mesh 2`.
  hsdp  FSDP2 on a 2x2 DeviceMesh (dim 0 replicate, dim 1 shard), world 4,
        same wrapping and default reshard_after_forward: all-gather and
        reduce-scatter over the shard pair, all-reduce of the reduced shards
        over the replicate pair. mlp's batch of 32 splits over all 4 ranks;
        llama's batch of 2 cannot, so both ranks of a shard group get the
        same sample (the 4-rank average is still the global mean; bytes do
        not depend on the batch). spmdc: `--schema hsdp --mesh 2x2`.
  tp    Megatron tensor parallelism with DTensor parallelize_module over a
        1-D mesh of 2, full (replicated) inputs on every rank. mlp: fc1
        ColwiseParallel, fc2 RowwiseParallel. llama (torchtitan style): per
        layer wq, wk, wv, w1, w3 ColwiseParallel, wo, w2 RowwiseParallel, and
        attn_norm / ffn_norm wrapped in PrepareModuleOutput(Replicate ->
        Replicate, use_local_output=False) so that the normed activation is a
        Replicate DTensor shared by the column-parallel linears: their
        Partial input gradients add up as DTensors and are all-reduced once
        per attention and once per FFN (Megatron's "f" operator) instead of
        once per linear. Embedding, final norm and the output projection stay
        plain replicated modules. spmdc: schemas/examples/<model>_tp.json
        --mesh 2.

Measured step: steps 1 and 2 run unmeasured and step 3 is measured. Step 2
is not steady state for DDP: its forward rebuilds the buckets and broadcasts
the new bucket layout (two small broadcasts); from step 3 on every step is
identical (checked with --warmup 1 and 3: step 2 adds the two broadcasts,
step 4 issues exactly the collectives of step 3, for every case).

Bytes per rank follow spmdc's ring convention (integer division as in C++),
n = the collective's group size, summed per kind:
    all_gather      (n-1)*output_bytes/n
    reduce_scatter  (n-1)*input_bytes/n
    all_reduce      2*(n-1)*bytes/n
    all_to_all      (n-1)*input_bytes/n
    anything else   (n-1)*bytes/n of its input (broadcast, ...; spmdc has
                    none, so any such kind shows as a mismatch)

Capture. Three independent taps record the measured step:
  * ProcessGroup pre-hooks (ProcessGroup.register_pre_hook, torch >= 2.14),
    registered on every process group (world and every DeviceMesh group).
    They fire from c10d's dispatcher kernels (Ops.cpp), which every
    collective goes through: dist.* calls (FSDP2), functional collectives
    (DTensor: _c10d_functional.* resolve the group and call its methods) and
    DDP's C++ reducer (process_group->allreduce). This is the tap reported.
  * A TorchDispatchMode over the c10d.*, _c10d_functional.* and
    _c10d_functional_autograd.* ops (CommDebugMode's view; it also sees
    DDP's reducer since its all-reduce is a c10d::allreduce_ call on the
    training thread).
  * For DDP, the comm hook's bucket sizes.
Every case checks that the first two taps agree exactly (per-kind count and
bytes) and that the DDP buckets add up to the all-reduced bytes; a
disagreement fails the run. Two taps that sit at different layers (Python
dispatcher vs. the C++ kernels behind it) and a third in DDP itself seeing
the same collectives is how we know none is missed.

Numerics. Every case also trains an unsharded single-process copy (same
seed, full batch, same optimizer) and checks the distributed run against it:
the step-1 loss (averaged over ranks for data-parallel recipes) and the full
gradient of every parameter (DTensor shards gathered with full_tensor()),
and every parameter after the measured step. Collectives used by these checks
run outside the measured step.
"""
import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "testdata"))

MODELS = ["mlp_train", "llama_train"]
RECIPES = ["ddp", "fsdp", "hsdp", "tp"]
OPTIMIZERS = ["sgd", "adamw"]
WORLD = {"ddp": 2, "fsdp": 2, "tp": 2, "hsdp": 4}
WARMUP_STEPS = 2  # default: step 3 is measured (see the docstring)
HOOK_ID = 0x5EED  # id of our ProcessGroup pre-hooks
KIND_ORDER = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]


# ------------------------------------------------------------ byte convention


def ring_bytes(kind, nbytes, n):
    if n <= 1:
        return 0
    if kind == "all_reduce":
        return 2 * (n - 1) * nbytes // n
    return (n - 1) * nbytes // n


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def flatten(x):
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in flatten(y)]
    return []


class Recorder:
    """Collects the collectives of the measured step from the three taps."""

    def __init__(self):
        self.on = False
        self.hook = []  # ProcessGroup pre-hooks
        self.mode = []  # TorchDispatchMode
        self.buckets = []  # DDP comm hook: bucket bytes
        self.hooked = set()

    def reset(self):
        self.hook, self.mode, self.buckets = [], [], []

    # ---- tap 1: ProcessGroup pre-hooks
    HOOK_KIND = {
        "ALLREDUCE": "all_reduce",
        "ALLGATHER": "all_gather",
        "REDUCE_SCATTER": "reduce_scatter",
        "ALLTOALL": "all_to_all",
        "BROADCAST": "broadcast",
        "REDUCE": "reduce",
        "SCATTER": "scatter",
        "GATHER": "gather",
        "SEND": "send",
        "RECV": "recv",
        "BARRIER": "barrier",
    }

    def hook_all_groups(self):
        from torch.distributed.distributed_c10d import _world

        for pg in list(_world.pg_map.keys()):
            if id(pg) in self.hooked:
                continue
            self.hooked.add(id(pg))
            pg.register_pre_hook(HOOK_ID, self._make_hook(pg.size()))

    def _make_hook(self, n):
        def hook(a):
            if not self.on:
                return
            name = str(a.name).split(".")[-1]
            kind = self.HOOK_KIND.get(name, name.lower())
            ts = a.output_tensors if kind == "all_gather" else a.input_tensors
            nb = tensor_bytes(ts)
            self.hook.append(
                {
                    "kind": kind,
                    "group_size": n,
                    "bytes": nb,
                    "bytes_per_rank": ring_bytes(kind, nb, n),
                    "shapes": [list(t.shape) for t in ts],
                    "dtype": str(ts[0].dtype) if ts else "",
                }
            )

        return hook

    # ---- tap 2: TorchDispatchMode over the c10d op namespaces
    # op name -> (kind, argument holding the counted tensors)
    C10D = {
        "allreduce_": ("all_reduce", "tensors"),
        "allreduce_coalesced_": ("all_reduce", "tensors"),
        "allgather_": ("all_gather", "output_tensors"),
        "_allgather_base_": ("all_gather", "output_tensor"),
        "allgather_coalesced_": ("all_gather", "output_lists"),
        "allgather_into_tensor_coalesced_": ("all_gather", "outputs"),
        "reduce_scatter_": ("reduce_scatter", "input_tensors"),
        "_reduce_scatter_base_": ("reduce_scatter", "input_tensor"),
        "reduce_scatter_tensor_coalesced_": ("reduce_scatter", "inputs"),
        "alltoall_": ("all_to_all", "input_tensors"),
        "alltoall_base_": ("all_to_all", "input"),
        "broadcast_": ("broadcast", "tensors"),
        "reduce_": ("reduce", "tensors"),
        "gather_": ("gather", "input_tensors"),
        "gather_into_tensor_": ("gather", "input_tensor"),
        "scatter_": ("scatter", "input_tensors"),
        "send": ("send", "tensors"),
        "recv_": ("recv", "tensors"),
        "recv_any_source_": ("recv", "tensors"),
        "barrier": ("barrier", None),
        "monitored_barrier_": ("barrier", None),
    }
    FUNCOL = {
        "all_reduce": ("all_reduce", "input", 1),
        "all_reduce_": ("all_reduce", "input", 1),
        "all_reduce_coalesced": ("all_reduce", "inputs", 1),
        "all_reduce_coalesced_": ("all_reduce", "inputs", 1),
        "all_gather_into_tensor": ("all_gather", "input", "n"),
        "all_gather_into_tensor_out": ("all_gather", "input", "n"),
        "all_gather_into_tensor_coalesced": ("all_gather", "inputs", "n"),
        "reduce_scatter_tensor": ("reduce_scatter", "input", 1),
        "reduce_scatter_tensor_out": ("reduce_scatter", "input", 1),
        "reduce_scatter_tensor_coalesced": ("reduce_scatter", "inputs", 1),
        "all_to_all_single": ("all_to_all", "input", 1),
        "broadcast": ("broadcast", "input", 1),
        "broadcast_": ("broadcast", "input", 1),
        "isend": ("send", "tensor", 1),
        "irecv": ("recv", "tensor", 1),
        "batch_p2p_ops": ("p2p", "tensors", 1),
    }
    NOT_COMM = {"wait_tensor", "_wrap_tensor_autograd", "check_for_nan"}

    def mode_event(self, func, args, kwargs):
        import torch
        import torch.distributed.distributed_c10d as c10d

        ns, op = func._schema.name.split("::")
        if ns not in ("c10d", "_c10d_functional", "_c10d_functional_autograd"):
            return
        if op in self.NOT_COMM:
            return
        named = {a.name: v for a, v in zip(func._schema.arguments, args)}
        named.update(kwargs or {})
        if ns == "c10d":
            kind, arg = self.C10D.get(op, (op, None))
            pg = named.get("process_group")
            if not hasattr(pg, "size"):  # a boxed torch.classes.c10d.ProcessGroup
                pg = torch.distributed.ProcessGroup.unbox(pg)
            n = pg.size()
            nb = tensor_bytes(flatten(named.get(arg))) if arg else 0
        else:
            kind, arg, mult = self.FUNCOL.get(op, (op, None, 1))
            g = named.get("group_name")
            pg = g if not isinstance(g, str) else c10d._resolve_process_group(g)
            n = pg.size()
            nb = tensor_bytes(flatten(named.get(arg))) if arg else 0
            if mult == "n":
                nb *= named["group_size"]
        self.mode.append(
            {"kind": kind, "op": f"{ns}.{op}", "group_size": n, "bytes": nb,
             "bytes_per_rank": ring_bytes(kind, nb, n)}
        )

    def dispatch_mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        rec = self

        class CommMode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                rec.mode_event(func, args, kwargs)
                return func(*args, **(kwargs or {}))

        return CommMode()


def summarize(events):
    out = {}
    for e in events:
        s = out.setdefault(e["kind"], {"count": 0, "bytes": 0})
        s["count"] += 1
        s["bytes"] += e["bytes_per_rank"]
    return out


# ------------------------------------------------------------ models & recipes


def make_case(model_name, batch=None):
    """The module (testdata/export_models.py's class) and global inputs of
    <model_name>, from fixed seeds: the same weights in every process (not
    those of the committed archive, which used other seeds). `batch` replaces
    llama's batch of 2 (scripts/bench_side_by_side.py splits it over 4 ranks);
    "llama" is the forward-only model, inputs [tokens]."""
    import torch
    import export_models as em

    torch.manual_seed(0)
    if model_name == "mlp_train":
        mod = em.MLPLoss()
        torch.manual_seed(1)
        inputs = [torch.randn(32, 64), torch.randn(32, 64)]
    elif model_name in ("llama", "llama_train"):
        mod = em.LlamaLoss() if model_name == "llama_train" else em.Llama()
        torch.manual_seed(1)
        b = batch or 2
        inputs = [em.tokens(b, 16), em.tokens(b, 16)][:2 if model_name == "llama_train" else 1]
    else:
        raise ValueError(model_name)
    return mod, inputs


def make_optimizer(name, params):
    import torch

    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3)


def local_batch(recipe, inputs, rank, world, mesh2d):
    if recipe == "tp":
        return inputs
    B = inputs[0].shape[0]
    if recipe == "hsdp" and B % world != 0:
        # split over the replicate dim only: both ranks of a shard group get
        # the same slice (see the docstring)
        n, i = mesh2d.size(0), mesh2d.get_local_rank(0)
    else:
        n, i = world, rank
    assert B % n == 0, (recipe, B, n)
    b = B // n
    return [x[i * b:(i + 1) * b] for x in inputs]


def llama_layers(mod):
    """The LlamaLayers of a Llama or a LlamaLoss."""
    return mod.model.layers if hasattr(mod, "model") else mod.layers


def apply_recipe(recipe, model_name, mod, meshes, rec, reshard_after_forward=None):
    """Wraps `mod` with the recipe (see the docstring); returns (module, how).
    `rec` records DDP's buckets (ddp only). reshard_after_forward: None is
    FSDP2's default (True but for the root), as spmdc's fsdp."""
    from torch.distributed.fsdp import fully_shard

    if recipe == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        ddp = DDP(mod, broadcast_buffers=False)

        def recording_hook(state, bucket):
            if rec.on:
                rec.buckets.append(tensor_bytes([bucket.buffer()]))
            return allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, recording_hook)
        return ddp, "broadcast_buffers=False, default buckets"
    if recipe in ("fsdp", "hsdp"):
        mesh = meshes["1d"] if recipe == "fsdp" else meshes["2d"]
        if model_name in ("llama", "llama_train"):
            for layer in llama_layers(mod):
                fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
            wrap = "per LlamaLayer + root"
        else:
            wrap = "root"
        fully_shard(mod, mesh=mesh, reshard_after_forward=reshard_after_forward)
        return mod, f"reshard_after_forward={reshard_after_forward}, wrap: {wrap}"
    if recipe == "tp":
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import (
            ColwiseParallel, PrepareModuleOutput, RowwiseParallel, parallelize_module)

        mesh = meshes["1d"]
        if model_name == "mlp_train":
            parallelize_module(mod.mlp, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
            return mod, "fc1 colwise, fc2 rowwise"

        def shared_norm():
            return PrepareModuleOutput(output_layouts=Replicate(),
                                       desired_output_layouts=Replicate(),
                                       use_local_output=False)

        for layer in llama_layers(mod):
            parallelize_module(layer, mesh, {
                "attn_norm": shared_norm(),
                "wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(),
                "wo": RowwiseParallel(),
                "ffn_norm": shared_norm(),
                "w1": ColwiseParallel(), "w3": ColwiseParallel(),
                "w2": RowwiseParallel(),
            })
        return mod, "wq/wk/wv/w1/w3 colwise, wo/w2 rowwise, norms -> Replicate DTensor"
    raise ValueError(recipe)


def full(t):
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def strip(name):
    return name[len("module."):] if name.startswith("module.") else name


def run_case(model_name, recipe, opt_name, rank, world, meshes, rec, warmup):
    import torch
    import torch.distributed as dist

    # single-process reference: full batch, same seed, same optimizer
    ref, inputs = make_case(model_name)
    ref_opt = make_optimizer(opt_name, ref.parameters())
    ref_loss = ref_grads = None
    for step in range(warmup + 1):
        loss = ref(*inputs)
        loss.backward()
        if step == 0:
            ref_loss = loss.detach().clone()
            ref_grads = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
        ref_opt.step()
        ref_opt.zero_grad()

    mod, _ = make_case(model_name)
    mod, how = apply_recipe(recipe, model_name, mod, meshes, rec)
    opt = make_optimizer(opt_name, mod.parameters())
    batch = local_batch(recipe, inputs, rank, world, meshes.get("2d"))
    rec.hook_all_groups()

    def step():
        loss = mod(*batch)
        loss.backward()
        return loss

    worst = {"loss": 0.0, "grad": 0.0, "param": 0.0}
    losses = {}
    for s in range(warmup):
        loss = step()
        if s == 0:
            loss = full(loss.detach())
            if recipe != "tp":
                loss = loss.clone()
                dist.all_reduce(loss)
                loss /= world
            worst["loss"] = (loss - ref_loss).abs().item()
            losses = {"reference": ref_loss.item(), "distributed": loss.item()}
            for n, p in mod.named_parameters():
                g = full(p.grad)
                worst["grad"] = max(worst["grad"], (g - ref_grads[strip(n)]).abs().max().item())
        opt.step()
        opt.zero_grad()

    dist.barrier()
    rec.reset()
    rec.hook_all_groups()
    rec.on = True
    with rec.dispatch_mode():
        step()
        opt.step()
        opt.zero_grad()
    rec.on = False
    hook, mode, buckets = rec.hook, rec.mode, rec.buckets
    dist.barrier()

    ref_params = dict(ref.named_parameters())
    for n, p in mod.named_parameters():
        worst["param"] = max(worst["param"],
                             (full(p.detach()) - ref_params[strip(n)].detach()).abs().max().item())
    tol = {"loss": 1e-5, "grad": 1e-5, "param": 1e-5}
    numerics_ok = all(worst[k] <= tol[k] for k in tol)

    hs, ms = summarize(hook), summarize(mode)
    problems = []
    if hs != ms:
        problems.append(f"pre-hooks {hs} != dispatch mode {ms}")
    if recipe == "ddp":
        ar = sum(e["bytes"] for e in hook if e["kind"] == "all_reduce")
        if sum(buckets) != ar or len(buckets) != hs.get("all_reduce", {}).get("count", 0):
            problems.append(f"DDP buckets {buckets} != all-reduced bytes {ar}")
    return {
        "model": model_name, "recipe": recipe, "optimizer": opt_name, "world": world,
        "setup": how,
        "pytorch": hs,
        "events": hook,
        "dispatch_mode": ms,
        "ddp_buckets": buckets,
        "capture_ok": not problems,
        "capture_problems": problems,
        "numerics": {"max_abs_diff": worst, "tol": tol, "ok": numerics_ok, "step1_loss": losses},
    }


def worker(rank, world, store_path, cases, out_path, warmup):
    os.environ["OMP_NUM_THREADS"] = "1"
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    meshes = {"1d": init_device_mesh("cpu", (world,))}
    if world == 4:
        meshes["2d"] = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    rec = Recorder()
    results = []
    for model_name, recipe, opt_name in cases:
        t0 = time.time()
        try:
            r = run_case(model_name, recipe, opt_name, rank, world, meshes, rec, warmup)
        except Exception as e:  # symmetric failures (an API the recipe needs) stay per case
            r = {"model": model_name, "recipe": recipe, "optimizer": opt_name,
                 "world": world, "error": f"{type(e).__name__}: {e}"}
            rec.on = False
            dist.barrier()
        r["seconds"] = round(time.time() - t0, 2)
        results.append(r)
    for pg in list(dist.distributed_c10d._world.pg_map.keys()):
        pg.unregister_pre_hook(HOOK_ID)
    dist.barrier()
    if rank == 0:  # complete before any rank starts tearing gloo down
        with open(out_path + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(out_path + ".tmp", out_path)
    dist.barrier()
    dist.destroy_process_group()


def run_pytorch(cases, warmup):
    import torch.multiprocessing as mp

    os.environ["OMP_NUM_THREADS"] = "1"
    results = []
    by_world = collections.defaultdict(list)
    for c in cases:
        by_world[WORLD[c[1]]].append(c)
    with tempfile.TemporaryDirectory(prefix="reference_comm_") as tmp:
        for world, wcases in sorted(by_world.items()):
            store = os.path.join(tmp, f"store{world}")
            out = os.path.join(tmp, f"out{world}.json")
            for attempt in (1, 2):
                try:
                    mp.spawn(worker, args=(world, store + str(attempt), wcases, out, warmup),
                             nprocs=world, join=True)
                    break
                except Exception as e:
                    # a gloo worker has been seen to abort (rarely) while the
                    # process group shuts down: the results, written before
                    # the teardown, are complete then
                    if os.path.exists(out):
                        print(f"[reference_comm] world {world}: a worker failed after writing "
                              f"the results ({type(e).__name__}: {e}); results kept",
                              file=sys.stderr)
                        break
                    if attempt == 2:
                        raise
                    print(f"[reference_comm] world {world}: {type(e).__name__}: {e}; retrying once",
                          file=sys.stderr)
            with open(out) as f:
                results += json.load(f)
    return results


# ------------------------------------------------------------ spmdc side


def spmdc_exec(argv, retries=10):
    """Runs spmdc; waits while the binary is being rebuilt (missing/not executable)."""
    for attempt in range(retries + 1):
        if os.access(argv[0], os.X_OK):
            try:
                return subprocess.run(argv, capture_output=True, text=True, timeout=300)
            except (PermissionError, FileNotFoundError, OSError):
                pass
        if attempt < retries:
            print(f"[reference_comm] {argv[0]} not runnable, retrying in 30 s", file=sys.stderr)
            time.sleep(30)
    raise RuntimeError(f"cannot run {argv[0]}")


_schema_choice = {}


# Cases whose two sides do different work, shown but not compared.
NOT_COMPARABLE = {
    ("llama_train", "hsdp"): "batch 2 cannot split over 4 ranks: PyTorch feeds both ranks of a shard "
                             "group the same sample and reduce-scatters their identical gradients; "
                             "spmdc splits the batch over the replicate axis only and slices them",
}


def spmdc_side(spmdc, model_name, recipe, opt_name, tmp):
    pt2 = ROOT / "testdata" / "pt2" / model_name / "model.pt2"
    if recipe == "ddp":
        schemas = [("ddp", "2"), ("dp", "2")]
        if "ddp" in _schema_choice:
            schemas = [_schema_choice["ddp"]]
    elif recipe == "fsdp":
        schemas = [("fsdp", "2")]
    elif recipe == "hsdp":
        schemas = [("hsdp", "2x2")]
    else:
        short = model_name[:-len("_train")]
        schemas = [(str(ROOT / "schemas" / "examples" / f"{short}_tp.json"), "2")]
    opt_args = ["--optimizer", opt_name] + (["--momentum", "0.9"] if opt_name == "sgd" else [])
    errors = []
    for schema, mesh in schemas:
        stem = os.path.join(tmp, f"{model_name}.{recipe}.{opt_name}")
        argv = [spmdc, "compile", str(pt2), "--schema", schema, "--mesh", mesh] + opt_args + [
            "-o", stem + ".spmd", "--report", stem + ".json", "-q"]
        p = spmdc_exec(argv)
        if p.returncode != 0:
            errors.append(f"--schema {os.path.basename(schema)}: "
                          + (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
            continue
        if recipe == "ddp":
            _schema_choice["ddp"] = (schema, mesh)
        with open(stem + ".json") as f:
            rep = json.load(f)
        out = {}
        for c in rep.get("collectives", []):
            # Scalars (shape []) are the global loss and the count its mean
            # divides by: spmdc returns the loss of the whole batch, PyTorch's
            # recipes leave each rank its own. Listed, not compared.
            key = "scalars" if c.get("shape") == [] else c["kind"]
            s = out.setdefault(key, {"count": 0, "bytes": 0})
            s["count"] += 1
            s["bytes"] += int(c["bytes_per_rank"])
        cmd = " ".join(["spmdc", "compile", f"testdata/pt2/{model_name}/model.pt2", "--schema",
                        os.path.relpath(schema, ROOT) if os.sep in schema else schema,
                        "--mesh", mesh] + opt_args)
        return {"status": "ok", "command": cmd, "kinds": out,
                "collective_counts": rep.get("collective_counts")}
    return {"status": "unsupported", "error": "; ".join(errors)}


# ------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--only", metavar="RECIPE|MODEL,...",
                    help=f"recipes ({','.join(RECIPES)}) and/or models ({','.join(MODELS)})")
    ap.add_argument("--allow-mismatch", action="store_true",
                    help="report mismatches but exit 0")
    ap.add_argument("--warmup", type=int, default=WARMUP_STEPS,
                    help="unmeasured steps before the measured one (default %(default)s)")
    args = ap.parse_args()
    spmdc = os.path.abspath(args.spmdc)

    recipes, models = list(RECIPES), list(MODELS)
    if args.only:
        sel = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [s for s in sel if s not in RECIPES and s not in MODELS]
        if bad:
            ap.error(f"unknown recipe/model: {', '.join(bad)}")
        if any(s in RECIPES for s in sel):
            recipes = [r for r in RECIPES if r in sel]
        if any(s in MODELS for s in sel):
            models = [m for m in MODELS if m in sel]
    cases = [(m, r, o) for r in recipes for m in models for o in OPTIMIZERS]

    t0 = time.time()
    results = run_pytorch(cases, args.warmup)
    t_torch = time.time() - t0
    with tempfile.TemporaryDirectory(prefix="reference_comm_spmdc_") as tmp:
        for r in results:
            r["spmdc"] = spmdc_side(spmdc, r["model"], r["recipe"], r["optimizer"], tmp)
    t_total = time.time() - t0

    order = {c: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[(r["model"], r["recipe"], r["optimizer"])])

    failures = 0
    rows = []
    for r in results:
        case = (r["model"], r["recipe"], r["optimizer"])
        notes = []
        if "error" in r:
            rows.append(case + ("-", "error", "", "ERROR", r["error"]))
            failures += 1
            continue
        if not r["capture_ok"]:
            notes.append("capture: " + "; ".join(r["capture_problems"]))
        if not r["numerics"]["ok"]:
            notes.append(f"numerics vs 1 process: {r['numerics']['max_abs_diff']}")
        if not r["capture_ok"] or not r["numerics"]["ok"]:
            failures += 1
        sp = r["spmdc"]
        if sp["status"] != "ok":
            for i, (k, a) in enumerate(sorted(r["pytorch"].items(), key=kind_key) or [("-", None)]):
                rows.append(case + (k, f"{a['count']}/{a['bytes']}" if a else "0/0", "-",
                                    "UNSUPPORTED", "; ".join(notes + [sp["error"]]) if i == 0 else ""))
            failures += 1
            r["status"] = "unsupported"
            continue
        why_not = NOT_COMPARABLE.get((r["model"], r["recipe"]))
        if why_not:
            r["status"] = "not comparable"
            for i, k in enumerate(sorted(set(r["pytorch"]) | set(sp["kinds"]), key=lambda k: kind_key((k, 0)))):
                a = r["pytorch"].get(k, {"count": 0, "bytes": 0})
                b = sp["kinds"].get(k, {"count": 0, "bytes": 0})
                rows.append(case + (k, f"{a['count']}/{a['bytes']}", f"{b['count']}/{b['bytes']}", "n/a",
                                    why_not if i == 0 else ""))
            continue
        py, sk = r["pytorch"], dict(sp["kinds"])
        scalars = sk.pop("scalars", None)
        if scalars:
            notes.append(f"+{scalars['count']} loss scalar all-reduce(s), {scalars['bytes']} B, not compared")
        kinds = [k for k, _ in sorted(((k, 0) for k in set(py) | set(sk)), key=kind_key)]
        r["compare"] = {}
        case_bad = False
        for i, k in enumerate(kinds):
            a = py.get(k, {"count": 0, "bytes": 0})
            b = sk.get(k, {"count": 0, "bytes": 0})
            ok = a["bytes"] == b["bytes"]
            case_bad |= not ok
            r["compare"][k] = {"pytorch": a, "spmdc": b, "ok": ok}
            rows.append(case + (k, f"{a['count']}/{a['bytes']}", f"{b['count']}/{b['bytes']}",
                                "OK" if ok else "MISMATCH",
                                "; ".join(notes) if i == 0 else ""))
        if not kinds:
            rows.append(case + ("(none)", "0/0", "0/0", "OK", "; ".join(notes)))
        r["status"] = "mismatch" if case_bad else "ok"
        failures += case_bad

    header = ("model", "recipe", "opt", "kind", "pytorch n/bytes", "spmdc n/bytes", "bytes", "note")
    widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header) - 1)]
    line = lambda x: "  ".join(str(v).ljust(w) for v, w in zip(x, widths)) + "  " + str(x[-1])
    print(line(header).rstrip())
    prev = None
    for x in rows:
        shown = x if x[:3] != prev else ("", "", "") + x[3:]
        prev = x[:3]
        print(line(shown).rstrip())
    caps = all(r.get("capture_ok", False) for r in results)
    nums = [r for r in results if "numerics" in r]
    print(f"\ncapture cross-check (pre-hooks == dispatch mode{', == DDP buckets' if 'ddp' in recipes else ''}): "
          f"{'ok' if caps else 'FAILED'} in {sum(r.get('capture_ok', False) for r in results)}/{len(results)} cases")
    print(f"numerics vs single process (loss, grads, params after the step): "
          f"{sum(r['numerics']['ok'] for r in nums)}/{len(results)} ok, max |diff| "
          f"{max((max(r['numerics']['max_abs_diff'].values()) for r in nums), default=0):.2e}")
    print(f"time: pytorch {t_torch:.1f} s, total {t_total:.1f} s")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": results, "seconds": {"pytorch": round(t_torch, 2),
                                                     "total": round(t_total, 2)},
                       "failures": failures}, f, indent=1)
    if failures and not args.allow_mismatch:
        print(f"{failures} case(s) mismatched or failed", file=sys.stderr)
        return 1
    return 0


def kind_key(item):
    k = item[0]
    return (KIND_ORDER.index(k) if k in KIND_ORDER else 99, k)


if __name__ == "__main__":
    sys.exit(main())
