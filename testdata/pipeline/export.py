#!/usr/bin/env python3
"""Exports testdata/pipeline/llama_pipe_train: testdata's hand-written
Llama train step (export_models.LlamaLoss, 8 layers, hidden 32, seed 0) at
batch 8 x 64 tokens, so that 8 microbatches of one row each hold far more
activation bytes than the layers' weights and gradients. e2e_pipeline_test
measures each stage's peak activation memory under GPipe and 1F1B with it.

Also testdata/pipeline/hf_llama_pipe_train: a transformers LlamaForCausalLM
(8 layers, hidden 32, 2 heads, vocab 256, seed 0; spmdc_export.hf.build
with HF_CONFIG) train step at batch 4 x 16, which pipeline_mesh_vs_torch
pipelines against torch.distributed.pipelining and eager.

And testdata/pipeline/cnn_pipe_train: pipe_cnn.PipeCNN (8 conv blocks with
GroupNorm, a linear head, cross-entropy; seed 0) at batch 8 x 3 x 16 x 16,
which pipeline_mesh_vs_torch cuts into 4 stages.

Usage: .venv/bin/python testdata/pipeline/export.py [hf|llama|cnn ...] (all three by default)
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "testdata"))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import spmdc_export  # noqa: E402
import export_models  # noqa: E402
import pipe_cnn  # noqa: E402


HF_CONFIG = dict(layers=8, hidden=32, heads=2, vocab=256, batch=4, seq=16)


def export_hf():
    from spmdc_export import core, hf
    torch.manual_seed(0)
    m = hf.build("llama", train=True, **HF_CONFIG)
    core.export_train_step(m.module, m.inputs, str(HERE / "hf_llama_pipe_train"), loss_fn=m.loss_fn,
                           targets=m.targets)


def export_llama():
    torch.manual_seed(0)
    mod = export_models.LlamaLoss(layers=8, d=32, heads=4, ffn=64, max_seq=64)
    tok, lab = torch.randint(0, 256, (8, 64)), torch.randint(0, 256, (8, 64))
    spmdc_export.export_train_step(mod, [tok, lab], str(HERE / "llama_pipe_train"),
                                   note="8-layer Llama, batch 8 x 64: activations dominate (pipeline memory)")


def export_cnn():
    torch.manual_seed(0)
    cnn = pipe_cnn.PipeCNN()
    images, classes = torch.randn(8, 3, 16, 16), torch.randint(0, pipe_cnn.CLASSES, (8,))
    spmdc_export.export_train_step(cnn, [images, classes], str(HERE / "cnn_pipe_train"),
                                   note="8-block GroupNorm conv net, batch 8 x 3 x 16 x 16 (4 pipeline stages)")


EXPORTS = {"hf": export_hf, "llama": export_llama, "cnn": export_cnn}


def main():
    for name in sys.argv[1:] or EXPORTS:
        EXPORTS[name]()


if __name__ == "__main__":
    main()
