#!/usr/bin/env python3
"""Weights by reference: a Hugging Face checkpoint folder exported without
its weights, compiled into programs that point at its files, run on CPU
workers against transformers' from_pretrained.

Usage:
    weights_by_reference.py SPMDC SPMD_RUN [--layers 2] [--hidden 64] [--vocab 256] [--shard-size 40KB]

CI runs it twice: at these defaults (about 100k parameters) and at
--layers 8 --hidden 768 --vocab 32000 --shard-size 50MB (91M parameters,
183 MB in bf16).

A LlamaForCausalLM (random weights, seed 0) is written with
save_pretrained in bfloat16, sharded into several safetensors files with an
index, in a temporary folder deleted afterwards. Then:

1. `python -m spmdc_export --hf DIR` exports it by reference; the archive
   holds no parameter bytes.
2. spmdc compiles it under fsdp at 4, Megatron TP at 2 and 4, and dp x tp
   at 2x2. Each program holds no parameter bytes (its data section holds only
   rotary inv_freq), its dump names the
   checkpoint's files, and its outputs on 2-4 workers match
   `from_pretrained(DIR, torch_dtype=bfloat16)` eager logits within
   bfloat16 tolerance. The same program compiled with --embed-weights gives
   bit-identical outputs (both read the same bytes).
3. Exported with --dtype float32 (the bf16 file is converted as it loads):
   outputs match from_pretrained(torch_dtype=float32) within 1e-4.
4. The train step exported by reference (--train --expected): loss and
   gradients under fsdp at 2 as close to the float32 step on
   from_pretrained as transformers' own bf16 step is (1.5x, or within
   2e-2); with AdamW appended the optimizer states are zeros sources
   (no zero blobs in the program) and the loss falls over 3 steps; the
   saved checkpoint, written as a Hugging Face folder (--hf-output, several
   files and an index), loads in from_pretrained with the trained weights.
5. Bad input, each refused with exit code 2 and one line naming the file
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_llama_sp_lp import TP_RULES  # noqa: E402  (the Megatron split of a HF Llama)

LAYOUTS = {  # name: (ranks, schema)
    "fsdp4": (4, {"version": 1, "preset": "fsdp", "mesh": {"shape": [4], "axes": ["dp"]}}),
    "tp2": (2, {"version": 1, "mesh": {"shape": [2], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"}),
    "tp4": (4, {"version": 1, "mesh": {"shape": [4], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"}),
    "dp2xtp2": (4, {"version": 1, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]}, "params": TP_RULES,
                    "inputs": [{"match": "*", "placements": {"dp": "S(0)"}}], "outputs": "replicate"}),
}


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
    cfg = transformers.LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                                   num_hidden_layers=a.layers, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True, max_shard_size=a.shard_size)
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
    for name in LAYOUTS:
        prog, got = compile_and_run(a, d, exp, name)
        size = prog.stat().st_size
        if data_section(prog) > 4096:  # the rotary inv_freq buffer is the only one embedded
            failures.append(f"{name}: the program by reference holds {data_section(prog)} bytes of weights")
        dump = run([a.spmdc, "dump", prog]).stdout
        if "from model-00001-of-" not in dump:
            failures.append(f"{name}: the dump does not name the checkpoint's files")
        err, ok = close(got, want, 2e-2)
        print(f"  {name}: {size:,} B program, logits vs from_pretrained (bf16) rel {err:.3g}")
        if not ok:
            failures.append(f"{name}: logits differ from from_pretrained by rel {err:.3g} (bf16 tolerance 2e-2)")
        _, embedded = compile_and_run(a, d, exp, name, ["--embed-weights"])
        if not torch.equal(embedded, got):
            failures.append(f"{name}: --embed-weights gives other outputs than by reference")


def check_float32(a, d, ckpt, failures):
    import torch
    from safetensors.torch import load_file
    exp = d / "exp32"
    run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--dtype", "float32", "--batch", "4"],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    inputs = load_file(str(exp / "inputs.safetensors"))["input.0"]
    want = eager_logits(ckpt, inputs, torch.float32)
    _, got = compile_and_run(a, d, exp, "tp2")
    err, ok = close(got, want, 1e-4)
    print(f"  float32 program over the bf16 checkpoint (tp2): rel {err:.3g}")
    if not ok:
        failures.append(f"float32 from bf16: logits differ from from_pretrained(float32) by rel {err:.3g}")


def float32_step(ckpt, inputs):
    """Loss and gradients (names as the export's) of the step in float32 on from_pretrained."""
    import torch
    import torch.nn.functional as F
    import transformers
    m = transformers.LlamaForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32, attn_implementation="eager")
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
    run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--train", "--expected", "--batch", "4"],
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
    ap.add_argument("--shard-size", default="40KB", help="save_pretrained's max_shard_size")
    a = ap.parse_args()
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
        run([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--batch", "4"], env=env)
        payload = archive_weight_bytes(exp / "model.pt2")
        print(f"archive by reference: {(exp / 'model.pt2').stat().st_size:,} B, {payload:,} B of weight payloads")
        if payload > 4096:  # rotary inv_freq is the only real buffer
            failures.append(f"the archive by reference holds {payload} bytes of weights")
        check_layouts(a, d, ckpt, exp, failures)
        check_float32(a, d, ckpt, failures)
        check_train(a, d, ckpt, failures)
        check_bad_input(a, d, ckpt, exp, failures)
    for f in failures:
        print("FAIL:", f)
    print("weights_by_reference:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
