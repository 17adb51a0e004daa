#!/usr/bin/env python3
"""Exports testdata/pipeline/llama_pipe_train: testdata's hand-written
Llama train step (export_models.LlamaLoss, 8 layers, hidden 32, seed 0) at
batch 8 x 64 tokens, so that 8 microbatches of one row each hold far more
activation bytes than the layers' weights and gradients. e2e_pipeline_test
measures each stage's peak activation memory under GPipe and 1F1B with it.

Usage: .venv/bin/python testdata/pipeline/export.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "testdata"))

import torch  # noqa: E402
import spmdc_export  # noqa: E402
import export_models  # noqa: E402


def main():
    torch.manual_seed(0)
    mod = export_models.LlamaLoss(layers=8, d=32, heads=4, ffn=64, max_seq=64)
    tok, lab = torch.randint(0, 256, (8, 64)), torch.randint(0, 256, (8, 64))
    spmdc_export.export_train_step(mod, [tok, lab], str(HERE / "llama_pipe_train"),
                                   note="8-layer Llama, batch 8 x 64: activations dominate (pipeline memory)")


if __name__ == "__main__":
    main()
