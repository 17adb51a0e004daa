#!/usr/bin/env python3
"""Ring attention's load-balanced causal split ("context_parallel":
{"axis": "cp", "rotate": "ring", "load_balance": ...}) against eager
PyTorch, and the per-rank work it evens out.

Usage:
    cp_balance.py SPMDC SPMD_RUN [--json OUT]

The models of cp_llama.py (random weights, seed 0, batch 2, sequence 64,
hidden 64, 4 heads, 2 layers; expected.safetensors: eager PyTorch's loss
and gradients, or logits):

- sdpa_causal: train step of a Llama with F.scaled_dot_product_attention(
  is_causal=True), decomposed in the joint graph (spmdc_export's default
  --attention math: the causal mask built from aranges, which the ring pass
  recognizes: the ring op's causal flag);
- fused_causal_infer: its logits, aten.scaled_dot_product_attention kept
  (causal flag);
- eager_causal: its train step with eager attention and the mask
  full(-inf).triu(1) (decomposed in the joint graph: where(key - query >= 1,
  -inf, 0), which the ring pass recognizes: the causal flag, so load
  balance is on by default);
- hf_llama: transformers LlamaForCausalLM train step (its SDPA mask, built
  from positions with the packed-sequence check, decomposed: where(full(true)
  & (kv <= q) & (seq_id[q] == seq_id[kv]), 0, -inf), which the ring pass
  recognizes as causal since the positions are arange: the causal flag, the
  mask dropped, load balance on by default).

Each runs on spmd-run (gloo, CPU) at cp 2, cp 4 and dp 2 x cp 2, load
balance on (the default for causal attention) and, for the causal-flag
models, off. Fails when the loss, a gradient or the logits differ from
eager's by more than rel 1e-5 (max norm), when the compile's note does not
say load-balanced (or says it when off), or when a rank's
ring_attention_scores (spmd-run --profile: query rows x key rows x batch x
heads the ring kernels computed, forward and backward) differ from theory:
with the load-balanced split every rank computes c^2 (cp + 1) / 2 per
attention and pass (c = 64 / cp rows per rank), without it rank r computes
c^2 (r + 1). A sequence of 60 over cp 4 (not a multiple of 2 x 4) must be
refused in one line (exit 2) and compile with "load_balance": false;
"load_balance": true under "rotate": "allgather" (no load-balanced form
there) must be refused in one line.
Two programs the permuted order would break compile contiguously by
default (the note says why) and are refused in one line with
"load_balance": true: a loss that shifts its labels in the graph
(labels[:, 1:]; run against eager at cp 2 too) and parameters sharded on
the cp axis (fsdp over cp). bf16 models at cp 2 (fused logits, eager
attention train step, decomposed SDPA train step): keys and values cross
the ring in bf16, dK / dV in float32 (report = measured = theory), results
within rel 3e-2 of eager bf16.
"""
import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cp_llama  # noqa: E402  (the models, export, run, compare)
from cp_llama import core  # noqa: E402  (spmdc_export.core)

HEADS, LAYERS, S, B = cp_llama.HEADS, cp_llama.LAYERS, cp_llama.S, cp_llama.B


def schema(mesh, balance):
    s = cp_llama.schema(mesh)
    s["context_parallel"] = {"axis": "cp", "rotate": "ring"}
    if balance is not None:
        s["context_parallel"]["load_balance"] = balance
    return s


def theory(name, mesh, balanced):
    """Scores each rank computes per step, by cp coordinate."""
    cp, dp = mesh["cp"], mesh.get("dp", 1)
    c = S // cp
    passes = 1 if name.endswith("_infer") else 2
    unit = (B // dp) * HEADS * c * c * LAYERS * passes
    return [unit * (cp + 1) // 2] * cp if balanced else [unit * (r + 1) for r in range(cp)]


def check_case(a, d, name, mesh, balance, failures, rows):
    tag = f"{name}_" + "x".join(f"{k}{v}" for k, v in mesh.items()) + f"_lb{balance}"
    n = math.prod(mesh.values())
    sfile, prog, prof = d / f"{tag}.json", d / f"{tag}.spmd", d / f"{tag}.prof.json"
    sfile.write_text(json.dumps(schema(mesh, balance)))
    r = cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog])
    said = "load-balanced: rank r holds chunks r and" in r.stdout + r.stderr
    balanced = balance is not False
    if said != balanced:
        failures.append(f"{tag}: the compile's note {'does not say' if balanced else 'says'} load-balanced")
    out = d / f"{tag}.out.safetensors"
    cp_llama.run([a.spmd_run, "-n", n, prog, "--inputs", d / name / "inputs.safetensors", "--output", out, "-q",
                  "--profile", prof])
    worst, bad = cp_llama.compare(out, d / name / "expected.safetensors")
    failures.extend(f"{tag}: {b}" for b in bad)
    ranks = json.loads(prof.read_text())["ranks"]
    cp = mesh["cp"]
    # ranks are row-major over the mesh; cp is the last axis
    got = [ranks[i]["ring_attention_scores"] for i in range(cp)]
    want = theory(name, mesh, balanced)
    if got != want:
        failures.append(f"{tag}: ring_attention_scores per cp rank {got}, theory {want}")
    rows.append({"case": tag, "rel_err": worst, "scores_per_rank": got, "theory": want})
    print(f"{tag:36} rel {worst:.2g}  scores per cp rank {got}", flush=True)


def check_refusal(a, d, failures):
    cp_llama.export("sdpa_causal", d / "s60", seq=60)
    sfile = d / "s60.json"
    sfile.write_text(json.dumps(schema({"cp": 4}, None)))
    r = cp_llama.run([a.spmdc, "compile", d / "s60" / "model.pt2", "--schema", sfile, "-o", d / "s60.spmd"],
                     ok=(2,))
    err = (r.stderr + r.stdout).strip().splitlines()
    if len(err) != 1 or "does not split into 2 x 4 chunks" not in err[0] or (d / "s60.spmd").exists():
        failures.append(f"sequence 60 over cp 4: want one line saying 2 x 4 chunks, no output; got {err}")
    else:
        print("refused:", err[0])
    sfile.write_text(json.dumps(schema({"cp": 4}, False)))
    cp_llama.run([a.spmdc, "compile", d / "s60" / "model.pt2", "--schema", sfile, "-o", d / "s60.spmd", "-q"])
    # the all-gather form has no load-balanced split: asking for one is refused, not ignored
    s = schema({"cp": 2}, True)
    s["context_parallel"]["rotate"] = "allgather"
    sfile.write_text(json.dumps(s))
    r = cp_llama.run([a.spmdc, "compile", d / "sdpa_causal" / "model.pt2", "--schema", sfile, "-o", d / "ag.spmd"],
                     ok=(2,))
    err = (r.stderr + r.stdout).strip().splitlines()
    if len(err) != 1 or "load_balance" not in err[0] or "ring" not in err[0] or (d / "ag.spmd").exists():
        failures.append(f"allgather with load_balance true: want one line naming rotate ring, no output; got {err}")
    else:
        print("refused:", err[0])


class ShiftedLoss(torch.nn.Module):
    """sdpa_causal's Llama with the labels shifted inside the graph."""

    def __init__(self, llama):
        super().__init__()
        self.llama = llama

    def forward(self, tokens, labels):
        logits = self.llama.logits(tokens)
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def check_not_balanced(a, d, failures):
    """Programs load balance would break: off by default (the note says
    why, results still eager's), refused with "load_balance": true."""
    torch.manual_seed(0)
    tokens, labels = torch.randint(0, cp_llama.VOCAB, (B, S)), torch.randint(0, cp_llama.VOCAB, (B, S))
    core.export_train_step(ShiftedLoss(cp_llama.Llama("sdpa", True, S)), (tokens, labels), d / "shifted")
    fsdp = schema({"cp": 2}, None)
    fsdp["preset"] = "fsdp"  # parameters sharded on the only axis, cp
    cases = [("shifted", schema({"cp": 2}, None), "shifts or reorders a sequence input"),
             ("sdpa_causal", fsdp, "parameters are sharded on 'cp'")]
    for name, s, why in cases:
        sfile, prog = d / f"nb_{name}.json", d / f"nb_{name}.spmd"
        sfile.write_text(json.dumps(s))
        r = cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog])
        if "not load-balanced: " not in r.stdout + r.stderr or why not in r.stdout + r.stderr:
            failures.append(f"{name} ({why}): the note does not say not load-balanced and why")
        if name == "shifted":
            out = d / "nb_shifted.out.safetensors"
            cp_llama.run([a.spmd_run, "-n", 2, prog, "--inputs", d / name / "inputs.safetensors", "--output", out,
                          "-q"])
            worst, bad = cp_llama.compare(out, d / name / "expected.safetensors")
            failures.extend(f"shifted labels, cp 2: {b}" for b in bad)
            print(f"shifted labels, cp 2 (contiguous)   rel {worst:.2g}")
        s["context_parallel"]["load_balance"] = True
        sfile.write_text(json.dumps(s))
        r = cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", d / "nb.spmd"],
                         ok=(2,))
        err = (r.stderr + r.stdout).strip().splitlines()
        if len(err) != 1 or "load_balance" not in err[0] or (d / "nb.spmd").exists():
            failures.append(f"{name} with load_balance true: want one line, no output; got {err}")
        else:
            print("refused:", err[0])


def check_hf_packed(a, d, failures, rows):
    """transformers' Llama given position_ids (two packed sequences of S/2
    per row): its mask reads the input (the packed-sequence check), so it
    must stay a mask operand (not causal: every block computed, not
    load-balanced) and give eager's block-diagonal attention at cp 2."""
    from spmdc_export import hf
    torch.manual_seed(0)
    m = hf.build("llama", train=True, layers=LAYERS, hidden=cp_llama.D, heads=HEADS, vocab=cp_llama.VOCAB, batch=B,
                 seq=S)
    base = type(m.module).__mro__[1]

    def forward(self, input_ids, position_ids):
        return base.forward(self, input_ids=input_ids, position_ids=position_ids).logits

    m.module.__class__ = type(base.__name__, (base,), {"forward": forward, "__module__": base.__module__})
    pos = torch.arange(S // 2).repeat(2).expand(B, S).contiguous()
    core.export_train_step(m.module, (m.inputs[0], pos), d / "hf_packed", loss_fn=m.loss_fn, targets=m.targets,
                           strict=False)
    sfile, prog, prof = d / "hf_packed.json", d / "hf_packed.spmd", d / "hf_packed.prof.json"
    sfile.write_text(json.dumps(schema({"cp": 2}, None)))
    r = cp_llama.run([a.spmdc, "compile", d / "hf_packed" / "model.pt2", "--schema", sfile, "-o", prog])
    if "load-balanced: rank r holds" in r.stdout + r.stderr:
        failures.append("hf_packed: the compile's note says load-balanced for a mask read from position_ids")
    out = d / "hf_packed.out.safetensors"
    cp_llama.run([a.spmd_run, "-n", 2, prog, "--inputs", d / "hf_packed" / "inputs.safetensors", "--output", out,
                  "-q", "--profile", prof])
    worst, bad = cp_llama.compare(out, d / "hf_packed" / "expected.safetensors")
    failures.extend(f"hf_packed cp 2: {b}" for b in bad)
    got = [r["ring_attention_scores"] for r in json.loads(prof.read_text())["ranks"]]
    want = [B * HEADS * (S // 2) ** 2 * LAYERS * 2 * 2] * 2  # every block: a mask operand
    if got != want:
        failures.append(f"hf_packed: ring_attention_scores per rank {got}, want every block {want}")
    rows.append({"case": "hf_packed_cp2", "rel_err": worst, "scores_per_rank": got, "theory": want})
    print(f"{'hf_packed_cp2 (position_ids input)':36} rel {worst:.2g}  scores per cp rank {got}", flush=True)


def check_bf16(a, d, failures):
    """bf16 models: keys and values cross the ring in bf16 (half the bytes
    of float32), the travelling dK / dV in float32 (torch's
    convert_to_f32); results within bf16 tolerance of eager bf16. The SDPA
    train step's decomposition upcasts q, k and v to float32 before the
    scores and scales k by 64^-1/4 (not a power of two); the ring still
    sends its K and V as bf16 (kv_dtype, key_scale)."""
    torch.manual_seed(0)
    tokens, labels = torch.randint(0, cp_llama.VOCAB, (B, S)), torch.randint(0, cp_llama.VOCAB, (B, S))
    core.export(cp_llama.Logits(cp_llama.Llama("sdpa", True, S)).to(torch.bfloat16), (tokens,), d / "bf16_infer",
                decompose=False)
    torch.manual_seed(0)
    core.export_train_step(cp_llama.Llama("eager", True, S).to(torch.bfloat16), (tokens, labels), d / "bf16_train")
    torch.manual_seed(0)  # SDPA decomposed: float32 casts of the bf16 q, k, v, then k * 64^-1/4 (one head of 64)
    core.export_train_step(cp_llama.Llama("sdpa", True, S, heads=1).to(torch.bfloat16), (tokens, labels),
                           d / "bf16_sdpa_train")
    kv = 2 * B * HEADS * (S // 2) * (cp_llama.D // HEADS)  # K and V elements per rank at cp 2
    train = [(1, 2 * kv, 0), (1, 2 * kv, 2 * 4 * kv)]
    for name, sends in (("bf16_infer", [(1, 2 * kv, 0)]), ("bf16_train", train), ("bf16_sdpa_train", train)):
        sfile, prog, rep = d / f"{name}.json", d / f"{name}.spmd", d / f"{name}.report.json"
        sfile.write_text(json.dumps(schema({"cp": 2}, None)))
        cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog, "--report", rep,
                      "-q"])
        report = json.loads(rep.read_text())
        planned = sum(c["bytes_per_rank"] for c in report["collectives"])
        theory = LAYERS * sum(n * kvb + g for n, kvb, g in sends)
        got = report["ring_attention"]["bytes_per_rank"]
        f32 = LAYERS * sum(n * 2 * kvb + g for n, kvb, g in sends)  # the same ring exchanging float32 K / V
        out, prof = d / f"{name}.out.safetensors", d / f"{name}.prof.json"
        cp_llama.run([a.spmd_run, "-n", 2, prog, "--inputs", d / name / "inputs.safetensors", "--output", out, "-q",
                      "--profile", prof])
        measured = [r["bytes_sent"] - planned for r in json.loads(prof.read_text())["ranks"]]
        if got != theory or measured != [theory] * 2:
            failures.append(f"{name}: ring bytes per rank report {got:,}, measured {measured}, theory {theory:,}")
        worst, bad = cp_llama.compare(out, d / name / "expected.safetensors", tol=3e-2)
        failures.extend(f"{name} cp 2 (bf16 tolerance 3e-2): {b}" for b in bad)
        print(f"{name:36} rel {worst:.2g}  ring bytes/rank {got:,} (float32 K/V: {f32:,}, {got / f32:.2f}x)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("cp_balance: skipped: transformers is not installed")
        return 77
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="spmdc-cplb-") as tmp:
        d = Path(tmp)
        for name in ("sdpa_causal", "eager_causal", "fused_causal_infer", "hf_llama"):
            cp_llama.export(name, d / name)
        for mesh in ({"cp": 2}, {"cp": 4}, {"dp": 2, "cp": 2}):
            for name in ("sdpa_causal", "fused_causal_infer"):
                check_case(a, d, name, mesh, None, failures, rows)
        for mesh in ({"cp": 2}, {"cp": 4}):
            for name in ("sdpa_causal", "fused_causal_infer"):
                check_case(a, d, name, mesh, False, failures, rows)
        check_case(a, d, "eager_causal", {"cp": 2}, None, failures, rows)
        check_case(a, d, "hf_llama", {"cp": 2}, None, failures, rows)
        check_case(a, d, "hf_llama", {"cp": 4}, None, failures, rows)
        check_case(a, d, "hf_llama", {"dp": 2, "cp": 2}, None, failures, rows)
        check_hf_packed(a, d, failures, rows)
        check_refusal(a, d, failures)
        check_not_balanced(a, d, failures)
        check_bf16(a, d, failures)
    return cp_llama.finish(a.json, rows, failures)


if __name__ == "__main__":
    sys.exit(main())
