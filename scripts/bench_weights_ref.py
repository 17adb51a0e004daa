#!/usr/bin/env python3
"""Weights by reference at 1B parameters: export, compile and worker
start-up of a Hugging Face Llama checkpoint, against embedding the weights
and against PyTorch's from_pretrained.

Usage:
    .venv/bin/python scripts/bench_weights_ref.py [--layers 22] [--hidden 2048] [--ranks 8] [--keep DIR]

Writes a TinyLlama-shaped checkpoint (22 layers, hidden 2048, intermediate
5632, 32 heads, 4 kv heads, vocab 32000: 1.10 B parameters, 2.2 GB in bf16)
with random weights into a temporary folder as sharded safetensors files
plus config.json (tensor by tensor, so writing it needs no 2.2 GB model),
then prints:

- export by reference (`python -m spmdc_export --hf DIR`): seconds, peak
  RSS, archive bytes;
- `spmdc compile --schema fsdp --mesh RANKS`: by reference against
  --embed-weights (seconds, program bytes), and by reference for a
  100k-parameter model of the same depth (the compile's cost should not
  depend on the weights);
- `spmd-run -n RANKS` of the program by reference, one forward of 8 x 8
  tokens: the slowest rank's weight load (--profile load_ms) against `cat`
  of the checkpoint's files (the bytes all ranks of this machine read
  together), and each rank's RSS growth against its shard's bytes;
- PyTorch's way: `LlamaForCausalLM.from_pretrained(DIR, torch_dtype=bf16)`
  in one process (what each rank of a from_pretrained + distribute_tensor
  job does first): seconds and peak RSS.

Every figure is measured in this run; nothing is compared with numbers
from elsewhere.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"


def peak_rss(cmd, env=None):
    """(seconds, peak RSS bytes, stdout) of one child process, from wait4."""
    t0 = time.perf_counter()
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench_weights_ref: {' '.join(map(str, cmd))} failed:\n{out}")
    return seconds, usage.ru_maxrss * 1024, out


def write_checkpoint(folder, a):
    """A random bf16 Llama checkpoint, written tensor by tensor; returns its parameter count."""
    import torch
    import transformers
    from safetensors.torch import save_file
    cfg = transformers.LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                                   num_hidden_layers=a.layers, num_attention_heads=a.heads,
                                   num_key_value_heads=a.kv_heads, max_position_embeddings=2048,
                                   tie_word_embeddings=False, torch_dtype="bfloat16")
    cfg.save_pretrained(folder)
    h, kv = a.hidden, a.hidden // a.heads * a.kv_heads
    shapes = {"model.embed_tokens.weight": (a.vocab, h), "model.norm.weight": (h,), "lm_head.weight": (a.vocab, h)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                       p + "mlp.gate_proj.weight": (a.intermediate, h), p + "mlp.up_proj.weight": (a.intermediate, h),
                       p + "mlp.down_proj.weight": (h, a.intermediate), p + "input_layernorm.weight": (h,),
                       p + "post_attention_layernorm.weight": (h,)})
    files, current, size, limit = [], {}, 0, 1 << 30
    gen = torch.Generator().manual_seed(0)

    def flush():
        name = f"part-{len(files)}.safetensors"
        save_file(current, str(Path(folder) / name), metadata={"format": "pt"})
        files.append((name, list(current)))
        current.clear()
    for name, shape in shapes.items():
        t = torch.ones(shape, dtype=torch.bfloat16) if len(shape) == 1 else \
            (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
        if size + t.nbytes > limit and current:
            flush()
            size = 0
        current[name] = t
        size += t.nbytes
    flush()
    total = len(files)
    weight_map = {}
    for i, (name, names) in enumerate(files):
        final = f"model-{i + 1:05d}-of-{total:05d}.safetensors"
        os.rename(Path(folder) / name, Path(folder) / final)
        weight_map.update({n: final for n in names})
    numel = sum(int(torch.Size(s).numel()) for s in shapes.values())
    index = {"metadata": {"total_size": numel * 2}, "weight_map": weight_map}
    (Path(folder) / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return numel


def gb(n):
    return f"{n / 1e9:.2f} GB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--keep", help="write the checkpoint and programs here and keep them")
    ap.add_argument("--write-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    spmdc, spmd_run = BUILD / "tools" / "spmdc" / "spmdc", BUILD / "tools" / "spmd-run" / "spmd-run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="1")
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="bench-weights-ref-")
    d = Path(a.keep or tmp.name)
    d.mkdir(parents=True, exist_ok=True)
    ckpt = d / "ckpt"
    ckpt.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    if a.write_only:
        write_checkpoint(ckpt, a)
        return
    if not (a.keep and (ckpt / "model.safetensors.index.json").exists()):  # --keep: reuse the one written before
        # In a child: a parent grown by the checkpoint's tensors would count in its children's peak RSS.
        subprocess.run([sys.executable, __file__, "--write-only", *sys.argv[1:], "--keep", str(d)], check=True, env=env)
    numel = json.loads((ckpt / "model.safetensors.index.json").read_text())["metadata"]["total_size"] // 2
    ckpt_bytes = sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))
    print(f"checkpoint: {numel / 1e9:.2f} B parameters, {gb(ckpt_bytes)} bf16 in "
          f"{len(list(ckpt.glob('*.safetensors')))} files (written in {time.perf_counter() - t0:.0f} s)")

    exp = d / "exp"
    s, rss, _ = peak_rss([sys.executable, "-m", "spmdc_export", "--hf", ckpt, "-o", exp, "--batch", "8", "--seq", "8"],
                         env)
    print(f"export by reference: {s:.1f} s, peak RSS {gb(rss)}, archive {(exp / 'model.pt2').stat().st_size:,} B")

    small = d / "small"
    subprocess.run([sys.executable, "-m", "spmdc_export", "--hf", "llama", "--layers", str(a.layers), "--hidden", "64",
                    "--batch", "8", "--seq", "8", "-o", small], env=env, check=True, capture_output=True)
    rows = []
    for tag, model, extra in (("1B by reference", exp, []), ("1B --embed-weights", exp, ["--embed-weights"]),
                              ("100k-param, same depth", small, [])):
        prog = d / f"{tag.split()[0]}{'-embed' if extra else ''}.spmd"
        s, rss, _ = peak_rss([spmdc, "compile", model / "model.pt2", "--schema", "fsdp", "--mesh", a.ranks, "-o", prog,
                              "-q", *extra])
        rows.append((tag, s, rss, prog.stat().st_size))
    print(f"\ncompile --schema fsdp --mesh {a.ranks}:")
    print(f"  {'':26} {'seconds':>8} {'peak RSS':>10} {'program':>14}")
    for tag, s, rss, size in rows:
        print(f"  {tag:26} {s:8.2f} {gb(rss):>10} {size:>12,} B")
    print(f"  ratio embed / by reference: {rows[1][1] / rows[0][1]:.1f}x time, {rows[1][3] / rows[0][3]:.0f}x bytes; "
          f"by reference / small model: {rows[0][1] / rows[2][1]:.2f}x time")

    t0 = time.perf_counter()
    for p in sorted(ckpt.glob("*.safetensors")):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    cat = time.perf_counter() - t0
    # The floor for any loader that keeps the bytes: read into freshly allocated memory (cat reuses one buffer).
    floor_script = ("import os, sys\nfor p in sys.argv[1:]:\n    fd = os.open(p, os.O_RDONLY); n = os.fstat(fd).st_size\n"
                    "    b = bytearray(n); m = memoryview(b); o = 0\n"
                    "    while o < n: o += os.preadv(fd, [m[o:o + (1 << 26)]], o)\n    del m, b; os.close(fd)")
    fresh, _, _ = peak_rss([sys.executable, "-c", floor_script, *sorted(ckpt.glob("*.safetensors"))])
    profile = d / "profile.json"
    s, _, out = peak_rss([spmd_run, "-n", a.ranks, d / "1B.spmd", "--inputs", exp / "inputs.safetensors",
                          "--profile", profile], env)
    ranks = json.loads(profile.read_text())["ranks"]
    load = max(r["load_ms"] for r in ranks) / 1e3
    growth = max(r["rss_growth_bytes"] for r in ranks)
    shard = ckpt_bytes / a.ranks
    print(f"\nspmd-run -n {a.ranks}, program by reference, one forward (8 x 8 tokens): {s:.1f} s wall")
    live = max(r["peak_bytes"] for r in ranks)
    print(f"  slowest rank's weight load {load:.2f} s; all {gb(ckpt_bytes)} (page cache) by cat {cat:.2f} s "
          f"-> {load / cat:.2f}x, read into fresh memory in one process {fresh:.2f} s -> {load / fresh:.2f}x")
    print(f"  largest RSS growth of a rank {gb(growth)}: its shard {gb(shard)} plus a peak of {gb(live - shard)} "
          f"of gathered layers and activations (live tensors at most {gb(live)}) -> RSS / live {growth / live:.2f}x")

    script = ("import torch, transformers, sys; transformers.LlamaForCausalLM.from_pretrained("
              "sys.argv[1], torch_dtype=torch.bfloat16)")
    s, rss, _ = peak_rss([sys.executable, "-c", script, ckpt], env)
    print(f"\nPyTorch: from_pretrained(bf16) in one process: {s:.1f} s, peak RSS {gb(rss)} "
          f"(each of {a.ranks} ranks of a from_pretrained + distribute_tensor job starts so)")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
