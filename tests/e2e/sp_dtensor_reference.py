#!/usr/bin/env python3
"""spmdc's sequence parallelism against DTensor's SequenceParallel on the same model.

Usage:
    sp_dtensor_reference.py SPMDC [--json OUT] [--worlds 2,4]

For testdata's llama (forward) and llama_train (forward + backward, no
optimizer) at tp 2 and 4, the script

1. runs the model (testdata/export_models.py's classes, fixed seeds) with
   DTensor on a 1-D gloo mesh, Megatron-SP as torchtitan writes it for this
   model's modules: per layer attn_norm and ffn_norm SequenceParallel() whose
   output is all-gathered once (PrepareModuleOutput Shard(1) -> Replicate, so
   the three/two column-parallel linears share one gather), wq wk wv w1 w3
   ColwiseParallel(), wo w2 RowwiseParallel(output_layouts=Shard(1)) (the
   reduce-scatter); the embedding's output scattered on the sequence
   (PrepareModuleOutput Replicate -> Shard(1)); the final norm
   SequenceParallel() gathered to a plain tensor for the replicated LM head.
   The norm weights' gradients (Partial DTensors) are redistributed to
   Replicate inside the measured step, as spmdc returns every gradient
   replicated. It counts every collective rank 0 issues in the measured step
   (reference_comm.py's two taps: ProcessGroup pre-hooks and a dispatch mode,
   which must agree) and checks the outputs (logits; loss and every
   gradient) against eager PyTorch;
2. compiles the same graph with `SPMDC compile testdata/pt2/<model>/model.pt2
   --schema schemas/examples/llama_tp_sp.json --mesh N --report R` and sums
   the report's collectives per kind;
3. prints both per kind (count/bytes per rank) and fails unless the bytes of
   every kind are equal and the all-gather and reduce-scatter counts are
   equal (spmdc buckets the norm weights' gradient all-reduces into one,
   DTensor issues one per norm: those counts are shown, not compared), and
   unless DTensor's outputs match eager (rel 1e-5).

Exit status 1 on any mismatch.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
sys.path.insert(0, str(ROOT / "testdata"))
import reference_comm as rc  # noqa: E402  (Recorder, summarize, make_case)

MODELS = ["llama", "llama_train"]


def parallelize_sp(mod, mesh):
    """Megatron-SP on a Llama or LlamaLoss with DTensor (see the docstring)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleOutput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    llama = mod.model if hasattr(mod, "model") else mod

    def gathered(local):
        return PrepareModuleOutput(output_layouts=Shard(1), desired_output_layouts=Replicate(),
                                   use_local_output=local)

    parallelize_module(llama.tok, mesh, PrepareModuleOutput(
        output_layouts=Replicate(), desired_output_layouts=Shard(1), use_local_output=False))
    for layer in llama.layers:
        parallelize_module(layer, mesh, {
            "attn_norm": SequenceParallel(use_local_output=False),
            "ffn_norm": SequenceParallel(use_local_output=False),
            "wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(),
            "w1": ColwiseParallel(), "w3": ColwiseParallel(),
            "wo": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "w2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        })
        parallelize_module(layer.attn_norm, mesh, gathered(False))
        parallelize_module(layer.ffn_norm, mesh, gathered(False))
    parallelize_module(llama.norm, mesh, SequenceParallel(use_local_output=False))
    parallelize_module(llama.norm, mesh, gathered(True))


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def run_case(model_name, rank, mesh, rec):
    import torch
    from torch.distributed.tensor import DTensor, Replicate

    ref, inputs = rc.make_case(model_name)
    mod, _ = rc.make_case(model_name)
    parallelize_sp(mod, mesh)
    train = model_name.endswith("_train")

    def step():
        out = mod(*inputs)
        if train:
            out.backward()
            for p in mod.parameters():
                if isinstance(p.grad, DTensor) and any(pl.is_partial() for pl in p.grad.placements):
                    p.grad = p.grad.redistribute(placements=[Replicate()])
        return out

    step()  # warm-up (DTensor's caches)
    mod.zero_grad()
    rec.reset()
    rec.hook_all_groups()
    rec.on = True
    with rec.dispatch_mode():
        out = step()
    rec.on = False
    worst = 0.0
    want = ref(*inputs)
    worst = max(worst, rel(rc.full(out.detach()), want.detach()))
    if train:
        want.backward()
        refp = dict(ref.named_parameters())
        for n, p in mod.named_parameters():
            worst = max(worst, rel(rc.full(p.grad), refp[n].grad))
    hs, ms = rc.summarize(rec.hook), rc.summarize(rec.mode)
    return {"model": model_name, "world": mesh.size(), "pytorch": hs, "dispatch_mode": ms,
            "capture_ok": hs == ms, "max_rel_err": worst, "numerics_ok": worst <= 1e-5}


def worker(rank, world, store_path, out_path):
    os.environ["OMP_NUM_THREADS"] = "1"
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    mesh = init_device_mesh("cpu", (world,))
    rec = rc.Recorder()
    results = [run_case(m, rank, mesh, rec) for m in MODELS]
    for pg in list(dist.distributed_c10d._world.pg_map.keys()):
        pg.unregister_pre_hook(rc.HOOK_ID)
    dist.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def spmdc_side(spmdc, model_name, world, tmp):
    stem = os.path.join(tmp, f"{model_name}{world}")
    argv = [spmdc, "compile", str(ROOT / "testdata" / "pt2" / model_name / "model.pt2"), "--schema",
            str(ROOT / "schemas" / "examples" / "llama_tp_sp.json"), "--mesh", str(world),
            "-o", stem + ".spmd", "--report", stem + ".json", "-q"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    with open(stem + ".json") as f:
        rep = json.load(f)
    out = {}
    for c in rep["collectives"]:
        s = out.setdefault(c["kind"], {"count": 0, "bytes": 0})
        s["count"] += 1
        s["bytes"] += int(c["bytes_per_rank"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--worlds", default="2,4")
    args = ap.parse_args()
    import torch.multiprocessing as mp

    results = []
    with tempfile.TemporaryDirectory(prefix="sp_reference_") as tmp:
        for world in [int(w) for w in args.worlds.split(",")]:
            out = os.path.join(tmp, f"out{world}.json")
            mp.spawn(worker, args=(world, os.path.join(tmp, f"store{world}"), out), nprocs=world, join=True)
            with open(out) as f:
                for r in json.load(f):
                    r["spmdc"] = spmdc_side(os.path.abspath(args.spmdc), r["model"], world, tmp)
                    results.append(r)
    failed = False
    print(f"{'model':<12} {'tp':>2} {'kind':<15} {'DTensor SP':>14} {'spmdc SP':>14}  check")
    for r in results:
        kinds = sorted(set(r["pytorch"]) | set(r["spmdc"]))
        for k in kinds:
            a = r["pytorch"].get(k, {"count": 0, "bytes": 0})
            b = r["spmdc"].get(k, {"count": 0, "bytes": 0})
            ok = a["bytes"] == b["bytes"] and (k == "all_reduce" or a["count"] == b["count"])
            failed |= not ok
            print(f"{r['model']:<12} {r['world']:>2} {k:<15} {a['count']:>3}/{a['bytes']:>9,} "
                  f"{b['count']:>3}/{b['bytes']:>9,}  {'OK' if ok else 'MISMATCH'}")
        ok = r["capture_ok"] and r["numerics_ok"]
        failed |= not ok
        print(f"{r['model']:<12} {r['world']:>2} DTensor vs eager: max rel err {r['max_rel_err']:.2e}, "
              f"taps agree: {r['capture_ok']}  {'OK' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
