#!/usr/bin/env python3
"""Symbolic dims split unevenly, against eager PyTorch.

Usage:
    uneven_dynamic.py SPMDC SPMD_RUN

A symbolic dim whose trace-time size does not divide over the mesh compiles
to a program that splits any run-time size as torch.chunk does (each rank's
size computed from the symbol, bound from the global inputs). The reference
is the exported program itself run by PyTorch (`torch.export.load(...)
.module()`), on sizes the compile never saw:

- testdata's llama_dynamic_b3s24 (batch x sequence symbolic, traced at 3 x
  24) under dp at mesh 2 and 4, on batches 1 (empty shards), 3 and 5 with
  other sequence lengths;
- mlp_dynamic_batch (traced at batch 32) at mesh 3 with its output left
  sharded ("outputs": "any", gathered by spmd-run), on batches 2, 7, 32 and
  100;
- the same mlp at mesh 2 (32 divides: the program splits evenly) refuses
  batch 7 with one line and exit 2;
- llama_dynamic under sequence parallelism at tp 2 (traced at a length that
  divides) stops at the first slice of an odd length with a clear error,
  no worker abort.

Exit status 1 on any mismatch.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
PT2 = ROOT / "testdata" / "pt2"


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def check(failures, what, got, want, tol=1e-5):
    err = float((got.double() - want.double()).abs().max()) / max(1e-12, float(want.double().abs().max()))
    ok = got.shape == want.shape and err <= tol
    print(f"{what:58} {'ok' if ok else 'FAIL'} (rel {err:.2g}, shape {list(got.shape)})")
    if not ok:
        failures.append(what)


def compile_and_run(spmdc, spmd_run, d, failures, model, schema, mesh, batches, note):
    prog = d / f"{model.name}.{mesh}.spmd"
    r = run([spmdc, "compile", model / "model.pt2", "--schema", schema, "--mesh", mesh, "-o", prog])
    if r.returncode != 0 or note not in r.stdout + r.stderr:
        failures.append(f"{model.name} mesh {mesh}: compile exit {r.returncode}, no note '{note}': {r.stderr}")
        return
    eager = torch.export.load(str(model / "model.pt2")).module()
    for name, x in batches:
        inputs, out = d / f"in_{name}.safetensors", d / f"out_{name}_{mesh}.safetensors"
        save_file({"input.0": x}, str(inputs))
        r = run([spmd_run, "-n", mesh, prog, "--inputs", inputs, "-o", out, "-q"])
        what = f"{model.name} mesh {mesh} input {list(x.shape)}"
        if r.returncode != 0:
            failures.append(f"{what}: spmd-run exit {r.returncode}: {r.stderr.strip()}")
            continue
        with torch.no_grad():
            want = eager(x)
        check(failures, what, load_file(str(out))["output.0"], want)


def main():
    spmdc, spmd_run = sys.argv[1], sys.argv[2]
    failures = []
    torch.manual_seed(0)
    uneven_note = "split unevenly as torch.chunk does, each rank's size computed from the symbol"
    with tempfile.TemporaryDirectory(prefix="spmdc-uneven-dyn-") as tmp:
        d = Path(tmp)
        tokens = [(f"b{b}s{s}", torch.randint(0, 256, (b, s))) for b, s in ((1, 64), (3, 24), (5, 2))]
        for mesh in (2, 4):
            compile_and_run(spmdc, spmd_run, d, failures, PT2 / "llama_dynamic_b3s24", "dp", mesh, tokens,
                            uneven_note)
        schema = d / "mlp_any.json"
        schema.write_text(json.dumps({"version": 1, "preset": "dp", "mesh": {"shape": [3], "axes": ["x"]},
                                      "outputs": "any"}))
        xs = [(f"x{b}", torch.randn(b, 64)) for b in (2, 7, 32, 100)]
        compile_and_run(spmdc, spmd_run, d, failures, PT2 / "mlp_dynamic_batch", schema, 3, xs, uneven_note)
        # Traced at 32 on 2 ranks: an even program, which refuses an odd batch in one line.
        prog = d / "mlp_even.spmd"
        r = run([spmdc, "compile", PT2 / "mlp_dynamic_batch" / "model.pt2", "--schema", "dp", "--mesh", 2,
                 "-o", prog])
        if r.returncode != 0 or "must divide by 2 too" not in r.stdout + r.stderr:
            failures.append(f"mlp_dynamic_batch mesh 2: expected the even-split note: {r.stdout}{r.stderr}")
        save_file({"input.0": torch.randn(7, 64)}, str(d / "in7.safetensors"))
        r = run([spmd_run, "-n", 2, prog, "--inputs", d / "in7.safetensors", "-o", d / "o7.safetensors"])
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        ok = r.returncode == 2 and len(lines) == 1 and "does not divide" in lines[0] and \
            not (d / "o7.safetensors").exists()
        print(f"{'mlp_dynamic_batch mesh 2 (even program), batch 7 refused':58} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"even program on batch 7: exit {r.returncode}, stderr {r.stderr!r}")
        # Sequence parallelism on llama_dynamic (traced at a length that divides): an odd run-time
        # length stops every rank at the first slice with one clear line, no worker abort.
        sp = json.loads((ROOT / "schemas" / "examples" / "llama_tp_sp.json").read_text())
        sp["mesh"]["shape"] = [2]
        (d / "sp.json").write_text(json.dumps(sp))
        prog = d / "sp.spmd"
        r = run([spmdc, "compile", PT2 / "llama_dynamic" / "model.pt2", "--schema", d / "sp.json", "--mesh", 2,
                 "-o", prog, "-q"])
        save_file({"input.0": torch.randint(0, 256, (1, 7))}, str(d / "odd.safetensors"))
        r = run([spmd_run, "-n", 2, prog, "--inputs", d / "odd.safetensors", "--timeout", 30])
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        ok = r.returncode == 1 and last.startswith("error: rank") and "does not divide over mesh axis 'tp'" in last \
            and "SIG" not in r.stderr
        print(f"{'llama_dynamic SP at tp 2, odd sequence 7 refused':58} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"SP odd sequence: exit {r.returncode}, stderr {r.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"uneven_dynamic: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
