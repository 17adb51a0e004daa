#!/usr/bin/env python3
"""Uneven strided shards (S(d, sf) whose rows do not divide): spmdc against eager.

Usage:
    uneven_strided.py SPMDC SPMD_RUN [--only NAME,...]

A strided shard S(d, sf) views dim d as sf rows and splits each row as
torch.chunk does: the layout a flatten of [sf, n] with n sharded gives, and
a fused QKV projection's output whose heads do not divide the tp degree.
Each case exports a small module with spmdc_export (a forward, or a whole
train step with its gradients), compiles it with a schema that makes the
layout arise (from a view, from a fused weight, or written in the schema),
runs it on Gloo workers and checks:

- the compiled program holds the strided layout (its text names
  `S(..,sf=..)`), and where the layout needs no gather (fused QKV), no
  all-gather appears at all;
- every output (loss and gradients for a train step) equals eager
  PyTorch's (expected.safetensors, relative 1e-5);
- for the fused QKV cases, each rank's weight shards (spmd-run --save)
  equal DTensor's own split of the same weights (_StridedShard(0,
  split_factor=3) for q/k/v, Shard(1) for the output projection).

Cases: a [3, 5, 4] activation sharded on its 5 over 2 ranks and flattened
to [15, 4] (rows of 5: 3 | 2); a fused QKV of hidden 10 over 4 ranks (3, 3,
3, 1 of each of q, k, v) as a train step, and of hidden 5 on a 2x2 dp x tp
mesh; an input written S(0,sf=2) in the schema over 3 ranks (rows of 5: 2,
2, 1), gathered and sliced. Exit 1 on any difference.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from spmdc_export import core  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


class Flatten(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 24).reshape(4, 6))

    def forward(self, x):
        b, s, h = x.shape
        y = torch.relu(x.reshape(b * s, h) @ self.w)
        return y, y.reshape(b, s, 6).sum(-1)


class FusedQkv(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(torch.tanh(q) * k + v)


class Strided(torch.nn.Module):
    def forward(self, x, z):
        y = x * 2.0 + z
        return y, y.reshape(2, 5, 4).sum(1)


def mse(out, target):
    return F.mse_loss(out, target)


def case_flatten(d):
    torch.manual_seed(0)
    core.export(Flatten(), (torch.randn(3, 5, 4),), d)
    schema = {"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
              "inputs": [{"match": "*", "placements": ["S(1)"]}], "outputs": "replicate"}
    return schema, 2, None


def dtensor_shards(module, mesh):
    """Each rank's (tp coordinate's) shard of the fused weights by DTensor's
    own split: _StridedShard(0, split_factor=3) for qkv, Shard(1) for out."""
    from torch.distributed.tensor.placement_types import Shard, _StridedShard
    tp = mesh[-1]
    want = {}
    for fqn, t in module.state_dict().items():
        p = _StridedShard(0, split_factor=3) if fqn.startswith("qkv.") else Shard(1)
        want[fqn] = [c.contiguous() for c in p._split_tensor(t.detach(), tp, with_padding=False)[0]]
    return lambda rank: {fqn: pieces[rank % tp] for fqn, pieces in want.items()}


def case_qkv(d, hidden, mesh, axes, batch):
    torch.manual_seed(0)
    x, target = torch.randn(batch, 3, hidden), torch.randn(batch, 3, hidden)
    module = FusedQkv(hidden)
    shards = dtensor_shards(module, mesh)
    core.export_train_step(module, (x,), d, loss_fn=mse, targets=(target,))
    tp = {a: "R" for a in axes}
    schema = {"version": 1, "mesh": {"shape": mesh, "axes": axes},
              "params": [{"match": "qkv.*", "placements": dict(tp, tp="S(0,sf=3)")},
                         {"match": "out.weight", "placements": dict(tp, tp="S(1)")}],
              "outputs": "replicate"}
    if "dp" in axes:
        schema["inputs"] = [{"match": "*", "placements": {"dp": "S(0)", "tp": "R"}}]
    ranks = 1
    for s in mesh:
        ranks *= s
    return schema, ranks, shards


def case_schema(d):
    torch.manual_seed(0)
    core.export(Strided(), (torch.randn(10, 4), torch.randn(10, 4)), d)
    schema = {"version": 1, "mesh": {"shape": [3], "axes": ["tp"]},
              "inputs": [{"match": "x", "placements": ["S(0,sf=2)"]}], "outputs": "replicate"}
    return schema, 3, None


CASES = {
    "flatten_5_over_2": case_flatten,
    "fused_qkv_10_over_4": lambda d: case_qkv(d, 10, [4], ["tp"], 2),
    "fused_qkv_5_on_2x2": lambda d: case_qkv(d, 5, [2, 2], ["dp", "tp"], 4),
    "schema_sf2_over_3": case_schema,
}


def run_case(name, spmdc, spmd_run, d):
    schema, ranks, shards = CASES[name](d)
    no_gather = shards is not None
    (d / "s.json").write_text(json.dumps(schema))
    problems = []
    r = subprocess.run([spmdc, "compile", str(d / "model.pt2"), "--schema", str(d / "s.json"), "-o",
                        str(d / "p.spmd"), "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        return [f"compile exit {r.returncode}: {r.stderr.strip()}"]
    text = subprocess.run([spmdc, "dump", str(d / "p.spmd")], capture_output=True, text=True).stdout
    if ",sf=" not in text:
        problems.append("the program holds no strided layout")
    if no_gather and "spmd.all_gather" in text:
        problems.append("the program gathers: " + next(l for l in text.splitlines() if "spmd.all_gather" in l))
    save = ["--save", str(d / "ck")] if shards else []
    r = subprocess.run([spmd_run, "-n", str(ranks), str(d / "p.spmd"), "--inputs", str(d / "inputs.safetensors"),
                        "-o", str(d / "out.safetensors"), "-q"] + save, capture_output=True, text=True)
    if r.returncode != 0:
        return problems + [f"spmd-run exit {r.returncode}: {r.stderr.strip()}"]
    for rank in range(ranks if shards else 0):  # each rank's weight shards against DTensor's split
        held = load_file(str(d / "ck" / "step-1" / f"rank{rank}.safetensors"))
        for fqn, w in shards(rank).items():
            if fqn not in held or held[fqn].shape != w.shape or not torch.equal(held[fqn], w):
                problems.append(f"rank {rank} holds {fqn} {list(held[fqn].shape) if fqn in held else None}, "
                                f"DTensor's shard is {list(w.shape)}")
    got, want = load_file(str(d / "out.safetensors")), load_file(str(d / "expected.safetensors"))
    for key, w in want.items():
        if key not in got:
            problems.append(f"{key} missing")
            continue
        err = float((got[key].double() - w.double()).abs().max()) / max(1e-12, float(w.abs().max()))
        if got[key].shape != w.shape or not err <= 1e-5:
            problems.append(f"{key}: shape {list(got[key].shape)} vs {list(w.shape)}, rel {err:.3g}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    failures = 0
    for name in CASES:
        if args.only and name not in args.only.split(","):
            continue
        with tempfile.TemporaryDirectory(prefix="spmdc-strided-") as tmp:
            problems = run_case(name, args.spmdc, args.spmd_run, Path(tmp))
        print(f"{name:22} {'OK' if not problems else 'MISMATCH'}")
        for p in problems:
            print("    " + p)
        failures += bool(problems)
    print(f"uneven_strided: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
