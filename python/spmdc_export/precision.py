"""Mixed precision for a train step, as FSDP2's MixedPrecisionPolicy runs it.

    python -m spmdc_export --hf llama --train --mixed-precision bf16 [--reduce-dtype float32] -o out/

The step is traced with float32 master parameters as the program's inputs.
Each parameter is cast to `param_dtype` where the step starts (FSDP2 casts
the sharded parameter before its all-gather; spmdc's compiler moves the
gather after this cast), floating-point model inputs are cast too
(FSDP2's cast_forward_inputs), and the forward runs in param_dtype with the
model's own upcasts (RMSNorm's float32 variance) traced as they run. In the
backward each parameter's gradient is cast to `reduce_dtype` (the dtype
its reduction runs in) and then to the master's dtype, which the optimizer
updates. The casts of the parameters carry the policy in their node
metadata (`custom`: {"spmdc.mixed_precision": {"param_dtype": ...,
"reduce_dtype": ...}}), which is how `spmdc compile --mixed-precision`
knows the archive's policy.
"""
import torch

KEY = "spmdc.mixed_precision"
NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
         "fp32": "float32", "float32": "float32"}


class Policy:
    """param_dtype and reduce_dtype (torch dtypes)."""

    def __init__(self, param_dtype, reduce_dtype):
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype

    def as_dict(self):
        return {"param_dtype": str(self.param_dtype).replace("torch.", ""),
                "reduce_dtype": str(self.reduce_dtype).replace("torch.", "")}


def policy(param, reduce="float32"):
    """The Policy of --mixed-precision PARAM --reduce-dtype REDUCE; ValueError
    naming the accepted spellings."""
    for what, v in (("--mixed-precision", param), ("--reduce-dtype", reduce)):
        if v not in NAMES:
            raise ValueError(f"{what} {v}: not a dtype; use {', '.join(NAMES)}")
    if NAMES[param] == "float32":
        raise ValueError(f"--mixed-precision {param}: parameters are float32 already; use bf16 or fp16")
    return Policy(getattr(torch, NAMES[param]), getattr(torch, NAMES[reduce]))


class _Cast(torch.autograd.Function):
    """p.to(param_dtype) forward; the gradient to reduce_dtype, then to p's dtype, backward."""

    @staticmethod
    def forward(ctx, p, param_dtype, reduce_dtype):
        ctx.master, ctx.reduce = p.dtype, reduce_dtype
        return p.to(param_dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.reduce).to(ctx.master), None, None


def cast_params(params, pol):
    """{name: the parameter as the forward reads it}: floating-point
    parameters cast to pol.param_dtype."""
    return {k: _Cast.apply(p, pol.param_dtype, pol.reduce_dtype) if p.is_floating_point() else p
            for k, p in params.items()}


def cast_inputs(batch, n_model_inputs, pol):
    """The step's inputs with the model's floating-point ones (the first
    n_model_inputs; loss targets are not the model's) cast to param_dtype."""
    return tuple(t.to(pol.param_dtype) if i < n_model_inputs and t.is_floating_point() else t
                 for i, t in enumerate(batch))


def tag(gm, pol):
    """Records the policy on each parameter's cast (the first user of a
    p_* placeholder that converts its dtype). Returns how many were tagged."""
    n = 0
    for node in gm.graph.nodes:
        if node.op != "placeholder" or not node.name.startswith("p_"):
            continue
        for user in node.users:
            val = user.meta.get("val")
            if user.op == "call_function" and val is not None and val.dtype == pol.param_dtype:
                user.meta["custom"] = dict(user.meta.get("custom") or {}, **{KEY: pol.as_dict()})
                n += 1
    return n


def eager_step(module, inputs, n_model_inputs, pol):
    """The loss and float32 gradients of one mixed-precision step in eager
    mode ({"loss", "grad.<fqn>"}), as expected.safetensors holds them."""
    from torch.func import functional_call
    params = {k: p.detach().requires_grad_(p.requires_grad) for k, p in module.named_parameters()}
    buffers = dict(module.named_buffers())
    loss = functional_call(module, {**cast_params(params, pol), **buffers},
                           cast_inputs(inputs, n_model_inputs, pol))
    trainable = [k for k, p in params.items() if p.requires_grad]
    grads = torch.autograd.grad(loss, [params[k] for k in trainable])
    out = {"loss": loss.detach()}
    out.update({f"grad.{k}": g.detach() for k, g in zip(trainable, grads)})
    return out
