"""Static-shape routing for transformers 4.x MoE blocks, for torch.export.

transformers 4.57's sparse MoE blocks (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE,
DeepSeek-V3) loop over the experts and pick each one's tokens with
`torch.where(expert_mask[e])`: a data-dependent size torch.export cannot
trace (GuardOnDataDependentSymNode on Eq(u0, 0)). static_routing() gives
each such block, for the export, a forward that computes the same function
with static shapes by dense dispatch: every expert runs on every token and
its output is scaled by the token's routing weight for that expert, zero
where the router did not pick it (a [tokens, experts] matrix scattered from
the top-k weights), summed in expert order as the original's index_add_
does. Router, top-k, normalization, shared experts and the router logits
(read by the auxiliary load-balancing loss) are the original's code.

Example, Mixtral with 4 experts and top-2: a token routed to experts 1 and
3 with weights (0.7, 0.3) gets 0*E0(x) + 0.7*E1(x) + 0*E2(x) + 0.3*E3(x),
the original's 0.7*E1(x) + 0.3*E3(x) (adding an exact zero changes
nothing). It costs experts/top_k times the expert FLOPs: a tool for
exporting and checking programs, not for serving large MoE models.

Blocks of transformers 5 (one fused experts module, not a ModuleList) are
left alone: fixups.aten_experts gives them their batched_mm path.
"""
import types

import torch
import torch.nn.functional as F


def dense_dispatch(experts, x, topk_indices, topk_weights):
    """sum over e of experts[e](x) * w[:, e], where w is the [tokens,
    experts] matrix holding topk_weights at topk_indices and zero elsewhere;
    x is [tokens, hidden]. The sum runs in expert order (the order of the
    original's index_add_), in the dtype of expert(x) * topk_weights."""
    dense = torch.zeros(x.shape[0], len(experts), dtype=topk_weights.dtype, device=x.device)
    dense = dense.scatter(1, topk_indices, topk_weights)
    out = None
    for e, expert in enumerate(experts):
        y = expert(x) * dense[:, e, None]
        out = y if out is None else out + y
    return out


def softmax_topk_forward(self, hidden_states):
    """forward of Mixtral-, Qwen2-MoE-, Qwen3-MoE- and OLMoE-style blocks:
    softmax router, top-k (renormalized unless norm_topk_prob is False;
    Mixtral always renormalizes), Mixtral's router jitter in train mode, and
    Qwen2-MoE's sigmoid-gated shared expert. Returns (hidden, router_logits)."""
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    jitter = getattr(self, "jitter_noise", 0)
    if self.training and jitter > 0:
        hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - jitter, 1.0 + jitter)
    hidden_states = hidden_states.view(-1, hidden_dim)
    router_logits = self.gate(hidden_states)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
    if getattr(self, "norm_topk_prob", True):
        routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(hidden_states.dtype)
    final_hidden_states = dense_dispatch(self.experts, hidden_states, selected_experts, routing_weights)
    final_hidden_states = final_hidden_states.to(hidden_states.dtype)
    shared = getattr(self, "shared_expert", None)
    if shared is not None:
        shared_output = F.sigmoid(self.shared_expert_gate(hidden_states)) * shared(hidden_states)
        final_hidden_states = final_hidden_states + shared_output
    return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim), router_logits


def deepseek_moe(self, hidden_states, topk_indices, topk_weights):
    """DeepseekV3MoE.moe (its forward, router and shared experts are kept):
    the routed experts' sum in the dtype of topk_weights, cast back."""
    out = dense_dispatch(self.experts, hidden_states, topk_indices, topk_weights)
    return out.type(hidden_states.dtype)


def _has_expert_list(block):
    return isinstance(getattr(block, "experts", None), torch.nn.ModuleList) and len(block.experts) > 0


def _softmax_block(block):
    return _has_expert_list(block) and isinstance(getattr(block, "gate", None), torch.nn.Linear) \
        and isinstance(getattr(block, "top_k", None), int)


# transformers class name -> (method replaced, replacement, check that the block is 4.x's)
BLOCKS = {
    "MixtralSparseMoeBlock": ("forward", softmax_topk_forward, _softmax_block),
    "Qwen2MoeSparseMoeBlock": ("forward", softmax_topk_forward, _softmax_block),
    "Qwen3MoeSparseMoeBlock": ("forward", softmax_topk_forward, _softmax_block),
    "OlmoeSparseMoeBlock": ("forward", softmax_topk_forward, _softmax_block),
    "DeepseekV3MoE": ("moe", deepseek_moe, _has_expert_list),
}


def _replacement(module):
    """(method name, replacement) for a transformers MoE block BLOCKS knows, else None."""
    entry = BLOCKS.get(type(module).__name__)
    if entry is None or not type(module).__module__.startswith("transformers."):
        return None
    method, fn, applies = entry
    return (method, fn) if applies(module) else None


def static_routing(module, log):
    """Gives every MoE block of `module` that BLOCKS lists (transformers
    4.x's, with a ModuleList of experts) the dense-dispatch routing as an
    instance attribute; parameter names and the module tree do not change.
    Logs one line per block class; returns the undo."""
    replaced, counts = [], {}
    for block in module.modules():
        found = _replacement(block)
        if found is None:
            continue
        method, fn = found
        old = block.__dict__.get(method)
        setattr(block, method, types.MethodType(fn, block))
        replaced.append((block, method, old))
        counts[type(block).__name__] = counts.get(type(block).__name__, 0) + 1
    for name, n in counts.items():
        log(f"{name}: {n} block{'s' if n > 1 else ''} routed by dense dispatch for the export (every expert "
            f"on every token, weighted by its routing weight, zero where unrouted; transformers' loop over "
            f"experts has data-dependent sizes torch.export cannot trace)")

    def undo():
        for block, method, old in reversed(replaced):
            if old is None:
                delattr(block, method)
            else:
                setattr(block, method, old)
    return undo
