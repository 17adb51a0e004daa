#!/usr/bin/env python3
"""Exports testdata/recompute/llama_train_paths: testdata's hand-written
Llama train step (export_models.LlamaLoss, 2 layers, hidden 64, seed 0) at
batch 4 x 32 tokens, through spmdc_export's one-pass joint route, whose
ops keep their nn_module_stack (testdata/pt2/llama_train, exported by
torch's route, has none, so "recompute" refuses it). e2e_memory_test
compiles it with an activation-checkpointing plan.

Usage: .venv/bin/python testdata/recompute/export.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "testdata"))

import torch  # noqa: E402
from spmdc_export import core  # noqa: E402
import export_models  # noqa: E402


def main():
    torch.manual_seed(0)
    mod = export_models.LlamaLoss()
    tok, lab = torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32))
    core.export_train_step(mod, (tok, lab), HERE / "llama_train_paths",
                           note="llama_train with module paths (one-pass joint route), batch 4 x 32")


if __name__ == "__main__":
    main()
