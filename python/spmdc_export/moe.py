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

static_routing(experts_op=True) instead stacks each block's experts into
the spmdc::moe_experts op (experts.py): the ModuleList `experts` becomes a
StackedExperts holding w1 (the gate projection), w3 (up) [E, H, D] and w2
(down) [E, D, H], so that `<block>.experts.w1` ... can be placed S(0) on
an ep axis (docs/EXPERT_PARALLEL.md); the router is kept as above. Only
experts that are three bias-free linears with silu (the op's FFN) are
stacked; other blocks keep the dense dispatch.

Blocks of transformers 5 (one fused experts module, not a ModuleList) are
left alone: fixups.aten_experts gives them their batched_mm path.
"""
import types

import torch
import torch.nn.functional as F

from .experts import experts as experts_op


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


class StackedExperts(torch.nn.Module):
    """A block's E experts as the experts op's stacked weights: w1, w3
    [E, H, D] and w2 [E, D, H] (parameters, copies of the experts' own)."""

    def __init__(self, w1, w2, w3):
        super().__init__()
        self.w1, self.w2, self.w3 = (torch.nn.Parameter(w, requires_grad=w.requires_grad) for w in (w1, w2, w3))

    def __len__(self):
        return self.w1.shape[0]

    def forward(self, x, indices, weights):
        """The routed experts' output for x [T, D], indices and weights [T, K]."""
        return experts_op(x, indices, weights, self.w1, self.w2, self.w3)


def dispatch(block, x, topk_indices, topk_weights):
    """The routed experts' sum for x [T, D]: the experts op where the block's
    experts are stacked, else dense_dispatch (both in expert(x)'s dtype
    times the weights' dtype, as the original)."""
    if isinstance(block.experts, StackedExperts):
        return block.experts(x, topk_indices, topk_weights.to(x.dtype)).to(torch.result_type(x, topk_weights))
    return dense_dispatch(block.experts, x, topk_indices, topk_weights)


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
    final_hidden_states = dispatch(self, hidden_states, selected_experts, routing_weights)
    final_hidden_states = final_hidden_states.to(hidden_states.dtype)
    shared = getattr(self, "shared_expert", None)
    if shared is not None:
        shared_output = F.sigmoid(self.shared_expert_gate(hidden_states)) * shared(hidden_states)
        final_hidden_states = final_hidden_states + shared_output
    return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim), router_logits


def deepseek_moe(self, hidden_states, topk_indices, topk_weights):
    """DeepseekV3MoE.moe (its forward, router and shared experts are kept):
    the routed experts' sum in the dtype of topk_weights, cast back."""
    out = dispatch(self, hidden_states, topk_indices, topk_weights)
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


# (gate, down, up) projections of one expert: Mixtral's w1, w2, w3; the others' gate_proj, down_proj, up_proj
PROJECTIONS = (("w1", "w2", "w3"), ("gate_proj", "down_proj", "up_proj"))


def _is_silu(act):
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ in ("SiLU", "SiLUActivation")


def _projections(expert):
    """(gate, down, up) nn.Linear of an expert computing down(silu(gate(x)) * up(x)), else None."""
    for names in PROJECTIONS:
        layers = [getattr(expert, n, None) for n in names]
        if all(isinstance(lin, torch.nn.Linear) and lin.bias is None for lin in layers) \
                and _is_silu(getattr(expert, "act_fn", None)):
            return layers
    return None


def stacked(experts):
    """A StackedExperts of a ModuleList of experts (copies of their weights,
    gate -> w1, down -> w2, up -> w3), or None where an expert is not the
    op's FFN (another activation, a bias, other shapes)."""
    layers = [_projections(e) for e in experts]
    if not layers or any(p is None for p in layers):
        return None
    weights = [[lin.weight for lin in p] for p in layers]
    if any([w.shape for w in ws] != [w.shape for w in weights[0]] for ws in weights):
        return None
    with torch.no_grad():
        w1, w2, w3 = (torch.stack([ws[i].detach() for ws in weights]).requires_grad_(weights[0][i].requires_grad)
                      for i in range(3))
    return StackedExperts(w1, w2, w3)


def _layer_glob(name):
    """A block's module name with its layer indices as `*`: model.layers.0.mlp -> model.layers.*.mlp."""
    return ".".join("*" if part.isdigit() else part for part in name.split("."))


def _stack_note(cls, names, sample):
    """The note of the blocks of one class whose experts were stacked."""
    glob = _layer_glob(names[0]) + ".experts.*"
    shape = lambda w: "x".join(map(str, w.shape))  # noqa: E731
    return (f"{cls}: {len(names)} block{'s' if len(names) > 1 else ''}' experts stacked into the experts op "
            f"(spmdc::moe_experts): parameters {names[0]}.experts.w1, w3 [{shape(sample.w1)}] and w2 "
            f"[{shape(sample.w2)}] replace experts.<e>.* (expert parallelism: place \"{glob}\" S(0) on an ep "
            f"axis; --moe dense keeps the per-expert parameters); router as transformers computes it")


def static_routing(module, log, experts_op=False):
    """Gives every MoE block of `module` that BLOCKS lists (transformers
    4.x's, with a ModuleList of experts) static-shape routing as an
    instance attribute: the dense dispatch (parameter names and the module
    tree unchanged), or with experts_op=True the experts op on the block's
    experts stacked into a StackedExperts (the parameters `experts.w1`,
    `experts.w2`, `experts.w3` replace `experts.<e>.*`; blocks whose experts
    are not the op's FFN keep the dense dispatch). Logs one line per block
    class and route; returns the undo, which puts the experts back."""
    found = [(name, block, _replacement(block)) for name, block in module.named_modules()]
    replaced, dense, stacks = [], {}, {}
    for name, block, how in found:
        if how is None:
            continue
        method, fn = how
        old = block.__dict__.get(method)
        stack = stacked(block.experts) if experts_op else None
        if stack is not None:
            replaced.append((block, "experts", block.experts))
            block.experts = stack
            stacks.setdefault(type(block).__name__, []).append(name)
        else:
            dense[type(block).__name__] = dense.get(type(block).__name__, 0) + 1
        setattr(block, method, types.MethodType(fn, block))
        replaced.append((block, method, old))
    for cls, names in stacks.items():
        log(_stack_note(cls, names, module.get_submodule(names[0]).experts))
    for cls, n in dense.items():
        log(f"{cls}: {n} block{'s' if n > 1 else ''} routed by dense dispatch for the export (every expert "
            f"on every token, weighted by its routing weight, zero where unrouted; transformers' loop over "
            f"experts has data-dependent sizes torch.export cannot trace)"
            + ("; not stacked into the experts op: its experts are not three bias-free linears with silu"
               if experts_op else ""))

    def undo():
        for block, attr, old in reversed(replaced):
            if attr == "experts":
                block.experts = old
            elif old is None:
                delattr(block, attr)
            else:
                setattr(block, attr, old)
    return undo
