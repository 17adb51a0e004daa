"""Fresh exports from the installed torch compile, run and match eager.

Exports a set of the test models with this Python's torch
(testdata/export_models.py), then for each: runs it on one device with
spmd-run, compiles it under dp and fsdp (and Megatron TP where an example
schema exists) for 2 ranks, runs those on 2 worker processes, and compares
every output, loss and gradient with the eager references the export wrote.
A new torch release that changes what export emits fails here the day it
is installed.

    python tests/fresh/fresh_exports.py SPMDC SPMD_RUN [--only mlp,llama]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_check  # noqa: E402  (its compare(): one output comparison for both checks)
MODELS = ["mlp", "mlp_dynamic_batch", "mlp_training_ir", "mlp_cast", "mlp_train", "gpt_block_sdpa", "llama",
          "llama_train", "llama_dynamic", "cnn_train", "moe"]
TP_SCHEMAS = {"mlp": "mlp_tp.json", "llama": "llama_tp.json"}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\nexit {r.returncode}\n{r.stderr.strip()}")
    return r


def compare(got_path, expected, what):
    verdict = gpu_check.compare(got_path, expected, rtol=1e-4, atol=1e-5)
    if not verdict.startswith("ok"):
        raise AssertionError(f"{what}: {verdict}")
    print(f"ok   {what}: {len(expected)} tensors match eager", flush=True)


def check_model(spmdc, spmd_run, work, name):
    d = os.path.join(work, name)
    pt2 = os.path.join(d, "model.pt2")
    inputs = os.path.join(d, "inputs.safetensors")
    expected = load_file(os.path.join(d, "expected.safetensors"))
    out = os.path.join(d, "single.safetensors")
    run([spmd_run, pt2, "--inputs", inputs, "--output", out])
    compare(out, expected, f"{name} on one device")
    layouts = ["dp", "fsdp"]
    if name in TP_SCHEMAS:
        layouts.append(os.path.join(ROOT, "schemas", "examples", TP_SCHEMAS[name]))
    for layout in layouts:
        label = os.path.basename(layout)
        prog = os.path.join(d, f"{label}.spmd")
        run([spmdc, "compile", pt2, "--mesh", "2", "--schema", layout, "-o", prog, "-q"])
        out = os.path.join(d, f"{label}.safetensors")
        run([spmd_run, "-n", "2", prog, "--inputs", inputs, "--output", out, "--quiet"])
        compare(out, expected, f"{name} under {label} on 2 workers")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--only")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else MODELS
    print(f"torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory(prefix="spmdc-fresh-") as work:
        subprocess.run([sys.executable, os.path.join(ROOT, "testdata", "export_models.py"), work,
                        "--only", ",".join(names)], check=True)
        failures = []
        for n in names:
            try:
                check_model(a.spmdc, a.spmd_run, work, n)
            except (RuntimeError, AssertionError) as e:
                print(f"FAIL {n}: {e}", flush=True)
                failures.append(n)
    print(f"{len(names) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
