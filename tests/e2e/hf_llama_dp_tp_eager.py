#!/usr/bin/env python3
"""A Hugging Face Llama with eager attention under dp x tp (2x2), against
eager PyTorch and Megatron's collective count.

Usage:
    hf_llama_dp_tp_eager.py SPMDC SPMD_RUN

transformers' eager attention multiplies [batch, heads, seq, seq] scores as
a bmm over batch and heads merged into one dim. With the batch on dp and
the heads on tp, that merged dim is split contiguously over dp and, inside
each dp shard, strided over tp ([S(0), S(0,sf=b/dp)]): the bmm must run on
that layout as it is, not all-gather its operands over tp.

A 2-layer LlamaForCausalLM (hidden 64, 4 heads, batch 4 x 16 tokens, random
weights, seed 0, `_attn_implementation = "eager"`) is exported as one train
step with spmdc_export (no optimizer) and compiled with the batch S(0) on dp
and Megatron's split on tp (q/k/v, gate, up column-parallel; o, down
row-parallel). Checked:

1. the --report lists Megatron's collectives only: no all-gather and no
   all-to-all; on tp exactly 4 all-reduces per layer (two in the forward,
   two in the backward), each of one [batch / dp, seq, hidden] activation;
2. spmd-run -n 4 gives eager PyTorch's loss and every gradient
   (expected.safetensors, written by spmdc_export from the eager module)
   within rel 1e-5.

Exit 77 (skip) without transformers, 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

LAYERS, HIDDEN, HEADS, BATCH, SEQ = 2, 64, 4, 4, 16
SCHEMA = {"version": 1, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]},
          "params": [{"match": "*self_attn.[qkv]_proj.weight", "placements": {"tp": "S(0)"}},
                     {"match": "*self_attn.o_proj.weight", "placements": {"tp": "S(1)"}},
                     {"match": "*mlp.gate_proj.weight", "placements": {"tp": "S(0)"}},
                     {"match": "*mlp.up_proj.weight", "placements": {"tp": "S(0)"}},
                     {"match": "*mlp.down_proj.weight", "placements": {"tp": "S(1)"}}],
          "inputs": [{"match": "*", "placements": {"dp": "S(0)"}}], "outputs": "replicate"}


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"hf_llama_dp_tp_eager: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def export(out):
    import torch
    from spmdc_export import core, hf
    torch.manual_seed(0)
    m = hf.build("llama", layers=LAYERS, hidden=HIDDEN, heads=HEADS, batch=BATCH, seq=SEQ, train=True,
                 attn="eager")
    expected = core.export_train_step(m.module, m.inputs, out, loss_fn=m.loss_fn, targets=m.targets, strict=False)
    return expected


def check_report(report, failures):
    cs = report.get("collectives", [])
    for c in cs:
        if c["kind"] in ("all_gather", "all_to_all"):
            failures.append(f"{c['kind']} of {c['value']} {c['shape']} {c['from']} -> {c['to']} ({c['reason']}): "
                            "not in Megatron's plan")
    tp = [c for c in cs if c["kind"] == "all_reduce" and c["mesh_axis"] == "tp"]
    if len(tp) != 4 * LAYERS:
        failures.append(f"{len(tp)} all-reduces on tp, Megatron's plan has {4 * LAYERS}")
    for c in tp:
        if c["shape"] != [BATCH // 2, SEQ, HIDDEN]:
            failures.append(f"all-reduce on tp of {c['value']} {c['shape']}, not a [{BATCH // 2}, {SEQ}, {HIDDEN}] "
                            "activation")
    print(f"dp x tp 2x2: {len(cs)} collectives ({len(tp)} all-reduces on tp), "
          f"{sum(c['bytes_per_rank'] for c in cs)} bytes per rank per step")


def check_step(d, out, failures):
    from safetensors.torch import load_file
    got, want = load_file(str(out)), load_file(str(d / "expected.safetensors"))
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            failures.append(f"no output '{name}'")
            continue
        err = float((got[name].double() - w.double()).abs().max()) / max(1e-12, float(w.double().abs().max()))
        worst = max(worst, err)
        if err > 1e-5:
            failures.append(f"{name} differs from eager by rel {err:.3g}")
    print(f"one step vs eager: {len(want)} outputs, worst rel {worst:.2g}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    spmdc, spmd_run = sys.argv[1:]
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("hf_llama_dp_tp_eager: skipped: transformers is not installed (scripts/setup.sh installs it)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-hf-eager-") as tmp:
        d = Path(tmp)
        export(d)
        (d / "s.json").write_text(json.dumps(SCHEMA))
        run([spmdc, "compile", d / "model.pt2", "--schema", d / "s.json", "-o", d / "p.spmd", "--report",
             d / "r.json", "-q"])
        check_report(json.loads((d / "r.json").read_text()), failures)
        run([spmd_run, "-n", 4, d / "p.spmd", "--inputs", d / "inputs.safetensors", "--output",
             d / "out.safetensors", "-q"])
        check_step(d, d / "out.safetensors", failures)
    for f in failures:
        print(f"FAIL {f}")
    print("hf_llama_dp_tp_eager: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
