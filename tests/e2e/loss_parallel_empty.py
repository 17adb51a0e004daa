#!/usr/bin/env python3
"""Loss parallelism where a rank's vocabulary chunk is empty, against eager.

Usage:
    loss_parallel_empty.py SPMDC SPMD_RUN

A tiny language model (embedding 5 x 16, a linear LM head of 5 classes,
cross-entropy) is exported as one train step with spmdc_export. Its LM head
is laid out S(0) over 4 ranks, so the logits stay on vocabulary shards of
torch.chunk sizes 2, 2, 1, 0: the last rank holds no class. The compile
must apply loss parallelism (its note), and one step's loss and gradients
must equal eager PyTorch's (expected.safetensors, rel 1e-5), as must the
same on 2x2 with the batch on the first axis. Exit 1 on a mismatch.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from spmdc_export import core  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=5, d=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        return self.head(torch.tanh(self.emb(tokens)))


def loss_fn(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def main():
    spmdc, spmd_run = sys.argv[1], sys.argv[2]
    failures = []
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="spmdc-lp-empty-") as tmp:
        d = Path(tmp)
        tokens, labels = torch.randint(0, 5, (4, 6)), torch.randint(0, 5, (4, 6))
        labels[0, 0] = 4  # the last class, held by rank 2 (rank 3 holds none)
        core.export_train_step(TinyLM(), (tokens,), d, loss_fn=loss_fn, targets=(labels,))
        want = load_file(str(d / "expected.safetensors"))
        for shape, axes, placements in (([4], ["tp"], {"tp": "S(0)"}),
                                        ([2, 2], ["dp", "tp"], {"dp": "R", "tp": "S(0)"})):
            mesh = "x".join(map(str, shape))
            schema = {"version": 1, "mesh": {"shape": shape, "axes": axes},
                      "params": [{"match": "head.weight", "placements": placements}], "outputs": "replicate"}
            if len(shape) == 2:
                schema["inputs"] = [{"match": "*", "placements": {"dp": "S(0)", "tp": "R"}}]
            (d / "s.json").write_text(json.dumps(schema))
            r = subprocess.run([spmdc, "compile", str(d / "model.pt2"), "--schema", str(d / "s.json"), "--mesh",
                                mesh, "-o", str(d / "p.spmd")], capture_output=True, text=True)
            if r.returncode != 0 or "log-softmax on the class shards" not in r.stdout + r.stderr:
                failures.append(f"mesh {mesh}: compile exit {r.returncode} without the loss-parallel note: "
                                f"{r.stdout}{r.stderr}")
                continue
            r = subprocess.run([spmd_run, "-n", str(shape[0] * (shape[1] if len(shape) > 1 else 1)),
                                str(d / "p.spmd"), "--inputs", str(d / "inputs.safetensors"), "-o",
                                str(d / "out.safetensors"), "-q"], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"mesh {mesh}: spmd-run exit {r.returncode}: {r.stderr.strip()}")
                continue
            got = load_file(str(d / "out.safetensors"))
            for name, w in want.items():
                err = float((got[name].double() - w.double()).abs().max()) / max(1e-12, float(w.abs().max()))
                ok = err <= 1e-5 and bool(torch.isfinite(got[name]).all())
                print(f"mesh {mesh:4} {name:22} {'ok' if ok else 'FAIL'} (rel {err:.2g})")
                if not ok:
                    failures.append(f"mesh {mesh}: {name} rel {err:.3g}")
    for f in failures:
        print("FAIL:", f)
    print(f"loss_parallel_empty: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
