#!/usr/bin/env python3
"""Weights by reference: a Hugging Face checkpoint folder exported without
its weights, compiled into programs that point at its files, run on CPU
workers against transformers' from_pretrained.

Usage:
    weights_by_reference.py SPMDC SPMD_RUN [--layers 2] [--hidden 64] [--intermediate 2*hidden] [--heads 4]
        [--kv-heads 2] [--vocab 256] [--batch 4] [--seq 16] [--fsdp-ranks 4] [--shard-size 40KB]
        [--checks layouts,embed,float32,train,mixed,bad] [--mixed-layout fsdp2[,fsdp4,tp2,tp4,dp2xtp2]]

CI runs it twice: at these defaults (about 100k parameters) and at
--layers 8 --hidden 768 --vocab 32000 --shard-size 50MB (91M parameters,
183 MB in bf16). At 1.1 B parameters (TinyLlama's shape; docs/WEIGHTS.md
has the figures; one process group at a time): --layers 22 --hidden 2048
--intermediate 5632 --heads 32 --kv-heads 4 --vocab 32000 --batch 2
--fsdp-ranks 8 --shard-size 1GB --checks layouts (about 10 GB at peak), and
the same with --batch 4 --checks mixed --mixed-layout fsdp4,tp4 (the batch
must divide over fsdp's 4 ranks: 2 rows over 4 replicate the step, and
every rank then holds every whole gradient)

A LlamaForCausalLM (random weights, seed 0) is written with
save_pretrained in bfloat16, sharded into several safetensors files with an
index, in a temporary folder deleted afterwards. Then:

1. `python -m spmdc_export --hf DIR` exports it by reference; the archive
   holds no parameter bytes.
2. spmdc compiles it under fsdp at 4, Megatron TP at 2 and 4, and dp x tp
   at 2x2. Each program holds no parameter bytes (its data section holds only
   rotary inv_freq), its dump names the
   checkpoint's files, and its outputs on 2-4 workers (--fsdp-ranks for
   fsdp) match `from_pretrained(DIR, torch_dtype=bfloat16)` eager logits
   within bfloat16 tolerance (2e-2), or, where bf16 rounding over many
   layers exceeds that, are as close to from_pretrained's float32 logits
   as transformers' own bf16 logits are (1.5x). The same program compiled
   with --embed-weights gives bit-identical outputs (both read the same
   bytes).
3. Exported with --dtype float32 (the bf16 file is converted as it loads):
   outputs match from_pretrained(torch_dtype=float32) within 1e-4.
4. The train step exported by reference (--train --expected): loss and
   gradients under fsdp at 2 as close to the float32 step on
   from_pretrained as transformers' own bf16 step is (1.5x, or within
   2e-2); with AdamW appended the optimizer states are zeros sources
   (no zero blobs in the program) and the loss falls over 3 steps; the
   saved checkpoint, written as a Hugging Face folder (--hf-output, several
   files and an index), loads in from_pretrained with the trained weights.
5. The mixed-precision train step exported by reference (--train
   --mixed-precision bf16) under fsdp at 2 (or each of --mixed-layout's, with
   each run's measured peak per rank) against PyTorch FSDP2 with
   MixedPrecisionPolicy(bf16, float32) on Gloo over the same checkpoint:
   loss within 5e-3, every gradient within 2e-2 (check_mixed); the
   step's estimated peak less weights falls by at least 5% from fsdp 2
   to fsdp 4 (check_estimate_scales).
6. Bad input (needs "layouts"), each refused with exit code 2 and one line naming the file
   and the tensor, before any worker computes (no output file): a
   truncated file, a file rewritten by save_pretrained with other weights,
   a renamed file (then found with --weights-root), a tensor missing at
   compile time.

Exit 1 on any failure (77, a skip, without transformers: scripts/test.sh
turns it into a failure).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_llama_sp_lp import TP_RULES  # noqa: E402  (the Megatron split of a HF Llama)

CHECKS = ("layouts", "embed", "float32", "train", "mixed", "bad")

LAYOUTS = {  # name: (ranks, schema); main() renames fsdp4 after --fsdp-ranks
    "fsdp4": (4, {"version": 1, "preset": "fsdp", "mesh": {"shape": [4], "axes": ["dp"]}}),
    "tp2": (2, {"version": 1, "mesh": {"shape": [2], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"}),
    "tp4": (4, {"version": 1, "mesh": {"shape": [4], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"}),
    "dp2xtp2": (4, {"version": 1, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]}, "params": TP_RULES,
                    "inputs": [{"match": "*", "placements": {"dp": "S(0)"}}], "outputs": "replicate"}),
}

# The mixed-precision step's layouts: name -> (workers, schema). fsdp gathers
# each decoder layer's parameters again for the backward (FSDP2's
# reshard_after_forward=True, the reshard-after-forward pass).
MIXED_LAYOUTS = {"fsdp2": (2, {"version": 1, "preset": "fsdp", "mesh": {"shape": [2], "axes": ["dp"]}}),
                 "fsdp4": (4, {"version": 1, "preset": "fsdp", "mesh": {"shape": [4], "axes": ["dp"]}}),
                 "tp2": LAYOUTS["tp2"], "tp4": LAYOUTS["tp4"], "dp2xtp2": LAYOUTS["dp2xtp2"]}


def run(cmd, ok=True, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if ok and r.returncode != 0:
        sys.exit(f"weights_by_reference: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def data_section(prog):
    """Bytes after the .spmd file's JSON (its weight blobs; Format.h)."""
    raw = prog.read_bytes()
    json_len = int.from_bytes(raw[16:24], "little")
    return len(raw) - (32 + json_len + 63) // 64 * 64


def archive_weight_bytes(pt2):
    import zipfile
    with zipfile.ZipFile(pt2) as z:
        return sum(i.file_size for i in z.infolist() if "/data/weights/" in i.filename and not i.filename.endswith(".json"))


def make_checkpoint(folder, a, seed=0):
    import torch
    import transformers
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                                   num_hidden_layers=a.layers, num_attention_heads=a.heads,
                                   num_key_value_heads=a.kv_heads, max_position_embeddings=max(64, a.seq),
                                   tie_word_embeddings=False)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16: a 1B model never exists in float32 here
    try:
        model = transformers.LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(folder, safe_serialization=True, max_shard_size=a.shard_size)
    del model
    files = sorted(p.name for p in Path(folder).glob("*.safetensors"))
    if len(files) < 2:
        sys.exit(f"weights_by_reference: expected a sharded checkpoint, got {files}")
    return files


def eager_logits(folder, inputs, dtype):
    import torch
    import transformers
    m = transformers.LlamaForCausalLM.from_pretrained(folder, torch_dtype=dtype, attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        return m(input_ids=inputs).logits


def close(got, want, rtol):
    err = float((got.double() - want.double()).norm() / max(1e-12, float(want.double().norm())))
    return err, err <= rtol


def compile_and_run(a, d, exp, name, extra=()):
    n, s = LAYOUTS[name]
    sfile = d / f"{name}.json"
    sfile.write_text(json.dumps(s))
    prog = d / f"{exp.name}.{name}{'.embed' if extra else ''}.spmd"
    run([a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "-o", prog, "-q", *extra])
    out = d / f"{prog.stem}.out.safetensors"
    run([a.spmd_run, "-n", n, prog, "--inputs", exp / "inputs.safetensors", "--output", out, "-q"])
    from safetensors.torch import load_file
    return prog, load_file(str(out))["output.0"]


def check_layouts(a, d, ckpt, exp, failures):
    import torch
    from safetensors.torch import load_file
    inputs = load_file(str(exp / "inputs.safetensors"))["input.0"]
    want = eager_logits(ckpt, inputs, torch.bfloat16)
    exact = eager_logits(ckpt, inputs, torch.float32)  # bf16 rounding grows with depth: how far is each from it
    theirs = close(want, exact, 0)[0]
    print(f"  transformers' bf16 logits vs its float32 logits: rel {theirs:.3g}")
    for name in LAYOUTS:
        prog, got = compile_and_run(a, d, exp, name)
        size = prog.stat().st_size
        if data_section(prog) > 4096:  # the rotary inv_freq buffer is the only one embedded
            failures.append(f"{name}: the program by reference holds {data_section(prog)} bytes of weights")
        dump = run([a.spmdc, "dump", prog]).stdout
        if "from model-00001-of-" not in dump:
            failures.append(f"{name}: the dump does not name the checkpoint's files")
        err, ok = close(got, want, 2e-2)
        ours = close(got, exact, 0)[0]
        print(f"  {name}: {size:,} B program, logits vs from_pretrained (bf16) rel {err:.3g}, vs float32 "
              f"{ours:.3g} ({ours / max(theirs, 1e-12):.2f}x transformers' bf16)")
        if not ok and ours > 1.5 * theirs:  # within bf16 tolerance, or as close to float32 as transformers' bf16
            failures.append(f"{name}: logits differ from from_pretrained by rel {err:.3g} (bf16 tolerance 2e-2) "
                            f"and from float32 by {ours:.3g}, over 1.5x transformers' bf16 ({theirs:.3g})")
        if "embed" not in a.checks:
            continue
        _, embedded = compile_and_run(a, d, exp, name, ["--embed-weights"])
        if not torch.equal(embedded, got):
            failures.append(f"{name}: --embed-weights gives other outputs than by reference")


def check_float32(a, d, ckpt, failures):
    import torch
    from safetensors.torch import load_file
    exp = d / "exp32"
    run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--dtype", "float32", *shape_flags(a)],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    inputs = load_file(str(exp / "inputs.safetensors"))["input.0"]
    want = eager_logits(ckpt, inputs, torch.float32)
    _, got = compile_and_run(a, d, exp, "tp2")
    err, ok = close(got, want, 1e-4)
    print(f"  float32 program over the bf16 checkpoint (tp2): rel {err:.3g}")
    if not ok:
        failures.append(f"float32 from bf16: logits differ from from_pretrained(float32) by rel {err:.3g}")


def shape_flags(a):
    return ["--batch", a.batch, "--seq", a.seq]


def check_mixed(a, d, ckpt, failures):
    """The mixed-precision train step by reference (--train --mixed-precision
    bf16: float32 masters read from the bf16 checkpoint) under each of
    --mixed-layout (comma-separated: fsdp2, fsdp4, tp2, tp4, dp2xtp2), one
    spmd-run after another, each with its ranks' measured peaks (--profile),
    against PyTorch FSDP2 with MixedPrecisionPolicy(bf16, float32) on 2 Gloo
    processes over the same checkpoint, run once (mixed_precision_vs_fsdp2's
    reference and comparison: loss within 5e-3, every gradient within
    2e-2). A gradient over 2e-2 passes when it is as close to the float32
    step's gradient (from_pretrained in float32, eager, run once for all
    layouts) as FSDP2's is (1.5x): bf16 rounding over many layers, as
    check_layouts allows for logits."""
    import mixed_precision_vs_fsdp2 as mp
    from safetensors import safe_open
    exp = d / "expmp"
    run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--train", "--mixed-precision", "bf16",
         *shape_flags(a)], env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    outs = {}
    for layout in a.mixed_layout.split(","):
        n, schema = MIXED_LAYOUTS[layout]
        sfile = d / f"mixed.{layout}.json"
        sfile.write_text(json.dumps(schema))
        prog, out, prof = d / f"mixed.{layout}.spmd", d / f"mixed.{layout}.out.safetensors", d / f"{layout}.prof.json"
        rep = d / f"mixed.{layout}.report.json"
        run([a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "--mixed-precision", "bf16", "-o", prog, "-q",
             "--report", rep])
        est = json.loads(rep.read_text())["per_rank"]["peak_bytes_estimate"]
        if data_section(prog) > 4096:
            failures.append(f"mixed precision: the program by reference holds {data_section(prog)} bytes of weights")
        t0 = time.time()
        run([a.spmd_run, "-n", n, prog, "--inputs", exp / "inputs.safetensors", "--output", out, "-q",
             "--profile", prof])
        ranks = json.loads(prof.read_text())["ranks"]
        print(f"  mixed {layout} on {n} workers: {time.time() - t0:.0f} s; per rank: estimate "
              f"{est / 2**30:.2f} GiB, measured live tensors "
              + ", ".join(f"{r['peak_bytes'] / 2**30:.2f}" for r in ranks) + " GiB, RSS growth "
              + ", ".join(f"{r['rss_growth_bytes'] / 2**30:.2f}" for r in ranks) + " GiB")
        outs[layout] = out
    check_estimate_scales(a, d, exp, failures)
    ref = mp.fsdp2_reference(exp, 0, ckpt=ckpt, batch=a.batch)  # after spmd-run: one at a time in memory
    found, over_all = [], {}
    for layout, out in outs.items():
        with safe_open(str(out), "pt") as got:
            mine = []
            loss_err, grad_err, over = mp.compare_step(got, ref, f"mixed precision by reference ({layout}) vs FSDP2",
                                                       mine)
            print(f"  mixed-precision train step ({layout}): loss rel {loss_err:.2e}, worst gradient rel "
                  f"{grad_err:.2e} (tolerances {mp.LOSS_TOL}, {mp.GRAD_TOL}), {len(over)} gradients over")
            if over and loss_err <= mp.LOSS_TOL:
                mine = [f for f in mine if "differs from FSDP2's" not in f]
                over_all[layout] = over
            found += mine
    if over_all:
        found += beside_float32(ckpt, exp, outs, ref, over_all)
    failures += found


def check_estimate_scales(a, d, exp, failures):
    """The mixed step's estimated peak per rank, less its weights, is at
    least 5% lower under fsdp at 4 than at 2 (both compiled, not run; the
    batch divides over 4): gradients and activations are sharded, only the
    root's whole embedding gradient is not. It was equal (within 256 B) at
    91M and 1.1 B parameters while
    every layer's whole bf16 gradient lived until the end of the backward
    (mixed-precision's castGradientsWhenReady casts it, and so
    reduce-scatters it, as soon as it is made)."""
    dynamic = {}
    for n in (2, 4):
        sfile, rep = d / f"estimate.fsdp{n}.json", d / f"estimate.fsdp{n}.report.json"
        sfile.write_text(json.dumps(MIXED_LAYOUTS[f"fsdp{n}"][1]))
        run([a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "--mixed-precision", "bf16", "-o",
             d / f"estimate.fsdp{n}.spmd", "-q", "--report", rep])
        r = json.loads(rep.read_text())["per_rank"]
        dynamic[n] = r["peak_bytes_estimate"] - r["param_bytes"]
    print(f"  mixed step's estimate less weights per rank: fsdp 2 {dynamic[2]:,} B, fsdp 4 {dynamic[4]:,} B "
          f"({dynamic[4] / dynamic[2]:.3f}x)")
    if a.batch % 4 == 0 and not dynamic[4] <= 0.95 * dynamic[2]:
        failures.append(f"mixed precision: the estimate less weights falls by under 5% from fsdp 2 to 4 "
                        f"({dynamic[2]:,} B, {dynamic[4]:,} B)")


def beside_float32(ckpt, exp, outs, ref, over_all):
    """The gradients over tolerance (`over_all`: layout -> {grad: error})
    against the float32 step's: each must be within 1.5x of FSDP2's distance
    to it. Only those gradients are computed (the other parameters frozen),
    once for every layout: the float32 model and no more."""
    from mixed_precision_vs_fsdp2 import rel
    from safetensors import safe_open
    from safetensors.torch import load_file
    exact = float32_step(ckpt, load_file(str(exp / "inputs.safetensors")), only=set().union(*over_all.values()))
    found = []
    for layout, over in over_all.items():
        ratios = []
        with safe_open(str(outs[layout]), "pt") as got:
            for k in sorted(over, key=over.get, reverse=True):
                ours, theirs = rel(got.get_tensor(k), exact[k]), rel(ref[k], exact[k])
                ratios.append(ours / max(theirs, 1e-12))
                if ours > 1.5 * theirs:
                    found.append(f"mixed precision ({layout}): {k} differs from FSDP2's by {over[k]:.3g} and from "
                                 f"float32 by {ours:.3g}, over 1.5x FSDP2's ({theirs:.3g})")
        ratios.sort()
        print(f"    {layout}: {len(over)} gradients over {2e-2}; their distance to float32 is "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f}x FSDP2's (median {ratios[len(ratios) // 2]:.2f}x)")
    return found


def float32_step(ckpt, inputs, only=None):
    """Loss and gradients (names as the export's) of the step in float32 on
    from_pretrained; `only` (grad.<fqn> names): just those gradients."""
    import torch
    import torch.nn.functional as F
    import transformers
    m = transformers.LlamaForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32, attn_implementation="eager")
    if only is not None:
        for k, p in m.named_parameters():
            p.requires_grad_(f"grad.{k}" in only)
    logits = m(input_ids=inputs["input.0"]).logits
    loss = F.cross_entropy(logits.flatten(0, 1).float(), inputs["input.1"].flatten())
    loss.backward()
    out = {"loss": loss.detach()}
    out.update({f"grad.{k}": p.grad for k, p in m.named_parameters() if p.grad is not None})
    return out


def check_train(a, d, ckpt, failures):
    """The train step by reference: loss and gradients against transformers'
    eager step on from_pretrained (the export's --expected), then AdamW
    steps whose optimizer states start as zeros sources."""
    from safetensors.torch import load_file
    exp = d / "exptrain"
    run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--train", "--expected", *shape_flags(a)],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    want = load_file(str(exp / "expected.safetensors"))
    sfile = d / "fsdp2.json"
    sfile.write_text(json.dumps({"version": 1, "preset": "fsdp", "mesh": {"shape": [2], "axes": ["dp"]}}))
    prog, out = d / "train.spmd", d / "train.out.safetensors"
    run([a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "-o", prog, "-q"])
    run([a.spmd_run, "-n", 2, prog, "--inputs", exp / "inputs.safetensors", "--output", out, "-q"])
    got = load_file(str(out))
    exact = float32_step(ckpt, load_file(str(exp / "inputs.safetensors")))
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            failures.append(f"train step: no output '{name}'")
            continue
        # bf16 rounding grows with depth: spmd-run's step must be as close to
        # the float32 step as transformers' own bf16 step is (or within 2e-2).
        ours, theirs = close(got[name], exact[name], 0)[0], close(w, exact[name], 0)[0]
        worst = max(worst, ours / max(theirs, 1e-3))
        if ours > max(2e-2, 1.5 * theirs):
            failures.append(f"train step: {name} is rel {ours:.3g} from the float32 step, transformers' bf16 "
                            f"step {theirs:.3g}")
    print(f"  train step by reference (fsdp 2): loss and {len(want) - 1} gradients; distance to the float32 step "
          f"at most {worst:.2f}x transformers' bf16 step's")
    adam = d / "adam.spmd"
    run([a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "-o", adam, "-q", "--optimizer", "adamw",
         "--lr", "1e-3"])
    dump = run([a.spmdc, "dump", adam]).stdout
    if "optim.step  [R] f32[] -> []  zeros" not in dump or adam.stat().st_size > 4 * prog.stat().st_size:
        failures.append("AdamW by reference: optimizer states are not zeros sources")
    log, saved = d / "loss.jsonl", d / "saved"
    run([a.spmd_run, "-n", 2, adam, "--inputs", exp / "inputs.safetensors", "--steps", 3, "--loss-log", log, "-q",
         "--save", saved])
    losses = [json.loads(x)["loss"] for x in log.read_text().splitlines()]
    if len(losses) != 3 or not losses[2] < losses[0]:
        failures.append(f"AdamW by reference: losses {losses} do not fall")
    check_hf_output(a, d, ckpt, saved, failures)


def check_hf_output(a, d, ckpt, saved, failures):
    """The trained checkpoint written as a Hugging Face folder loads in
    from_pretrained with exactly the trained weights."""
    import torch
    import transformers
    from safetensors.torch import load_file
    hf_dir, flat = d / "hf-out", d / "flat.safetensors"
    run([a.spmd_run, "--consolidate", saved, "--hf-output", hf_dir, "--hf-config-from", ckpt,
         "--max-shard-size", a.shard_size])
    run([a.spmd_run, "--consolidate", saved, "--output", flat])
    trained = {k: v for k, v in load_file(str(flat)).items() if not k.startswith("optim.")}
    files = sorted(p.name for p in hf_dir.glob("*.safetensors"))
    m = transformers.LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.bfloat16)
    state = m.state_dict()
    original = transformers.LlamaForCausalLM.from_pretrained(ckpt, torch_dtype=torch.bfloat16).state_dict()
    extra = set(trained) - set(state)  # non-persistent buffers (rotary inv_freq): the checkpoint has them
    same = set(state) <= set(trained) and all(torch.equal(v, trained[k]) for k, v in state.items())
    moved = any(not torch.equal(original[k], trained[k]) for k in state)
    print(f"  --hf-output: {len(files)} files + index, from_pretrained gives the trained weights: {same}")
    if len(files) < 2 or not (hf_dir / "model.safetensors.index.json").exists():
        failures.append(f"--hf-output: expected several files and an index, got {files}")
    if not same or not moved or any(not k.endswith("inv_freq") for k in extra):
        failures.append("--hf-output: from_pretrained does not load the trained weights")
    refused(a, [a.spmd_run, "--consolidate", saved, "--hf-output", hf_dir], [str(hf_dir), "already holds"],
            "--hf-output into a folder holding a checkpoint", failures)


def refused(a, cmd, want, tag, failures, out=None):
    r = run(cmd, ok=False)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    text = r.stderr.strip()
    if r.returncode != 2 or len(lines) != 1 or any(w not in text for w in want):
        failures.append(f"{tag}: want exit 2 and one line naming {want}, got {r.returncode}: {text!r}")
    if out is not None and out.exists():
        failures.append(f"{tag}: an output was written although the run was refused")
    print(f"  {tag}: {text}")


def check_bad_input(a, d, ckpt, exp, failures):
    prog = d / f"{exp.name}.tp2.spmd"
    files = sorted(Path(ckpt).glob("*.safetensors"))
    victim = files[-1]
    out = d / "bad.out.safetensors"
    run_cmd = [a.spmd_run, "-n", 2, prog, "--inputs", exp / "inputs.safetensors", "--output", out, "-q"]
    backup = d / "backup.safetensors"
    shutil.copy(victim, backup)
    with open(victim, "r+b") as f:  # truncated
        f.truncate(victim.stat().st_size - 100)
    refused(a, run_cmd, [str(victim), "tensor '", "recompile"], "truncated file", failures, out)
    shutil.copy(backup, victim)
    moved = d / "moved"  # renamed: the whole folder moved
    shutil.copytree(ckpt, moved)
    victim.rename(victim.with_suffix(".bak"))
    refused(a, run_cmd, [str(victim), "tensor '", "--weights-root"], "renamed file", failures, out)
    run([*run_cmd, "--weights-root", moved])
    out.unlink()
    victim.with_suffix(".bak").rename(victim)
    other = d / "other"  # the same model saved again with other weights
    make_checkpoint(other, a, seed=1)
    shutil.copy(other / victim.name, victim)
    refused(a, run_cmd, [str(victim), "tensor '", "recompile"], "rewritten checkpoint", failures, out)
    shutil.copy(backup, victim)
    run(run_cmd)
    # Compile time: a tensor the archive names is gone from its file.
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(victim))
    gone = sorted(tensors)[0]
    del tensors[gone]
    save_file(tensors, str(victim), metadata={"format": "pt"})
    sfile = d / "tp2.json"
    bad = d / "bad.spmd"
    refused(a, [a.spmdc, "compile", exp / "model.pt2", "--schema", sfile, "-o", bad, "-q"],
            [str(victim), f"'{gone}'"], "tensor missing at compile time", failures, bad)
    shutil.copy(backup, victim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--intermediate", type=int, help="default 2 x hidden")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--fsdp-ranks", type=int, default=4, help="the fsdp layout's mesh (and workers)")
    ap.add_argument("--shard-size", default="40KB", help="save_pretrained's max_shard_size")
    ap.add_argument("--mixed-layout", default="fsdp2",
                    help=f"the mixed-precision step's layouts, comma-separated: {', '.join(MIXED_LAYOUTS)}")
    ap.add_argument("--checks", default=",".join(CHECKS), help=f"a comma-separated subset of {', '.join(CHECKS)}")
    a = ap.parse_args()
    a.intermediate = a.intermediate or 2 * a.hidden
    a.checks = set(a.checks.split(","))
    if not a.checks <= set(CHECKS):
        ap.error(f"--checks: choose from {', '.join(CHECKS)}")
    if not set(a.mixed_layout.split(",")) <= set(MIXED_LAYOUTS):
        ap.error(f"--mixed-layout: choose from {', '.join(MIXED_LAYOUTS)}")
    n = a.fsdp_ranks
    LAYOUTS.pop("fsdp4")
    LAYOUTS[f"fsdp{n}"] = (n, {"version": 1, "preset": "fsdp", "mesh": {"shape": [n], "axes": ["dp"]}})
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("weights_by_reference: transformers is not installed")
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="weights-ref-") as tmp:
        d = Path(tmp)
        ckpt = d / "ckpt"
        files = make_checkpoint(ckpt, a)
        print(f"checkpoint: {len(files)} files, {sum((ckpt / f).stat().st_size for f in files):,} B")
        exp = d / "exp"
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, *shape_flags(a)], env=env)
        payload = archive_weight_bytes(exp / "model.pt2")
        print(f"archive by reference: {(exp / 'model.pt2').stat().st_size:,} B, {payload:,} B of weight payloads")
        if payload > 4096:  # rotary inv_freq is the only real buffer
            failures.append(f"the archive by reference holds {payload} bytes of weights")
        steps = [("layouts", check_layouts, (exp,)), ("float32", check_float32, ()), ("train", check_train, ()),
                 ("mixed", check_mixed, ()), ("bad", check_bad_input, (exp,))]
        for name, check, args in steps:
            if name in a.checks:
                t0 = time.time()
                check(a, d, ckpt, *args, failures)
                print(f"  ({name}: {time.time() - t0:.0f} s)")
    for f in failures:
        print("FAIL:", f)
    print("weights_by_reference:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
