#!/usr/bin/env python3
"""Activation checkpointing (the schema's "recompute") against PyTorch's
torch.utils.checkpoint.

Usage:
    recompute_vs_checkpoint.py SPMDC SPMD_RUN [--layers 4] [--world 2]

A transformers LlamaForCausalLM (4 layers, hidden 64, random weights, seed
0) is exported as one train step with spmdc_export. PyTorch computes the
step's loss and gradients three ways on the eager module: plain, with
torch.utils.checkpoint around every decoder layer (transformers'
gradient_checkpointing_enable, non-reentrant), and with a selective policy
(create_selective_checkpoint_contexts saving aten.mm). spmdc compiles the
step under dp, fsdp and Megatron TP at --world ranks, each with
"recompute" none, {"model.layers.*": "full"} and {"model.layers.*":
{"save": ["aten.mm"]}}, and runs one step on --world workers. Checked:

1. every run's loss and gradients equal the matching PyTorch reference
   within 1e-6 (relative to each tensor's largest value), and each
   recompute run is bit-identical to the same layout without recompute
   (recomputation repeats the forward's ops on the forward's inputs);
2. the compile notes report recomputation, and the saved activations per
   rank fall: full checkpointing to at most half of none, selective
   between the two;
3. bad input: a glob that matches no module, and a train step whose ops
   carry no module paths (testdata's llama_train, exported by torch's
   route), are refused with one line and exit code 2;
4. "auto" under --memory-budget, on a longer sequence (batch 4 x 128
   tokens, so that activations dominate): a budget above the peak without
   recomputation recomputes nothing; budgets at 90% and 75% of the way
   from full recomputation's peak to none's get a plan whose estimated peak
   fits, recomputing no more ops than full recomputation, whose measured
   peak (spmd-run --profile, every rank) is within the budget, and whose
   step is bit-identical to the plain one; a budget below full recomputation's
   peak is refused naming the smallest peak found; no budget is refused;
5. testdata/export_models.py's hand-written Llama train step (the model of
   testdata's llama_train) exported by spmdc_export's one-pass route, with
   "layers.*" full under dp and llama_tp.json at 2 ranks and 2x2 dp x tp
   on 4: loss and gradients against torch.utils.checkpoint around each
   layer (1e-6), bit-identical to no recompute.

With --only gpt_block (ctest recompute_gpt_block): two of testdata's
GPTBlocks with an MSE loss, under dp, fsdp and Megatron TP, each with no,
full and selective ({"save": ["aten.mm", "aten.addmm"]}) recompute per
block, against torch.utils.checkpoint and
create_selective_checkpoint_contexts (1e-6) and bit-identical to no
recompute; saved activations none > selective > full.

Exit 1 on any failure (77, a skip, without transformers: scripts/test.sh
turns it into a failure).
"""
import argparse
import functools
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

CONFIG = dict(layers=4, hidden=64, heads=4, vocab=256, batch=2, seq=16)
from hf_llama_sp_lp import TP_RULES  # noqa: E402  (the same Megatron split of the same model)
POLICIES = {"none": None, "full": "full", "selective": {"save": ["aten.mm"]}}


def run(cmd, ok=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"recompute_vs_checkpoint: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def references(m):
    """{policy: {name: tensor}}: eager loss and gradients without
    checkpointing, with torch.utils.checkpoint per layer, and selective."""
    import torch
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    state = {k: v.detach().clone() for k, v in m.module.state_dict().items()}
    kwargs = {
        "none": None,
        "full": {"use_reentrant": False},
        "selective": {"use_reentrant": False, "context_fn": functools.partial(
            create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])},
    }
    out = {}
    for policy, kw in kwargs.items():
        m.module.load_state_dict(state)
        m.module.train()
        if kw is None:
            m.module.gradient_checkpointing_disable()
        else:
            m.module.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        m.module.zero_grad(set_to_none=True)
        loss = m.loss_fn(m.module(*m.inputs), *m.targets)
        loss.backward()
        ref = {"loss": loss.detach().clone()}
        ref.update({f"grad.{k}": p.grad.detach().clone() for k, p in m.module.named_parameters()
                    if p.grad is not None})
        out[policy] = ref
    m.module.gradient_checkpointing_disable()
    return out


def schema(layout, world, policy):
    s = {"version": 1}
    if layout == "tp":
        s.update({"mesh": {"shape": [world], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"})
    else:
        s["preset"] = layout
    if POLICIES[policy] is not None:
        s["recompute"] = {"model.layers.*": POLICIES[policy]}
    return s


def saved_bytes(notes):
    for n in notes:
        m = re.search(r"saved activations ([\d,]+) -> ([\d,]+) B/rank", n)
        if m:
            return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    return None


def compare(got, want, tag, failures, tol=1e-6):
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            failures.append(f"{tag}: no output '{name}'")
            continue
        err = float((g.double() - w.double()).abs().max()) / max(1e-12, float(w.double().abs().max()))
        if err > tol:
            failures.append(f"{tag}: {name} differs from PyTorch by rel {err:.3g}")


def collectives_note(notes):
    """(count, "saved" or "re-issued") of the recompute note's collectives of activations."""
    for n in notes:
        m = re.search(r"; (\d+) collectives of activations (saved|re-issued)", n)
        if m:
            return int(m.group(1)), m.group(2)
    return None


def check_layout(a, d, layout, refs, failures):
    """Each policy under `layout`; under Megatron TP also full recompute with
    the all-reduces re-issued (--recompute-collectives reissue) against the
    same torch.utils.checkpoint reference."""
    from safetensors.torch import load_file
    outs, saved, notes = {}, {}, {}
    variants = [(p, p, []) for p in POLICIES]
    if layout == "tp":
        variants.append(("full-reissue", "full", ["--recompute-collectives", "reissue"]))
    for policy, ref, extra in variants:
        tag = f"{layout}/{policy}"
        sfile, prog, rep, out = (d / f"{layout}_{policy}{ext}" for ext in (".json", ".spmd", ".report.json",
                                                                            ".out.safetensors"))
        sfile.write_text(json.dumps(schema(layout, a.world, ref)))
        run([a.spmdc, "compile", d / "model.pt2", "--schema", sfile, "--mesh", a.world, "-o", prog,
             "--report", rep, "-q", *extra])
        report = json.loads(rep.read_text())
        saved[policy] = saved_bytes(report.get("notes", []))
        notes[policy] = collectives_note(report.get("notes", []))
        if policy != "none" and saved[policy] is None:
            failures.append(f"{tag}: the compile notes say nothing of recomputation: {report.get('notes')}")
        run([a.spmd_run, "-n", a.world, prog, "--inputs", d / "inputs.safetensors", "--output", out, "-q"])
        outs[policy] = load_file(str(out))
        compare(outs[policy], refs[ref], tag, failures)
        if policy != "none":
            for name, t in outs["none"].items():
                if not outs[policy][name].equal(t):
                    failures.append(f"{tag}: {name} is not bit-identical to the run without recompute")
    if layout == "tp":
        check_reissue(saved, notes, failures)
    full, sel = saved["full"], saved["selective"]
    if full and sel:
        before = full[0]
        print(f"{layout}: saved activations per rank: none {before:,} B, selective {sel[1]:,} B, full {full[1]:,} B")
        if not full[1] * 2 <= before:
            failures.append(f"{layout}: full recompute keeps {full[1]:,} of {before:,} B saved (want <= half)")
        if not full[1] < sel[1] < before:
            failures.append(f"{layout}: selective keeps {sel[1]:,} B, not between full {full[1]:,} and {before:,}")


def check_reissue(saved, notes, failures):
    """Megatron TP: by default a recomputed layer keeps its all-reduced
    values; re-issued, the same all-reduces run again and keep fewer bytes."""
    kept, again = notes.get("full"), notes.get("full-reissue")
    print(f"tp: collectives of activations with full recompute: default {kept}, --recompute-collectives "
          f"reissue {again}; saved {saved['full'][1]:,} vs {saved['full-reissue'][1]:,} B/rank")
    if not kept or kept[1] != "saved" or not again or again[1] != "re-issued" or kept[0] != again[0]:
        failures.append(f"tp: the notes do not count the same all-reduces saved by default and re-issued: "
                        f"{kept} / {again}")
    elif not saved["full-reissue"][1] < saved["full"][1]:
        failures.append(f"tp: re-issuing the all-reduces keeps {saved['full-reissue'][1]:,} B, not less than "
                        f"saving them ({saved['full'][1]:,} B)")


def check_refusals(a, d, failures):
    bad = d / "bad.json"
    bad.write_text(json.dumps({"version": 1, "preset": "dp", "recompute": {"model.layayers.*": "full"}}))
    cases = [("a glob matching no module", d / "model.pt2", "did you mean 'model.layers.*'"),
             ("a train step without module paths", ROOT / "testdata" / "pt2" / "llama_train" / "model.pt2",
              "spmdc_export --train")]
    r = run([a.spmdc, "compile", d / "model.pt2", "--schema", "dp", "--mesh", a.world, "--memory-budget", "1GiB",
             "-o", d / "bad.spmd"], ok=False)
    if r.returncode != 2 or "applies to --schema auto, or to a schema with" not in r.stderr:
        failures.append(f"--memory-budget without auto: exit {r.returncode}, {r.stderr.strip()!r}")
    for what, pt2, want in cases:
        r = run([a.spmdc, "compile", pt2, "--schema", bad if "glob" in what else d / "nopaths.json", "--mesh",
                 a.world, "-o", d / "bad.spmd"], ok=False)
        err = r.stderr.strip()
        if r.returncode != 2 or want not in err or len(err.splitlines()) != 1 or (d / "bad.spmd").exists():
            failures.append(f"{what}: exit {r.returncode}, stderr {err!r} (want exit 2, one line with {want!r})")


def peak_and_note(a, d, sfile, extra=()):
    """(exit code, estimated peak, recompute note, stderr) of one compile."""
    rep = d / "auto.report.json"
    rep.unlink(missing_ok=True)
    r = run([a.spmdc, "compile", d / "model.pt2", "--schema", sfile, "--mesh", a.world, "-o", d / "auto.spmd",
             "--report", rep, "-q", *extra], ok=False)
    if r.returncode != 0:
        return r.returncode, None, None, r.stderr.strip()
    report = json.loads(rep.read_text())
    note = next((n for n in report["notes"] if n.startswith("recompute:")), "")
    return 0, report["per_rank"]["peak_bytes_estimate"], note, ""


def ops_of(note):
    m = re.search(r"recompute: (\d+) ops", note or "")
    return int(m.group(1)) if m else -1


def check_auto(a, d, failures):
    from safetensors.torch import load_file
    files = {}
    for policy, how in (("none", "none"), ("full", "full"), ("auto", "auto")):
        files[policy] = d / f"long_{policy}.json"
        files[policy].write_text(json.dumps({"version": 1, "preset": "dp", "recompute": {"model.layers.*": how}}))
    _, none, _, _ = peak_and_note(a, d, files["none"])
    _, full, full_note, _ = peak_and_note(a, d, files["full"])
    print(f"auto: estimated peak per rank without recomputation {none:,} B, with full {full:,} B")
    if not full < none:
        failures.append(f"auto: full recomputation does not lower the peak ({full:,} vs {none:,} B)")
        return
    plain = d / "long_plain.spmd"
    run([a.spmdc, "compile", d / "model.pt2", "--schema", "dp", "--mesh", a.world, "-o", plain, "-q"])
    run([a.spmd_run, "-n", a.world, plain, "--inputs", d / "inputs.safetensors", "--output", d / "plain.st", "-q"])
    want = load_file(str(d / "plain.st"))
    for label, budget in (("above", none + none // 100), ("90%", full + (none - full) * 9 // 10),
                          ("75%", full + (none - full) * 3 // 4)):
        rc, peak, note, err = peak_and_note(a, d, files["auto"], ["--memory-budget", str(budget)])
        print(f"auto at {label} ({budget:,} B): {note or err}")
        if rc != 0 or peak > budget:
            failures.append(f"auto at {label}: exit {rc}, estimated peak {peak} over the budget {budget:,}: {err}")
            continue
        if label == "above" and ops_of(note) != 0:
            failures.append(f"auto above the plain peak recomputed something: {note}")
        if not 0 <= ops_of(note) <= ops_of(full_note):
            failures.append(f"auto at {label}: {ops_of(note)} ops recomputed, full recomputes {ops_of(full_note)}")
        prof = d / "auto.prof.json"
        run([a.spmd_run, "-n", a.world, d / "auto.spmd", "--inputs", d / "inputs.safetensors", "--output",
             d / "auto.st", "--profile", prof, "-q"])
        measured = [r["peak_bytes"] for r in json.loads(prof.read_text())["ranks"]]
        print(f"auto at {label}: measured peak per rank {measured} B")
        if max(measured) > budget:
            failures.append(f"auto at {label}: a rank's measured peak {max(measured):,} B is over the budget {budget:,}")
        got = load_file(str(d / "auto.st"))
        if any(not got[k].equal(t) for k, t in want.items()):
            failures.append(f"auto at {label}: the step is not bit-identical to the plain one")
    for label, extra, text in (("below full", ["--memory-budget", str(full - 1)], f"smallest estimated peak is {full:,}"),
                               ("no budget", [], "give --memory-budget")):
        rc, _, _, err = peak_and_note(a, d, files["auto"], extra)
        if rc != 2 or text not in err or len(err.splitlines()) != 1:
            failures.append(f"auto {label}: exit {rc}, {err!r} (want exit 2 and one line with {text!r})")


def hand_llama(a, failures):
    import torch
    from safetensors.torch import load_file
    from torch.utils.checkpoint import checkpoint
    from spmdc_export import core
    sys.path.insert(0, str(ROOT / "testdata"))
    import export_models
    torch.manual_seed(0)
    mod = export_models.LlamaLoss()
    tok, lab = torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))
    plain_forwards = [layer.forward for layer in mod.model.layers]
    for layer, f in zip(mod.model.layers, plain_forwards):
        layer.forward = lambda *args, _f=f: checkpoint(_f, *args, use_reentrant=False)
    loss = mod(tok, lab)
    loss.backward()
    want = {"loss": loss.detach()}
    want.update({f"grad.{k}": p.grad.detach().clone() for k, p in mod.named_parameters()})
    for layer, f in zip(mod.model.layers, plain_forwards):
        layer.forward = f
    mod.zero_grad(set_to_none=True)
    tp = json.loads((ROOT / "schemas" / "examples" / "llama_tp.json").read_text())
    with tempfile.TemporaryDirectory(prefix="spmdc-recompute-hand-") as tmp:
        d = Path(tmp)
        core.export_train_step(mod, (tok, lab), d)
        for tag, n, mesh, base in (("dp", 2, None, {"preset": "dp"}), ("tp", 2, None, tp),
                                   ("dp x tp", 4, [2, 2], {**tp, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]},
                                                           "inputs": [{"match": "*", "placements": {"dp": "S(0)"}}]})):
            outs = {}
            for policy in ("none", "full"):
                s_ = {k: v for k, v in base.items() if k != "$schema"}
                s_["version"] = 1
                if mesh is None:
                    s_["mesh"] = {"shape": [n], "axes": s_["mesh"]["axes"] if "mesh" in s_ else ["dp"]}
                if policy == "full":
                    s_["recompute"] = {"model.layers.*": "full"}
                sfile, prog, out = d / f"s_{policy}.json", d / f"p_{policy}.spmd", d / f"o_{policy}.st"
                sfile.write_text(json.dumps(s_))
                run([a.spmdc, "compile", d / "model.pt2", "--schema", sfile, "-o", prog, "-q"])
                run([a.spmd_run, "-n", n, prog, "--inputs", d / "inputs.safetensors", "--output", out, "-q"])
                outs[policy] = load_file(str(out))
            compare(outs["full"], want, f"hand llama {tag}/full", failures)
            if any(not outs["full"][k].equal(t) for k, t in outs["none"].items()):
                failures.append(f"hand llama {tag}: full recompute is not bit-identical to none")
            print(f"hand llama {tag}: full recompute matches torch.utils.checkpoint")


GPT_TP_RULES = [  # schemas/examples/gpt_block_tp.json's Megatron split, per block of the stack
    {"match": "blocks.*.attn.[qkv].weight", "placements": {"tp": "S(0)"}},
    {"match": "blocks.*.attn.o.weight", "placements": {"tp": "S(1)"}},
    {"match": "blocks.*.mlp.fc1.*", "placements": {"tp": "S(0)"}},
    {"match": "blocks.*.mlp.fc2.weight", "placements": {"tp": "S(1)"}},
]
GPT_SAVE = ["aten.mm", "aten.addmm"]  # the matmuls of the block: bias-free attention projections and the MLP's


def gpt_references(mod, x, y):
    """{policy: {name: tensor}}: the eager step with no checkpointing,
    torch.utils.checkpoint around each block, and a selective policy
    (create_selective_checkpoint_contexts saving aten.mm and aten.addmm)."""
    import torch
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
    ops = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]
    kwargs = {"none": None, "full": {"use_reentrant": False},
              "selective": {"use_reentrant": False,
                            "context_fn": functools.partial(create_selective_checkpoint_contexts, ops)}}
    plain = [b.forward for b in mod.blocks]
    out = {}
    for policy, kw in kwargs.items():
        for b, f in zip(mod.blocks, plain):
            b.forward = f if kw is None else (lambda *args, _f=f, _kw=kw: checkpoint(_f, *args, **_kw))
        mod.zero_grad(set_to_none=True)
        loss = mod(x, y)
        loss.backward()
        out[policy] = {"loss": loss.detach().clone()}
        out[policy].update({f"grad.{k}": p.grad.detach().clone() for k, p in mod.named_parameters()})
    for b, f in zip(mod.blocks, plain):
        b.forward = f
    mod.zero_grad(set_to_none=True)
    return out


def gpt_block(a, failures):
    """testdata's GPTBlock (pre-LN, eager causal attention, GELU MLP), two
    of them with an MSE loss, under dp, fsdp and Megatron TP (gpt_block_tp's
    split) at --world ranks with no, full and selective recompute of each
    block: loss and gradients against torch.utils.checkpoint within 1e-6,
    and bit-identical to the same layout without recompute."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from safetensors.torch import load_file
    from spmdc_export import core
    sys.path.insert(0, str(ROOT / "testdata"))
    import export_models

    class GPTStack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(export_models.GPTBlock() for _ in range(2))

        def forward(self, x, y):
            for b in self.blocks:
                x = b(x)
            return F.mse_loss(x, y)

    torch.manual_seed(0)
    mod = GPTStack()
    x, y = torch.randn(4, 16, 64), torch.randn(4, 16, 64)
    refs = gpt_references(mod, x, y)
    policies = {"none": None, "full": "full", "selective": {"save": GPT_SAVE}}
    with tempfile.TemporaryDirectory(prefix="spmdc-recompute-gpt-") as tmp:
        d = Path(tmp)
        core.export_train_step(mod, (x, y), d)
        for layout in ("dp", "fsdp", "tp"):
            outs, saved = {}, {}
            for policy, how in policies.items():
                s_ = {"version": 1}
                if layout == "tp":
                    s_.update({"mesh": {"shape": [a.world], "axes": ["tp"]}, "params": GPT_TP_RULES,
                               "outputs": "replicate"})
                else:
                    s_["preset"] = layout
                if how is not None:
                    s_["recompute"] = {"blocks.*": how}
                tag = f"gpt_block {layout}/{policy}"
                sfile, prog, rep, out = (d / f"g_{layout}_{policy}{e}" for e in (".json", ".spmd", ".rep.json", ".st"))
                sfile.write_text(json.dumps(s_))
                run([a.spmdc, "compile", d / "model.pt2", "--schema", sfile, "--mesh", a.world, "-o", prog,
                     "--report", rep, "-q"])
                saved[policy] = saved_bytes(json.loads(rep.read_text()).get("notes", []))
                if how is not None and saved[policy] is None:
                    failures.append(f"{tag}: the compile notes say nothing of recomputation")
                run([a.spmd_run, "-n", a.world, prog, "--inputs", d / "inputs.safetensors", "--output", out, "-q"])
                outs[policy] = load_file(str(out))
                compare(outs[policy], refs[policy], tag, failures)
                if how is not None and any(not outs[policy][k].equal(t) for k, t in outs["none"].items()):
                    failures.append(f"{tag}: not bit-identical to the run without recompute")
            full, sel = saved["full"], saved["selective"]
            if full and sel:
                print(f"gpt_block {layout}: saved activations per rank: none {full[0]:,} B, "
                      f"selective {sel[1]:,} B, full {full[1]:,} B; loss and gradients match torch.utils.checkpoint")
                if not full[1] < sel[1] < full[0]:
                    failures.append(f"gpt_block {layout}: saved activations not none > selective > full: "
                                    f"{full[0]:,} / {sel[1]:,} / {full[1]:,} B")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--layers", type=int, default=CONFIG["layers"])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--only", choices=["gpt_block"], help="run only this model's checks (its own ctest)")
    a = ap.parse_args()
    CONFIG["layers"] = a.layers
    try:
        import torch
        from spmdc_export import core, hf
    except ImportError as e:
        print(f"recompute_vs_checkpoint: skipped: {e} (scripts/setup.sh installs it)")
        return 77
    failures = []
    if a.only == "gpt_block":
        gpt_block(a, failures)
        for f in failures:
            print("FAIL", f)
        print(f"recompute_vs_checkpoint --only gpt_block: {'FAILED' if failures else 'ok'}")
        return 1 if failures else 0
    with tempfile.TemporaryDirectory(prefix="spmdc-recompute-") as tmp:
        d = Path(tmp)
        torch.manual_seed(0)
        m = hf.build("llama", train=True, **CONFIG)
        refs = references(m)
        core.export_train_step(m.module, m.inputs, d, loss_fn=m.loss_fn, targets=m.targets)
        (d / "nopaths.json").write_text(json.dumps({"version": 1, "preset": "dp",
                                                    "recompute": {"layers.*": "full"}}))
        for layout in ("dp", "fsdp", "tp"):
            check_layout(a, d, layout, refs, failures)
        check_refusals(a, d, failures)
    hand_llama(a, failures)
    with tempfile.TemporaryDirectory(prefix="spmdc-recompute-auto-") as tmp:
        d = Path(tmp)
        torch.manual_seed(0)
        m = hf.build("llama", train=True, **{**CONFIG, "batch": 4, "seq": 128})
        core.export_train_step(m.module, m.inputs, d, loss_fn=m.loss_fn, targets=m.targets)
        check_auto(a, d, failures)
    for f in failures:
        print("FAIL", f)
    print(f"recompute_vs_checkpoint: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
