#!/usr/bin/env python3
"""Uneven shards: spmdc against PyTorch DTensor on the same placements.

Usage:
    uneven_dtensor.py SPMDC SPMD_RUN [--only NAME,...]

For each case (a global shape, a mesh and the placements of the input x)
the script

1. exports a small module (pointwise ops, a mean over the sharded dim, a
   matmul with a replicated weight, a sum) with torch.export;
2. compiles it with `SPMDC compile --schema <x laid out as the case says>`
   and reads each rank's local shape of x from `SPMDC dump` ("per rank");
3. runs the program on the case's ranks with `SPMD_RUN -n <ranks>` (Gloo);
4. distributes x with torch.distributed.tensor.distribute_tensor over a
   DeviceMesh of the same shape (gloo processes, torch.multiprocessing),
   records every rank's local shape and runs the same module on the
   DTensor (full_tensor() of each output);
5. checks that the local shapes agree rank by rank and that spmdc's
   outputs match DTensor's and eager PyTorch's (allclose, rtol 1e-5).

Cases: 5 rows over 4 ranks (2, 2, 1, 0), 3 over 2 (2, 1), 1 over 2 (1, 0:
an empty shard), 50,257 over 8 (6,283 x 7, 6,276) and S(0) on both axes of
a 2x2 mesh with 5 rows (nested: 2, 1, 1, 1). Exit status 1 on any
difference.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = {
    "5_over_4": ([5, 6], [4], ["S(0)"]),
    "3_over_2": ([3, 6], [2], ["S(0)"]),
    "1_over_2": ([1, 6], [2], ["S(0)"]),
    "50257_over_8": ([50257, 2], [8], ["S(0)"]),
    "nested_5_on_2x2": ([5, 6], [2, 2], ["S(0)", "S(0)"]),
}


class Module(torch.nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, cols * 4).reshape(cols, 4))

    def forward(self, x):
        y = torch.nn.functional.gelu(x) * 2.0 + 1.0
        return y, x.mean(dim=0), x @ self.w, (x * x).sum(dim=0)


def dtensor_worker(rank, world, init, shape, mesh_shape, placements, x, queue):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", tuple(mesh_shape))
    dt_placements = [Shard(int(p[2:-1])) if p.startswith("S(") else Replicate() for p in placements]
    dx = distribute_tensor(x, mesh, dt_placements)
    module = Module(shape[1])
    with torch.no_grad():
        w = distribute_tensor(module.w.detach(), mesh, [Replicate()] * len(mesh_shape))
        y = torch.nn.functional.gelu(dx) * 2.0 + 1.0
        outs = [y, dx.mean(dim=0), dx @ w, (dx * dx).sum(dim=0)]
        full = [o.full_tensor() for o in outs]
    local = list(dx.to_local().shape)
    shapes = [None] * world
    dist.all_gather_object(shapes, local)
    if rank == 0:  # through a file: tensors in a queue die with this process
        torch.save((shapes, full), init[len("file://"):] + ".result")
        queue.put(True)
    dist.barrier()
    dist.destroy_process_group()


def run_dtensor(shape, mesh_shape, placements, x, tmp):
    world = 1
    for s in mesh_shape:
        world *= s
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    init = "file://" + os.path.join(tmp, "store")
    procs = [ctx.Process(target=dtensor_worker, args=(r, world, init, shape, mesh_shape, placements, x, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    queue.get(timeout=300)
    for p in procs:
        p.join(timeout=60)
    return torch.load(os.path.join(tmp, "store.result"))


def per_rank_shapes(dump):
    for line in dump.splitlines():
        if line.startswith("input %x:"):
            m = re.search(r"per rank ((\[[0-9, ]*\] ?)+)", line)
            if not m:
                return None
            return [json.loads(s) for s in re.findall(r"\[[0-9, ]*\]", m.group(1))]
    raise RuntimeError("no input %x in the dump")


def run_case(name, spmdc, spmd_run, tmp):
    shape, mesh_shape, placements = CASES[name]
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    x = torch.randn(*shape)
    module = Module(shape[1])
    pt2 = os.path.join(tmp, "model.pt2")
    torch.export.save(torch.export.export(module, (x,)), pt2)
    axes = ["a%d" % i for i in range(len(mesh_shape))]
    schema = {"version": 1, "mesh": {"shape": mesh_shape, "axes": axes},
              "inputs": [{"match": "x", "placements": placements}], "outputs": "replicate"}
    schema_path = os.path.join(tmp, "schema.json")
    with open(schema_path, "w") as f:
        json.dump(schema, f)
    spmd = os.path.join(tmp, "model.spmd")
    subprocess.run([spmdc, "compile", pt2, "--schema", schema_path, "-o", spmd, "-q"], check=True)
    dump = subprocess.run([spmdc, "dump", spmd], check=True, capture_output=True, text=True).stdout
    ours = per_rank_shapes(dump)
    inputs, outputs = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
    save_file({"input.0": x}, inputs)
    ranks = 1
    for s in mesh_shape:
        ranks *= s
    subprocess.run([spmd_run, "-n", str(ranks), spmd, "--inputs", inputs, "--output", outputs, "-q"],
                   check=True)
    got = load_file(outputs)
    shapes, full = run_dtensor(shape, mesh_shape, placements, x, tmp)
    with torch.no_grad():
        eager = module(x)
    problems = []
    if ours != shapes:
        problems.append("local shapes: spmdc %s, DTensor %s" % (ours, shapes))
    for i, (d, e) in enumerate(zip(full, eager)):
        o = got.get("output.%d" % i)
        if o is None:
            problems.append("output.%d missing" % i)
            continue
        if not torch.allclose(o, d, rtol=1e-5, atol=1e-5):
            problems.append("output.%d differs from DTensor by %g" % (i, (o - d).abs().max().item()))
        if not torch.allclose(o, e, rtol=1e-5, atol=1e-5):
            problems.append("output.%d differs from eager by %g" % (i, (o - e).abs().max().item()))
    print("%-18s mesh %-6s %-14s local %s  %s" % (
        name, "x".join(map(str, mesh_shape)), str(placements),
        ours if len(str(ours)) < 60 else str(ours)[:57] + "...", "OK" if not problems else "MISMATCH"))
    for p in problems:
        print("    " + p)
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in CASES if not args.only or n in args.only.split(",")]
    ok = True
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            ok = run_case(name, args.spmdc, args.spmd_run, tmp) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
