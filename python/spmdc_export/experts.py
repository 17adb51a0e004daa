"""Grouped MoE experts as one op pair that torch.export keeps whole.

`experts(x, indices, weights, w1, w2, w3)` is torchtitan's GroupedExperts
after the router: token t's output is

    sum over k of weights[t, k] * FFN_e(x[t]),  e = indices[t, k],
    FFN_e(v) = w2[e] @ (silu(w1[e] @ v) * (w3[e] @ v))

with the experts' weights stacked: w1, w3 [E, H, D], w2 [E, D, H]. It is
the custom op `spmdc::moe_experts` (a fake kernel for tracing, an autograd
formula calling `spmdc::moe_experts_backward`), so a forward export and a
joint train step hold one node each, whatever the routing. spmdc's
sharding rule lets the expert dim and the token dim split together over
one mesh axis (expert parallelism) and spmd-run runs both ops itself: on
one rank, each expert on its tokens; under ep, an all-to-all of counts, the
tokens to their experts' ranks, the local experts, and the results back
(docs/EXPERT_PARALLEL.md). The Python kernels below serve eager runs and
tracing only; spmd-run never calls them.

Example (a torchtitan-style MoE layer):

    scores = F.softmax(self.router(x), dim=-1)
    weights, indices = torch.topk(scores, k=2, dim=-1)
    out = spmdc_export.experts.experts(x, indices, weights, self.w1, self.w2, self.w3)
"""
import torch
import torch.nn.functional as F

NAMESPACE = "spmdc"  # ops spmd-run runs itself (fixups.python_only_ops leaves them)


def _ffn(v, w1, w2, w3):
    return (F.silu(v @ w1.t()) * (v @ w3.t())) @ w2.t()


@torch.library.custom_op("spmdc::moe_experts", mutates_args=())
def moe_experts(x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, w1: torch.Tensor,
                w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """x [T, D], indices [T, K] (int64 expert ids), weights [T, K] -> [T, D]."""
    out = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        t, k = torch.nonzero(indices == e, as_tuple=True)
        if t.numel():
            y = _ffn(x[t], w1[e], w2[e], w3[e]) * weights[t, k, None].to(x.dtype)
            out.index_add_(0, t, y)
    return out


@moe_experts.register_fake
def _(x, indices, weights, w1, w2, w3):
    return torch.empty_like(x)


@torch.library.custom_op("spmdc::moe_experts_backward", mutates_args=())
def moe_experts_backward(grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
                         w1: torch.Tensor, w2: torch.Tensor,
                         w3: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                    torch.Tensor]:
    """Gradients of moe_experts for x, weights, w1, w2, w3 (written out:
    autograd does not run inside a custom op's kernel)."""
    gx, gw = torch.zeros_like(x), torch.zeros_like(weights)
    g1, g2, g3 = torch.zeros_like(w1), torch.zeros_like(w2), torch.zeros_like(w3)
    for e in range(w1.shape[0]):
        t, k = torch.nonzero(indices == e, as_tuple=True)
        if not t.numel():
            continue
        v, g0 = x[t], grad[t]
        gy = g0 * weights[t, k, None].to(x.dtype)
        h1, h3 = v @ w1[e].t(), v @ w3[e].t()
        s = F.silu(h1)
        a = s * h3
        gw[t, k] = (g0 * (a @ w2[e].t())).sum(1).to(weights.dtype)
        g2[e] = gy.t() @ a
        ga = gy @ w2[e]
        sig = torch.sigmoid(h1)
        gh1, gh3 = ga * h3 * sig * (1 + h1 * (1 - sig)), ga * s
        g1[e] = gh1.t() @ v
        g3[e] = gh3.t() @ v
        gx.index_add_(0, t, gh1 @ w1[e] + gh3 @ w3[e])
    return gx, gw, g1, g2, g3


@moe_experts_backward.register_fake
def _(grad, x, indices, weights, w1, w2, w3):
    return (torch.empty_like(x), torch.empty_like(weights), torch.empty_like(w1), torch.empty_like(w2),
            torch.empty_like(w3))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, indices, weights, w1, w2, w3 = ctx.saved_tensors
    gx, gw, g1, g2, g3 = moe_experts_backward(grad.contiguous(), x, indices, weights, w1, w2, w3)
    return gx, None, gw, g1, g2, g3


moe_experts.register_autograd(_backward, setup_context=_setup_context)


def experts(x, indices, weights, w1, w2, w3):
    """The routed experts' output for x [T, D] (see the module's doc);
    indices are cast to int64, the op's index type."""
    return moe_experts(x, indices.to(torch.int64), weights, w1, w2, w3)
