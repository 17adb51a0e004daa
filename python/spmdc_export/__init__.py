"""spmdc_export: torch.export archives in the layout spmdc and spmd-run read.

    import spmdc_export
    spmdc_export.export(model, (tokens,), "out/")                  # inference
    spmdc_export.export_train_step(model, (x,), "out/", loss_fn=F.mse_loss, targets=(y,))
    spmdc_export.export_train_step(model, (x,), "out/", ..., precision="bf16")   # FSDP2-style mixed precision

    python -m spmdc_export mypkg.models:make_model --example-input 'randint(0,256,(2,32))' -o out/
    python -m spmdc_export --hf llama --layers 2 --hidden 64 -o out/
    python -m spmdc_export --hf path/to/checkpoint-folder -o out/   # by reference: weights never read

out/ then holds model.pt2, inputs.safetensors (input.0, ...), expected.safetensors
(eager output.<i>, or loss and grad.<fqn>), meta.json, and tp_plan.json for a
Hugging Face model with a tensor-parallel plan. torch is imported on first use.
A checkpoint folder exported by reference (hfref.py) has its parameters on
meta in model.pt2, their files and tensors in its extra/spmdc_weights.json,
and no expected.safetensors unless --expected loads the weights.
"""
__version__ = "0.1.0"

_API = ("export", "export_train_step", "save_case", "find_tp_plan", "write_tp_plan", "ExportError",
        "check_torch")
__all__ = list(_API)


def __getattr__(name):
    if name in _API:
        from . import core
        return getattr(core, name)
    raise AttributeError(f"module 'spmdc_export' has no attribute {name!r}")
