"""scripts/gpu_check.py's eager reference on a device other than the CPU,
with the meta device standing in for CUDA (no GPU needed): mlp, gpt_block
and llama, exported fresh with this torch, must run on the device and give
outputs there with the shapes and dtypes of the export's eager outputs.
gpt_block and llama hold factory ops whose device torch.export baked in
(the causal mask's aten.full(..., device=cpu)), which the reference must
move too (ep.module().to(device) leaves them on the CPU and fails).

    python3 tests/gpucheck/test_reference.py [WORK_DIR]
"""
import importlib.util
import os
import sys
import tempfile

from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["mlp", "gpt_block", "llama"]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "scripts", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(gpu_check, model_dir):
    """The problems of one model's reference on meta (empty: none)."""
    want = load_file(os.path.join(model_dir, "expected.safetensors"))
    try:
        outs = gpu_check.reference_outputs(*gpu_check.reference(model_dir, "meta"))
    except Exception as e:  # noqa: BLE001: the failure is the finding
        return [f"the reference failed: {type(e).__name__}: {str(e).strip().splitlines()[0]}"]
    if len(outs) != len(want):
        return [f"{len(outs)} outputs, the export's eager run gave {len(want)}"]
    problems = []
    for i, o in enumerate(outs):
        w = want[f"output.{i}"]
        if o.device.type != "meta":
            problems.append(f"output.{i} on {o.device}, not meta")
        if tuple(o.shape) != tuple(w.shape) or o.dtype != w.dtype:
            problems.append(f"output.{i} {o.dtype}{list(o.shape)}, want {w.dtype}{list(w.shape)}")
    return problems


def run(gpu_check, work):
    gpu_check.export_models(work, MODELS)
    failed = 0
    for m in MODELS:
        problems = check(gpu_check, os.path.join(work, m))
        for p in problems:
            print(f"FAIL {m}: {p}")
        if not problems:
            print(f"ok   {m}: outputs on meta, shapes and dtypes as eager's")
        failed += bool(problems)
    if failed:
        print(f"test_reference: {failed} of {len(MODELS)} models failed", file=sys.stderr)
        return 1
    return 0


def main():
    gpu_check = load_gpu_check()
    if len(sys.argv) > 1:
        return run(gpu_check, sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="spmdc-gpucheck-test-") as work:
        return run(gpu_check, work)


if __name__ == "__main__":
    sys.exit(main())
