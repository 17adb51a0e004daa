#!/usr/bin/env python3
"""Programs whose meaning depends on local shapes, compiled and run (issue 37).

Usage:
    local_shapes.py SPMDC SPMD_RUN

Each case is exported by spmdc_export, compiled at mesh 2 under a layout
that gives some shard one row (or none), run on 2 Gloo workers, and checked
with `spmd-run --verify-against` the eager outputs (and, for train steps, the
loss and gradients):

    squeeze(0) of f32[2, 3] under dp    each rank holds [1, 3]; the result stays [2, 3]
    squeeze((0, 1)) of f32[3, 1, 4]     uneven dp: ranks hold 2 and 1 rows
    squeeze() of f32[2, 1, 3]           every overload of squeeze
    tensordot ([2, 2, 1] x [2, 1, 2])   an all-to-all of squeezed shards
    x.repeat(0), x.tile(0)              zero-size results
    adaptive_avg_pool1d, unfold         a zero-size batch (views of [0, ...] divided by zero)
    .to(int16), > 0 (bool)              collectives Gloo cannot carry as is
    ResMLP, token mixing sharded        views of permuted layouts (inference and train step)

A compile that exits 0 followed by a failing run is a failure, as is a
mismatch; a refusal is a failure too (every case here must compile). Exit
0 when every case matches, 1 otherwise (also when torch is missing).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

TOKENS_TP = {"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
             "params": [{"match": "*linear_tokens.*", "placements": {"tp": "S(0)"}}], "outputs": "replicate"}


def models(torch, nn):
    """name -> (module, example inputs, schema, train): the cases."""

    class Fn(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, *xs):
            return self.fn(*xs)

    class ResMLP(nn.Module):
        def __init__(self, d=8, s=16):
            super().__init__()
            self.alpha = nn.Parameter(1 + 0.1 * torch.randn(1, 1, d))
            self.beta = nn.Parameter(0.1 * torch.randn(1, 1, d))
            self.linear_tokens = nn.Linear(s, s)
            self.mlp = nn.Linear(d, d)
            self.head = nn.Linear(d, 4)

        def forward(self, x):
            x = x + self.linear_tokens(torch.addcmul(self.beta, self.alpha, x).transpose(1, 2)).transpose(1, 2)
            x = x + self.mlp(x)
            return self.head(x.mean(1))

    class ResMLPLoss(ResMLP):
        def forward(self, x):
            return super().forward(x).square().mean()

    r = torch.randn
    return {
        "squeeze_dim_one_row": (Fn(lambda x: x.squeeze(0) * 2), (r(2, 3),), "dp", False),
        "squeeze_dims_uneven": (Fn(lambda x: x.squeeze((0, 1)) * 2), (r(3, 1, 4),), "dp", False),
        "squeeze_all": (Fn(lambda x: x.squeeze() + 1), (r(2, 1, 3),), "dp", False),
        "tensordot": (Fn(lambda a, b: torch.tensordot(a, b, dims=([0, 1], [2, 0]))),
                      (r(2, 2, 1), r(2, 1, 2)), "dp", False),
        "repeat_zero": (Fn(lambda x: x.repeat(0) + 1), (r(4),), "dp", False),
        "tile_zero": (Fn(lambda x: x.tile(0, 1) + 1), (r(4, 3),), "dp", False),
        "empty_batch_pool": (Fn(lambda x: torch.nn.functional.adaptive_avg_pool1d(x, 5)), (r(0, 8, 8),), "dp",
                             False),
        "empty_batch_unfold": (Fn(lambda x: torch.nn.functional.unfold(x, 2, 1, 0, 1)), (r(0, 1, 5, 5),), "dp",
                               False),
        "int16": (Fn(lambda x: (x * 10).to(torch.int16)), (r(4, 3),), "dp", False),
        "bool": (Fn(lambda x: x > 0), (r(4, 3),), "dp", False),
        "resmlp_tokens_tp": (ResMLP(), (r(4, 16, 8),), TOKENS_TP, False),
        "resmlp_train_tokens_tp": (ResMLPLoss(), (r(4, 16, 8),), TOKENS_TP, True),
    }


def run_case(name, case, spmdc, spmd_run, tmp, core):
    """'' when the case matches, else what went wrong."""
    module, inputs, schema, train = case
    d = tmp / name
    (core.export_train_step if train else core.export)(module, inputs, d)
    if isinstance(schema, dict):
        (d / "s.json").write_text(json.dumps(schema))
        schema = str(d / "s.json")
    c = subprocess.run([spmdc, "compile", str(d / "model.pt2"), "--mesh", "2", "--schema", schema,
                        "-o", str(d / "p.spmd")], capture_output=True, text=True)
    if c.returncode != 0:
        return f"compile refused (exit {c.returncode}): {c.stderr.strip()}"
    r = subprocess.run([spmd_run, "-n", "2", str(d / "p.spmd"), "--inputs", str(d / "inputs.safetensors"),
                        "--verify-against", str(d / "expected.safetensors")], capture_output=True, text=True)
    if r.returncode != 0:
        return f"compiled, then the run failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-2000:]}"
    return ""


def main():
    spmdc, spmd_run = sys.argv[1], sys.argv[2]
    try:
        import torch
        import torch.nn as nn
        from spmdc_export import core
    except ImportError as e:
        print(f"local_shapes: FAIL: {e} (run scripts/setup.sh)")
        return 1
    torch.manual_seed(0)
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-local-shapes-") as t:
        for name, case in models(torch, nn).items():
            err = run_case(name, case, spmdc, spmd_run, Path(t), core)
            print(f"{name:26} {'ok' if not err else 'FAIL'}", flush=True)
            if err:
                failures.append(f"{name}: {err}")
    for f in failures:
        print("local_shapes: " + f)
    print(f"local_shapes: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
