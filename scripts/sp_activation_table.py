#!/usr/bin/env python3
"""Per-layer activation memory of a GPT-style block: spmdc's report beside
Korthikanti et al. 2022 (docs/SEQUENCE_PARALLEL.md).

Usage:
    scripts/sp_activation_table.py SPMDC [--configs s,b,h,a,t;...] [--json OUT]

For each (s, b, h, a, t) the script exports a train step (joint forward +
backward, testdata/export_models.py's GPTBlock: LayerNorm, q/k/v/o
attention with the [b, a, s, s] scores materialized, 4h GELU MLP, no
dropout, fp32) of a stack of 1 and of 2 blocks with a mean-square loss,
compiles both with spmdc under Megatron TP (q, k, v, fc1 column-parallel,
o, fc2 row-parallel) and under TP + sequence parallelism on a mesh of t, and
takes the report's per_rank.saved_activation_bytes (the forward's tensors the
backward reads, local to one rank) of 2 blocks minus that of 1: one layer.
It prints that beside the paper's formulas, which count 2-byte activations
and 1-byte dropout masks:

    TP:      sbh (10 + 24/t + 5as/(ht))
    TP + SP: (sbh/t) (34 + 5as/h)

and beside the same count re-derived for this block (fp32, no dropout: the
paper's terms with 4-byte activations and without the masks and dropout
outputs): replicated LayerNorm inputs and the QKV/fc1 inputs 16sbh; per rank
Q, K, V 12sbh, softmax output 4as²b, o's input 4sbh, fc1 output and GELU
output 32sbh:

    TP:      16sbh + (48sbh + 4as²b)/t
    TP + SP: (64sbh + 4as²b)/t       (Megatron re-gathers the linears' inputs)

and beside spmdc's exact count, which adds what autograd saves besides and
keeps the gathered linear inputs under SP (no re-gather in the backward):
LayerNorm's mean and rstd 16sb (2 norms x 2 x sb x 4 B), the causal mask s²
(bool):

    TP:      16sbh + (48sbh + 4as²b)/t + 16sb + s²
    TP + SP: 8sbh + (56sbh + 4as²b + 16sb)/t + s²

--check exits 1 unless spmdc's figure equals that count in every row.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "testdata"))

DEFAULT = "128,2,64,4,2;128,2,64,4,4;256,1,128,8,2;256,1,128,8,4;512,1,64,2,2"


def paper(s, b, h, a, t, sp):
    return s * b * h / t * (34 + 5 * a * s / h) if sp else s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


def fp32_no_dropout(s, b, h, a, t, sp):
    """The paper's count for this block: fp32, no dropout (see the docstring)."""
    sbh = s * b * h
    return (64 * sbh + 4 * a * s * s * b) / t if sp else 16 * sbh + (48 * sbh + 4 * a * s * s * b) / t


def spmdc_model(s, b, h, a, t, sp):
    """What spmdc saves, term by term (see the docstring)."""
    sbh, asb = s * b * h, a * s * s * b
    if sp:
        return 8 * sbh + (56 * sbh + 4 * asb + 16 * s * b) / t + s * s
    return 16 * sbh + (48 * sbh + 4 * asb) / t + 16 * s * b + s * s


def export(out, layers, s, b, h, a):
    import torch
    import torch.nn as nn
    import export_models as em
    import spmdc_export

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(em.GPTBlock(d=h, heads=a) for _ in range(layers))

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return x.pow(2).mean()

    torch.manual_seed(0)
    spmdc_export.export_train_step(Stack(), [torch.randn(b, s, h)], out)


def schema(path, t, sp):
    doc = {"version": 1, "mesh": {"shape": [t], "axes": ["tp"]},
           "params": [{"match": "*attn.[qkv].weight", "placements": {"tp": "S(0)"}},
                      {"match": "*mlp.fc1.*", "placements": {"tp": "S(0)"}},
                      {"match": "*attn.o.weight", "placements": {"tp": "S(1)"}},
                      {"match": "*mlp.fc2.weight", "placements": {"tp": "S(1)"}}]}
    if sp:
        doc["sequence_parallel"] = "tp"
    with open(path, "w") as f:
        json.dump(doc, f)


def saved(spmdc, pt2, schema_path, tmp):
    rep = os.path.join(tmp, "r.json")
    subprocess.run([spmdc, "compile", pt2, "--schema", schema_path, "-o", os.path.join(tmp, "p.spmd"),
                    "--report", rep, "-q"], check=True, capture_output=True, text=True)
    with open(rep) as f:
        return json.load(f)["per_rank"]["saved_activation_bytes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("--configs", default=DEFAULT, help="s,b,h,a,t;... (or / between configs; default %(default)s)")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 unless spmdc's figures are the explained ones")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sp_act_") as tmp:
        for cfg in args.configs.replace("/", ";").split(";"):
            s, b, h, a, t = (int(x) for x in cfg.split(","))
            pts = {}
            for layers in (1, 2):
                out = os.path.join(tmp, f"m{cfg}-{layers}".replace(",", "_"))
                export(out, layers, s, b, h, a)
                pts[layers] = os.path.join(out, "model.pt2")
            row = {"s": s, "b": b, "h": h, "a": a, "t": t}
            for sp in (False, True):
                sch = os.path.join(tmp, "s.json")
                schema(sch, t, sp)
                per_layer = saved(args.spmdc, pts[2], sch, tmp) - saved(args.spmdc, pts[1], sch, tmp)
                key = "sp" if sp else "tp"
                row[key] = {"spmdc": per_layer, "paper_fp16": paper(s, b, h, a, t, sp),
                            "paper_fp32_no_dropout": fp32_no_dropout(s, b, h, a, t, sp),
                            "explained": spmdc_model(s, b, h, a, t, sp)}
            rows.append(row)
    print(f"{'s':>4} {'b':>2} {'h':>4} {'a':>2} {'t':>2} | {'mode':<5} {'spmdc':>10} {'paper fp16':>11} "
          f"{'paper fp32 no drop':>18} {'spmdc - that':>12} {'explained':>10}")
    bad = 0
    for r in rows:
        for key in ("tp", "sp"):
            v = r[key]
            same = v["spmdc"] == v["explained"]
            bad += not same
            print(f"{r['s']:>4} {r['b']:>2} {r['h']:>4} {r['a']:>2} {r['t']:>2} | {key.upper():<5} "
                  f"{v['spmdc']:>10,} {v['paper_fp16']:>11,.0f} {v['paper_fp32_no_dropout']:>18,.0f} "
                  f"{v['spmdc'] - v['paper_fp32_no_dropout']:>12,.0f} {'= ' if same else '!= '}{v['explained']:>8,.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
