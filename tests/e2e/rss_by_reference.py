#!/usr/bin/env python3
"""A rank's resident set stays near its live tensors: the RSS bound of issue 31.

Usage:
    rss_by_reference.py SPMDC SPMD_RUN [--train]

Writes a random bf16 Llama checkpoint (2 layers, hidden 1024, vocab 32000:
88M parameters, 176 MB; scripts/bench_weights_ref.py's writer), exports it
by reference, compiles it under fsdp at mesh 4 and runs one forward on 4
workers with --profile. Each rank's peak RSS growth (VmHWM over the RSS
before loading) must stay within 1.2x its peak of live tensor bytes (its
shard plus the gathered layers and activations). Before the buffer pool
(lib/runtime/GatherPool.h) glibc's heap kept freed gather buffers resident:
1.68x; with it 1.13x (train step: 1.5x with its activations on the heap,
1.09x pooled). Exit 0 when the bound holds, 1 otherwise (also when
torch or transformers is missing: nothing is skipped).

--train runs the train step instead (`--train` export by reference, loss and
gradients, fsdp at 4, 2 steps): live tensors then include the gradients and
the activations saved for the backward.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
BOUND = 1.2
SHAPE = SimpleNamespace(layers=2, hidden=1024, intermediate=2816, heads=16, kv_heads=4, vocab=32000)


def run(cmd, env):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--train"]):
        print(__doc__)
        return 1
    spmdc, spmd_run = sys.argv[1:3]
    train = ["--train"] if sys.argv[3:] else []
    try:
        sys.path.insert(0, str(ROOT / "scripts"))
        from bench_weights_ref import write_checkpoint
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"rss_by_reference: FAIL: {e} (run scripts/setup.sh)")
        return 1
    t0 = time.time()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="1")
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-rss-") as tmp:
        d = Path(tmp)
        (d / "ckpt").mkdir()
        try:
            write_checkpoint(d / "ckpt", SHAPE)
            run([sys.executable, "-m", "spmdc_export", "--hf", d / "ckpt", "-o", d / "exp", "--batch", 8, "--seq", 8,
                 *train], env)
            run([spmdc, "compile", d / "exp" / "model.pt2", "--schema", "fsdp", "--mesh", 4, "-o", d / "p.spmd",
                 "-q"], env)
            run([spmd_run, "-n", 4, d / "p.spmd", "--inputs", d / "exp" / "inputs.safetensors", "--profile",
                 d / "profile.json", "-q", *(["--steps", 2] if train else [])], env)
            ranks = json.loads((d / "profile.json").read_text())["ranks"]
        except RuntimeError as e:
            print(f"rss_by_reference: FAIL: {e}")
            return 1
    for r in ranks:
        ratio = r["rss_growth_bytes"] / r["peak_bytes"]
        print(f"rank {r['rank']}: RSS growth {r['rss_growth_bytes'] / 2**20:.0f} MiB, live tensors at most "
              f"{r['peak_bytes'] / 2**20:.0f} MiB -> {ratio:.2f}x (bound {BOUND}x)")
        if not ratio <= BOUND:
            failures.append(f"rank {r['rank']}: RSS growth {ratio:.2f}x its peak live tensor bytes, over {BOUND}x")
    for f in failures:
        print("FAIL:", f)
    print(f"rss_by_reference: {len(failures)} failures, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
