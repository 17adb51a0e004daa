#!/usr/bin/env python3
"""A Hugging Face Llama train step under Megatron TP + sequence parallelism +
loss parallelism, against eager PyTorch.

Usage:
    hf_llama_sp_lp.py SPMDC SPMD_RUN [--worlds 2,4] [--steps 5] [--seq 16] [--json OUT]

With --seq 7 at tp 4 the sequence splits unevenly (2, 2, 2, 1): the
sequence-parallel regions, their reduce-scatters and all-gathers run on
torch.chunk pieces.

A 2-layer transformers LlamaForCausalLM (hidden 64, 4 heads, vocabulary 250:
uneven over 4 ranks, 63/63/63/61) with random weights (seed 0) is exported as
one train step with spmdc_export (cross-entropy over the logits). For every
tp degree the script compiles it twice with `--optimizer adamw`:

- "tp": plain Megatron TP: q/k/v, gate and up column-parallel, o and down
  row-parallel, the LM head replicated;
- "sp+lp": the same split plus `"sequence_parallel": "tp"` and a
  column-parallel LM head whose logits stay sharded (loss parallelism),

and checks, for "sp+lp":

1. the compile report says sequence parallelism and loss parallelism were
   applied, and the step has reduce-scatters (SP) and no all-gather of the
   [tokens, vocab] logits;
2. one step without the optimizer gives eager PyTorch's loss and gradients
   (expected.safetensors, written by spmdc_export from the eager module);
3. `--steps N` of AdamW give the losses of torch.optim.AdamW on the eager
   module (same hyper-parameters: lr 1e-3, betas 0.9/0.999, eps 1e-8, no
   weight decay), rel 1e-5;

and, for testdata's llama_train under the same SP + loss-parallel layout,
that --steps AdamW steps give one worker's losses; it prints, for both
layouts, the collectives and bytes per step and each
rank's measured peak memory (`spmd-run --profile`) beside the report's
estimate. Exit 77 (skip) without transformers, 1 on any mismatch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

CONFIG = dict(layers=2, hidden=64, heads=4, vocab=250, batch=2, seq=16)
TP_RULES = [
    {"match": "*self_attn.[qkv]_proj.weight", "placements": {"tp": "S(0)"}},
    {"match": "*self_attn.o_proj.weight", "placements": {"tp": "S(1)"}},
    {"match": "*mlp.gate_proj.weight", "placements": {"tp": "S(0)"}},
    {"match": "*mlp.up_proj.weight", "placements": {"tp": "S(0)"}},
    {"match": "*mlp.down_proj.weight", "placements": {"tp": "S(1)"}},
]
LM_HEAD = {"match": "lm_head.weight", "placements": {"tp": "S(0)"}}


def schema(tp, sp):
    s = {"version": 1, "mesh": {"shape": [tp], "axes": ["tp"]}, "params": list(TP_RULES), "outputs": "replicate"}
    if sp:
        s["sequence_parallel"] = "tp"
        s["params"].append(LM_HEAD)
    return s


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"hf_llama_sp_lp: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def export(out):
    """Exports the train step; returns the eager AdamW losses over --steps."""
    import torch
    from spmdc_export import core, hf
    torch.manual_seed(0)
    m = hf.build("llama", train=True, **CONFIG)
    state = {k: v.detach().clone() for k, v in m.module.state_dict().items()}
    core.export_train_step(m.module, m.inputs, out, loss_fn=m.loss_fn, targets=m.targets, strict=False)
    return m, state


def eager_adamw(m, state, steps):
    import torch
    m.module.load_state_dict(state)
    m.module.train()
    opt = torch.optim.AdamW(m.module.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = m.loss_fn(m.module(*m.inputs), *m.targets)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def collectives(report):
    kinds = {}
    for c in report.get("collectives", []):
        k = kinds.setdefault(c["kind"], [0, 0])
        k[0] += 1
        k[1] += c.get("bytes_per_rank", 0)
    return kinds


def check_one_step(a, d, tp, spmd_noopt, failures):
    """Loss and gradients of one step against eager (expected.safetensors)."""
    from safetensors.torch import load_file
    out = d / f"out{tp}.safetensors"
    run([a.spmd_run, "-n", tp, spmd_noopt, "--inputs", d / "inputs.safetensors", "--output", out, "-q"])
    got, want = load_file(str(out)), load_file(str(d / "expected.safetensors"))
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            failures.append(f"tp {tp}: no output '{name}'")
            continue
        err = float((got[name].double() - w.double()).abs().max()) / max(1e-12, float(w.double().abs().max()))
        worst = max(worst, err)
        if err > 1e-5:
            failures.append(f"tp {tp}: {name} differs from eager by rel {err:.3g}")
    return worst


def llama_train_sp_lp(a, d):
    """testdata's llama_train under llama_tp_sp.json plus a column-parallel
    head: --steps AdamW losses against one worker's (rel 1e-5)."""
    failures, pt2 = [], ROOT / "testdata" / "pt2" / "llama_train"
    inputs = pt2 / "inputs.safetensors"

    def losses(prog, n, tag):
        log = d / f"{tag}.log"
        run([a.spmd_run, "-n", n, prog, "--inputs", inputs, "--steps", a.steps, "--loss-log", log, "-q"])
        return [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    run([a.spmdc, "compile", pt2 / "model.pt2", "--schema", "dp", "--mesh", 1, "--optimizer", "adamw",
         "-o", d / "lt1.spmd", "-q"])
    one = losses(d / "lt1.spmd", 1, "lt1")
    for tp in [int(w) for w in a.worlds.split(",")]:
        s = json.loads((ROOT / "schemas" / "examples" / "llama_tp_sp.json").read_text())
        s["mesh"]["shape"] = [tp]
        s["params"].append({"match": "*out.weight", "placements": {"tp": "S(0)"}})
        (d / f"lt{tp}.json").write_text(json.dumps(s))
        r = run([a.spmdc, "compile", pt2 / "model.pt2", "--schema", d / f"lt{tp}.json", "--mesh", tp,
                 "--optimizer", "adamw", "-o", d / f"lt{tp}.spmd"])
        if "log-softmax on the class shards" not in r.stdout + r.stderr:
            failures.append(f"llama_train sp+lp tp {tp}: loss parallelism not applied")
        got = losses(d / f"lt{tp}.spmd", tp, f"lt{tp}")
        worst = max(abs(x - y) / abs(y) for x, y in zip(got, one))
        print(f"llama_train sp+lp tp {tp}: {a.steps} AdamW losses vs one worker: rel {worst:.2g}")
        if len(got) != a.steps or worst > 1e-5:
            failures.append(f"llama_train sp+lp tp {tp}: losses {got} vs one worker's {one}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--seq", type=int, default=CONFIG["seq"],
                    help="sequence length (one that does not divide the tp degree splits as torch.chunk)")
    a = ap.parse_args()
    CONFIG["seq"] = a.seq
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("hf_llama_sp_lp: skipped: transformers is not installed (scripts/setup.sh installs it)")
        return 77
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="spmdc-hf-sp-") as tmp:
        d = Path(tmp)
        m, state = export(d)
        eager = eager_adamw(m, state, a.steps)
        pt2 = d / "model.pt2"
        for tp in [int(w) for w in a.worlds.split(",")]:
            for mode in ("tp", "sp+lp"):
                tag = f"{mode.replace('+', '_')}{tp}"
                sfile = d / f"{tag}.json"
                sfile.write_text(json.dumps(schema(tp, mode == "sp+lp")))
                prog, rep = d / f"{tag}.spmd", d / f"{tag}.report.json"
                r = run([a.spmdc, "compile", pt2, "--schema", sfile, "--mesh", tp, "--optimizer", "adamw",
                         "-o", prog, "--report", rep])
                report = json.loads(rep.read_text())
                kinds = collectives(report)
                log, prof = d / f"{tag}.log", d / f"{tag}.prof.json"
                run([a.spmd_run, "-n", tp, prog, "--inputs", d / "inputs.safetensors", "--steps", a.steps,
                     "--loss-log", log, "--profile", prof, "-q"])
                losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
                worst = max(abs(x - y) / abs(y) for x, y in zip(losses, eager))
                if len(losses) != a.steps or worst > 1e-5:
                    failures.append(f"{mode} tp {tp}: AdamW losses {losses} differ from eager {eager} "
                                    f"(rel {worst:.3g})")
                peaks = [r_["peak_bytes"] for r_ in json.loads(prof.read_text())["ranks"]]
                row = {"mode": mode, "tp": tp, "collectives": kinds, "loss_rel_err": worst,
                       "peak_estimate": report["per_rank"]["peak_bytes_estimate"], "measured_peak": peaks}
                if mode == "sp+lp":
                    notes = r.stdout + r.stderr
                    for want in ("note: sequence parallelism on 'tp'", "log-softmax on the class shards"):
                        if want not in notes:
                            failures.append(f"sp+lp tp {tp}: the compile does not say '{want}'")
                    if "reduce_scatter" not in kinds:
                        failures.append(f"sp+lp tp {tp}: no reduce-scatter: sequence parallelism not applied")
                    logits = CONFIG["batch"] * CONFIG["seq"] * CONFIG["vocab"] * 4
                    big = [c for c in report.get("collectives", []) if c["kind"] == "all_gather"
                           and c.get("bytes_per_rank", 0) * tp >= logits * (tp - 1) // 2]
                    if big:
                        failures.append(f"sp+lp tp {tp}: the logits are gathered: {big[0]}")
                    noopt = d / f"{tag}.noopt.spmd"
                    run([a.spmdc, "compile", pt2, "--schema", sfile, "--mesh", tp, "-o", noopt, "-q"])
                    row["one_step_rel_err"] = check_one_step(a, d, tp, noopt, failures)
                rows.append(row)
        failures += llama_train_sp_lp(a, d)
    print(f"{'mode':6} {'tp':>2}  {'collectives (count/bytes per rank)':60} {'estimate':>10} "
          f"{'measured peak per rank':>30} loss rel err")
    for r_ in rows:
        kinds = ", ".join(f"{k} {n}/{b:,}" for k, (n, b) in sorted(r_["collectives"].items()))
        print(f"{r_['mode']:6} {r_['tp']:>2}  {kinds:60} {r_['peak_estimate']:>10,} "
              f"{' '.join(f'{p:,}' for p in r_['measured_peak']):>30} {r_['loss_rel_err']:.2g}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    for f in failures:
        print("FAIL:", f)
    print(f"hf_llama_sp_lp: {len(rows)} compiles, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
