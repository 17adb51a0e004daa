#!/usr/bin/env python3
"""spmd-run --verify / --verify-against as users run them, on a bf16 model.

Usage:
    verify_against.py SPMDC SPMD_RUN

A bfloat16 MLP (Linear 64->256, GELU, Linear 256->64, seed 0) is exported
with spmdc_export and compiled with Megatron TP on 2 ranks (fc1
column-parallel, fc2 row-parallel: the partial sums add up in another order
than eager's). Eager PyTorch's output is written to expected.safetensors
(output.0) at test time. Checks:

1. `--verify-against expected.safetensors` passes with the default (bf16)
   tolerances, and so does `--verify model.pt2`;
2. a wrong expected file (output + 0.1 * noise) fails with exit 1 and
   ABOVE TOLERANCE; where the run differs from eager at all, --rtol 0
   --atol 0 fails too (the overrides apply);
3. bad references are refused up front with exit 2 and one line naming the
   file, before any worker runs (no run summary is printed): a .pt2 given to
   --verify-against, a safetensors file given to --verify, a missing file,
   a file whose tensors are not the program's outputs (the inputs), both
   flags at once, --verify with --steps 3.

Exit 1 on any failure (also when torch or safetensors is missing).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


def main():
    spmdc, spmd_run = sys.argv[1], sys.argv[2]
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from safetensors.torch import save_file
        from spmdc_export import core
    except ImportError as e:
        print(f"verify_against: FAIL: {e} (run scripts/setup.sh)")
        return 1

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(64, 256), nn.Linear(256, 64)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    failures = []

    def run(*args, want_rc, must=(), must_not=()):
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
        text = r.stdout + r.stderr
        label = " ".join(str(a) for a in args[1:] if not str(a).startswith("/"))
        if r.returncode != want_rc:
            failures.append(f"{label}: exit {r.returncode}, want {want_rc}:\n{text}")
        for s in must:
            if s not in text:
                failures.append(f"{label}: output lacks '{s}':\n{text}")
        for s in must_not:
            if s in text:
                failures.append(f"{label}: output has '{s}':\n{text}")
        return text

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="spmdc-verify-") as tmp:
        d = Path(tmp)
        m = MLP().to(torch.bfloat16)
        x = torch.randn(32, 64).to(torch.bfloat16)
        core.export(m, (x,), d)
        with torch.no_grad():
            want = m(x)
        save_file({"output.0": want.contiguous()}, str(d / "expected.safetensors"))
        wrong = (want.float() + 0.1 * torch.randn_like(want.float())).to(torch.bfloat16)
        save_file({"output.0": wrong.contiguous()}, str(d / "wrong.safetensors"))
        prog = d / "mlp.spmd"
        subprocess.run([spmdc, "compile", d / "model.pt2", "--schema", ROOT / "schemas/examples/mlp_tp.json",
                        "--mesh", "2", "-o", prog, "-q"], check=True)
        base = [spmd_run, "-n", 2, prog, "--inputs", d / "inputs.safetensors"]
        ok = run(*base, "--verify-against", d / "expected.safetensors", want_rc=0,
                 must=["verify output.0", "(bf16: rtol 0.016 atol 1e-05)  ok"])
        print(ok.strip())
        run(*base, "--verify", d / "model.pt2", want_rc=0, must=["verify output.0", "ok"])
        run(*base, "--verify-against", d / "wrong.safetensors", want_rc=1, must=["ABOVE TOLERANCE"])
        out = d / "out.safetensors"
        run(*base, "--output", out, want_rc=0)
        from safetensors.torch import load_file
        diff = float((load_file(str(out))["output.0"].float() - want.float()).abs().max())
        print(f"verify_against: TP bf16 vs eager bf16: max abs {diff:.3g}")
        if diff > 0:
            run(*base, "--verify-against", d / "expected.safetensors", "--rtol", 0, "--atol", 0, want_rc=1,
                must=["ABOVE TOLERANCE"])
        # Bad references: exit 2 before any worker runs.
        summary = "ranks,"
        run(*base, "--verify-against", d / "model.pt2", want_rc=2, must=["model.pt2"], must_not=[summary])
        run(*base, "--verify", d / "expected.safetensors", want_rc=2,
            must=["expected.safetensors", "--verify-against"], must_not=[summary])
        run(*base, "--verify-against", d / "missing.safetensors", want_rc=2, must=["missing.safetensors"],
            must_not=[summary])
        run(*base, "--verify-against", d / "inputs.safetensors", want_rc=2,
            must=["inputs.safetensors", "'input.0' is not an output"], must_not=[summary])
        run(*base, "--verify", d / "model.pt2", "--verify-against", d / "expected.safetensors", want_rc=2,
            must=["both"], must_not=[summary])
        run(*base, "--verify", d / "model.pt2", "--steps", 3, want_rc=2, must=["--steps 3"], must_not=[summary])
    for f in failures:
        print("FAIL:", f)
    print(f"verify_against: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
