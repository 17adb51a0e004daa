#!/usr/bin/env python3
"""Prints every op torch.export can leave in a graph, one "aten.<name>.<overload>" a line.

    .venv/bin/python scripts/gen-op-list.py > lib/sharding/rules/ops.txt

The list is the ops tagged torch.Tag.core in the installed torch, plus the
EXTRAS below: assertion and metadata ops, the ops training-IR exports keep
undecomposed, and the backward ops of those (BACKWARD). Each name is
checked against torch.ops; a name that does not exist, or a backward op
with no dense (CPU/CUDA) kernel (it decomposes before any graph holds it),
is dropped and named on stderr. tests/rules/OpListTest.cpp fails for every
op of the list without a sharding rule.
"""

import sys

import torch

# Ops exports keep besides the core ops: "name" (its default overload, or
# its only one) or "name.overload".
EXTRAS = """
_assert_tensor_metadata _assert_scalar _assert_async.default _assert_async.msg
_functional_assert_async.msg sym_constrain_range_for_size sym_constrain_range
linear conv1d conv2d conv3d convolution layer_norm native_layer_norm group_norm
scaled_dot_product_attention _scaled_dot_product_flash_attention_for_cpu
_scaled_dot_product_efficient_attention _scaled_dot_product_flash_attention
silu gelu relu dropout native_dropout embedding cross_entropy_loss
nll_loss_forward nll_loss_backward _log_softmax _log_softmax_backward_data
_softmax_backward_data _to_copy to.dtype clone alias lift_fresh_copy contiguous
view reshape flatten.using_ints unflatten.int transpose.int t matmul einsum
baddbmm chunk split.Tensor unbind.int new_ones new_zeros new_empty full_like
ones_like zeros_like diff tril triu masked_fill.Scalar masked_fill.Tensor
where.self softmax.int log_softmax.int type_as expand_as view_as
repeat_interleave.self_int max_pool2d adaptive_avg_pool2d avg_pool2d batch_norm
_native_batch_norm_legit_functional _native_batch_norm_legit_no_training
hardswish hardsigmoid mish softplus pad stack meshgrid arange.start cumsum topk
sort argsort index_select gather scatter.src index.Tensor
histc new_empty_strided polar view_as_complex view_as_real angle conj_physical
copysign.Scalar copysign.Tensor deg2rad digamma erfc erfinv exp2 float_power.Tensor_Tensor
fmax fmin frac heaviside hypot i0 ldexp.Tensor lgamma logaddexp logaddexp2 logit
nan_to_num nextafter rad2deg round.decimals sgn signbit sinc special_erfcx
special_i0e special_i1 special_i1e special_ndtri xlogy.Tensor cumprod median.default
median.dim nanmedian.default nanmedian.dim mode
__and__.Tensor __and__.Scalar __or__.Tensor __or__.Scalar __xor__.Tensor __xor__.Scalar
""".split()

# The backward ops (derivatives.yaml) of the EXTRAS that have one.
BACKWARD = {
    "linear": ["linear_backward"],
    "conv1d": ["convolution_backward"],
    "conv2d": ["convolution_backward"],
    "conv3d": ["convolution_backward"],
    "convolution": ["convolution_backward"],
    "layer_norm": ["native_layer_norm_backward"],
    "native_layer_norm": ["native_layer_norm_backward"],
    "group_norm": ["native_group_norm_backward"],
    "_scaled_dot_product_flash_attention_for_cpu": ["_scaled_dot_product_flash_attention_for_cpu_backward"],
    "_scaled_dot_product_efficient_attention": ["_scaled_dot_product_efficient_attention_backward"],
    "_scaled_dot_product_flash_attention": ["_scaled_dot_product_flash_attention_backward"],
    "silu": ["silu_backward"],
    "gelu": ["gelu_backward"],
    "relu": ["threshold_backward"],
    "dropout": ["native_dropout_backward"],
    "native_dropout": ["native_dropout_backward"],
    "embedding": ["embedding_backward", "embedding_dense_backward"],
    "nll_loss_forward": ["nll_loss_backward"],
    "_log_softmax": ["_log_softmax_backward_data"],
    "log_softmax": ["_log_softmax_backward_data"],
    "softmax": ["_softmax_backward_data"],
    "matmul": ["matmul_backward"],
    "max_pool2d": ["max_pool2d_with_indices_backward", "max_pool2d_backward"],
    "adaptive_avg_pool2d": ["_adaptive_avg_pool2d_backward"],
    "avg_pool2d": ["avg_pool2d_backward"],
    "batch_norm": ["native_batch_norm_backward", "batch_norm_backward"],
    "_native_batch_norm_legit_functional": ["native_batch_norm_backward"],
    "_native_batch_norm_legit_no_training": ["native_batch_norm_backward"],
    "hardswish": ["hardswish_backward"],
    "hardsigmoid": ["hardsigmoid_backward"],
    "mish": ["mish_backward"],
    "softplus": ["softplus_backward"],
    "gather": ["gather_backward"],
    "index_select": ["index_select_backward"],
}


def core_ops():
    out = set()
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
            overloads = packet.overloads()
        except (AttributeError, RuntimeError):
            continue
        for ov in overloads:
            if torch.Tag.core in getattr(packet, ov).tags:
                out.add(f"aten.{name}.{ov}")
    return out


def resolve(spec, dropped):
    """"name" or "name.overload" -> "aten.name.overload", or None (noted in dropped)."""
    name, _, ov = spec.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        dropped.append(f"{spec}: no op aten::{name}")
        return None
    overloads = packet.overloads()
    if not ov:
        ov = "default" if "default" in overloads else (overloads[0] if len(overloads) == 1 else "")
    if ov not in overloads:
        dropped.append(f"{spec}: aten::{name} has no overload '{ov}' ({', '.join(overloads)})")
        return None
    return f"aten.{name}.{ov}"


def has_dense_kernel(qualified):
    name = "aten::" + qualified.split(".", 1)[1].replace(".default", "")
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k)
               for k in ("CPU", "CUDA", "CompositeExplicitAutograd"))


def main():
    dropped = []
    ops = core_ops()
    ncore = len(ops)
    for spec in EXTRAS:
        op = resolve(spec, dropped)
        if op:
            ops.add(op)
        for bw in BACKWARD.get(spec.split(".")[0], []):
            bop = resolve(bw, dropped)
            if bop and not has_dense_kernel(bop):
                dropped.append(f"{bw} (backward of {spec}): no CPU/CUDA kernel, decomposed before export")
            elif bop:
                ops.add(bop)
    for d in sorted(set(dropped)):
        print("dropped:", d, file=sys.stderr)
    print(f"# Ops torch.export can leave in a graph (torch {torch.__version__}): the {ncore} ops")
    print("# tagged torch.Tag.core, assertion and metadata ops, the ops training-IR exports keep")
    print("# undecomposed and their backward ops. Generated, do not edit:")
    print("#   .venv/bin/python scripts/gen-op-list.py > lib/sharding/rules/ops.txt")
    print("# tests/rules/OpListTest.cpp checks every op here has a sharding rule.")
    for d in sorted(set(dropped)):
        print("# dropped:", d)
    for op in sorted(ops):
        print(op)


if __name__ == "__main__":
    main()
