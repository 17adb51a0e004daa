#!/usr/bin/env python3
"""Loss parallelism: spmdc against DTensor's loss_parallel on the same model.

Usage:
    loss_parallel_ref.py SPMDC SPMD_RUN [--world 2,4] [--json OUT]

The model is testdata/pt2/llama_train (testdata/export_models.py's
LlamaLoss) with the archive's own weights and inputs. For each world size N:

1. DTensor: N gloo processes (torch.multiprocessing.spawn, FileStore) apply
   torchtitan-style tensor parallelism (wq, wk, wv, w1, w3 colwise, wo, w2
   rowwise, the token table rowwise: vocab-parallel), the lm_head `out`
   ColwiseParallel(output_layouts=Shard(-1), use_local_output=False), and
   run forward, cross-entropy and backward inside `loss_parallel()`; rank 0
   keeps the loss, every gradient (full_tensor) and DTensor's collective
   counts (CommDebugMode).
2. spmdc: `SPMDC compile model.pt2 --schema
   testdata/schemas/llama_loss_parallel.json --mesh N --report R`, then
   `SPMD_RUN -n N p.spmd --inputs inputs.safetensors --output out`.
3. Checks: the report has no all-gather (the [32, 256] logits stay
   sharded); loss and every gradient match DTensor's (relative error of the
   norm <= 1e-5) and the archive's eager expected.safetensors.

Exit status 1 on any mismatch. Prints one line per world size.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.path.join(ROOT, "testdata", "pt2", "llama_train")
SCHEMA = os.path.join(ROOT, "testdata", "schemas", "llama_loss_parallel.json")
RTOL = 1e-5


def build_model():
    """LlamaLoss with the archive's weights; (module, tokens, labels)."""
    import torch
    from safetensors.torch import load_file

    sys.path.insert(0, os.path.join(ROOT, "testdata"))
    import export_models as em

    ep = torch.export.load(os.path.join(MODEL_DIR, "model.pt2"))
    mod = em.LlamaLoss()
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    missing, unexpected = mod.load_state_dict(state, strict=False)
    if any(not k.endswith(("cos", "sin")) for k in missing):
        raise RuntimeError(f"weights missing from the archive: {missing}")
    inputs = load_file(os.path.join(MODEL_DIR, "inputs.safetensors"))
    return mod, inputs["input.0"], inputs["input.1"]


def dtensor_worker(rank, world, store_path, out_path):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, loss_parallel, parallelize_module)

    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        mod, tokens, labels = build_model()
        mesh = init_device_mesh("cpu", (world,))
        plan = {"tok": RowwiseParallel(input_layouts=Replicate()),
                "out": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}
        for i, _ in enumerate(mod.model.layers):
            for name in ("wq", "wk", "wv", "w1", "w3"):
                plan[f"layers.{i}.{name}"] = ColwiseParallel()
            for name in ("wo", "w2"):
                plan[f"layers.{i}.{name}"] = RowwiseParallel()
        parallelize_module(mod.model, mesh, plan)
        comm = CommDebugMode()
        with comm, loss_parallel():
            logits = mod.model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
            loss.backward()
        result = {"loss": loss.full_tensor().detach().clone()}
        for name, p in mod.named_parameters():
            g = p.grad
            result["grad." + name] = (g.full_tensor() if hasattr(g, "full_tensor") else g).detach().clone()
        counts = {str(k).split(".")[-1]: v for k, v in comm.get_comm_counts().items()}
        if rank == 0:
            torch.save({"tensors": result, "counts": counts}, out_path)
    finally:
        dist.destroy_process_group()


def run_dtensor(world, tmp):
    import torch
    import torch.multiprocessing as mp

    out = os.path.join(tmp, f"dtensor{world}.pt")
    # PyTorch's Gloo workers now and then die at start-up with SIGABRT
    # ("terminate called without an active exception"; seen once in a CI run
    # of this script, not reproduced in 5 reruns): the reference is retried,
    # twice at most, each time with a fresh store. spmdc's side is not.
    for attempt in range(3):
        store = os.path.join(tmp, f"store{world}-{attempt}")
        try:
            mp.spawn(dtensor_worker, args=(world, store, out), nprocs=world, join=True)
            return torch.load(out)
        except mp.ProcessExitedException as e:
            if attempt == 2 or e.exit_code >= 0:
                raise
            print(f"loss_parallel_ref: the DTensor reference died ({e}); retrying", flush=True)


def run_spmdc(spmdc, spmd_run, world, tmp):
    from safetensors.torch import load_file

    prog = os.path.join(tmp, f"p{world}.spmd")
    report = os.path.join(tmp, f"r{world}.json")
    out = os.path.join(tmp, f"out{world}.safetensors")
    subprocess.run([spmdc, "compile", os.path.join(MODEL_DIR, "model.pt2"), "--schema", SCHEMA,
                    "--mesh", str(world), "-o", prog, "--report", report, "-q"], check=True)
    subprocess.run([spmd_run, "-n", str(world), prog, "--inputs",
                    os.path.join(MODEL_DIR, "inputs.safetensors"), "--output", out, "-q"], check=True)
    with open(report) as f:
        rep = json.load(f)
    return load_file(out), rep


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def compare(name, got, want, failures):
    worst = 0.0
    for key, w in want.items():
        if key not in got:
            failures.append(f"{name}: {key} missing")
            continue
        worst = max(worst, rel(got[key], w) if w.abs().max() > 1e-6 else float(got[key].abs().max()))
    if worst > RTOL:
        failures.append(f"{name}: worst relative error {worst:.2e} > {RTOL}")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--world", default="2,4")
    ap.add_argument("--json")
    args = ap.parse_args()
    from safetensors.torch import load_file

    expected = load_file(os.path.join(MODEL_DIR, "expected.safetensors"))
    failures, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for world in [int(w) for w in args.world.split(",")]:
            dt = run_dtensor(world, tmp)
            got, rep = run_spmdc(args.spmdc, args.spmd_run, world, tmp)
            gathers = [c for c in rep.get("collectives", []) if c.get("kind") == "all_gather"]
            if gathers:
                failures.append(f"tp {world}: spmdc gathers {[c.get('value') for c in gathers]}")
            ours = {}
            for c in rep.get("collectives", []):
                ours[c.get("kind")] = ours.get(c.get("kind"), 0) + 1
            keys = {k: v for k, v in expected.items()}
            e_dt = compare(f"tp {world} DTensor vs eager", dt["tensors"], keys, failures)
            e_sp = compare(f"tp {world} spmdc vs DTensor", got, {k: dt["tensors"][k] for k in keys}, failures)
            row = {"world": world, "dtensor_vs_eager": e_dt, "spmdc_vs_dtensor": e_sp,
                   "dtensor_collectives": dt["counts"], "spmdc_collectives": ours,
                   "loss_spmdc": float(got["loss"]), "loss_dtensor": float(dt["tensors"]["loss"])}
            rows.append(row)
            print(f"tp {world}: loss spmdc {row['loss_spmdc']:.7f} DTensor {row['loss_dtensor']:.7f}; "
                  f"worst rel. error DTensor/eager {e_dt:.1e}, spmdc/DTensor {e_sp:.1e}; "
                  f"collectives DTensor {dt['counts']} spmdc {ours}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
