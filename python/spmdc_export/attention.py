"""How a train step's scaled_dot_product_attention reaches the joint graph.

"fused" (opt-in: --attention fused) keeps the fused CPU kernel and its backward:

    _scaled_dot_product_flash_attention_for_cpu(q, k, v, ...) -> (out, logsumexp [b, h, L])
    _scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, logsumexp, ...)

so the step saves out and the log-sum-exp, as eager does, not the
[b, h, L, S] scores and probabilities. "math" (the default) traces sdpa's
math backend (matmul, softmax, matmul, differentiated op by op), which
runs on any device.

Why a decomposition table: torch's Core ATen table (what make_fx and
_export_forward_backward apply) decomposes the fused forward into math ops
but keeps the fused backward, handing it the attention probabilities as its
logsumexp, so the q, k and v gradients come out wrong (torch 2.14.1). The
fused mode takes the forward out of the table; `check` then proves that
every fused backward reads a fused forward's own logsumexp (the export
refuses the step otherwise).
"""
import contextlib
import operator

import torch

MODES = ("fused", "math")
FORWARD = "aten._scaled_dot_product_flash_attention_for_cpu.default"
BACKWARD = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"


def decompositions(mode):
    """The Core ATen decomposition table, less the fused CPU forward in "fused" mode."""
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    if mode == "fused":
        table = {k: v for k, v in table.items() if str(k) != FORWARD}
    return table


@contextlib.contextmanager
def context(mode):
    """Traces sdpa as `mode` says. "math": sdpa_kernel([MATH]). "fused":
    torch.export.experimental._export_forward_backward takes no table, so
    torch._decomp.core_aten_decompositions (which it imports when called)
    answers `decompositions("fused")` meanwhile; `check` catches a torch
    where that does not reach it."""
    if mode == "math":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            yield
            return
        with sdpa_kernel([SDPBackend.MATH]):
            yield
        return
    import torch._decomp as decomp
    original = decomp.core_aten_decompositions
    table = decompositions("fused")
    decomp.core_aten_decompositions = lambda: dict(table)
    try:
        yield
    finally:
        decomp.core_aten_decompositions = original


def _lse_source(node):
    """The fused forward whose logsumexp (result 1) `node` is, or None."""
    if node.op != "call_function" or node.target is not operator.getitem or node.args[1] != 1:
        return None
    fwd = node.args[0]
    return fwd if str(getattr(fwd, "target", "")) == FORWARD else None


def check(graph):
    """None when every fused CPU backward in `graph` (an FX graph) reads a
    fused forward's logsumexp; else the reason (the wrong-gradient joint)."""
    for node in graph.nodes:
        if node.op != "call_function" or str(node.target) != BACKWARD:
            continue
        lse = node.kwargs.get("logsumexp", node.args[5] if len(node.args) > 5 else None)
        if lse is None or _lse_source(lse) is None:
            return (f"{node.name} ({BACKWARD}) reads {getattr(lse, 'name', lse)}, not a fused forward's "
                    f"logsumexp (torch {torch.__version__} decomposed the forward)")
    return None


def count(graph):
    """How many fused CPU attention forwards `graph` holds."""
    return sum(1 for n in graph.nodes if n.op == "call_function" and str(n.target) == FORWARD)
