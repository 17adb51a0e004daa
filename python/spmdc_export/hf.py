"""Ready-made Hugging Face models with random weights and small configs
(nothing is downloaded), for `python -m spmdc_export --hf NAME`.

build(name, ...) returns a Model: the module (its forward takes input_ids and
returns the logits; parameter names are the transformers model's own, so its
tp plan's globs apply), the example inputs, and for a train step the labels
and the loss (cross-entropy of the logits). hfref.py builds a local
checkpoint folder (`--hf PATH`) with the same fixups (zero_dropout,
logits_forward, causal_lm) and exports it by reference.
"""
from .core import ExportError

VOCAB = 256


def _decoder(cfg, model, kv_heads_half=False, sized=None, **extra):
    """(config class, model class, kw(layers, hidden, heads, vocab, seq) -> config keywords); sized(hidden,
    heads) gives the keywords that depend on the width (an MoE's expert sizes)."""
    def kw(layers, hidden, heads, vocab, seq):
        kv = heads // 2 if kv_heads_half and heads % 2 == 0 else heads
        return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                    num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=max(64, seq),
                    **(sized(hidden, heads) if sized else {}), **extra)
    return cfg, model, kw


def _expert_sizes(hidden, heads):
    return dict(moe_intermediate_size=hidden)


def _shared_expert_sizes(hidden, heads):
    return dict(moe_intermediate_size=hidden, shared_expert_intermediate_size=hidden)


def _deepseek_sizes(hidden, heads):
    head = hidden // heads
    return dict(moe_intermediate_size=hidden, kv_lora_rank=hidden // 2, q_lora_rank=hidden // 2,
                qk_rope_head_dim=max(2, head // 2 // 2 * 2), qk_nope_head_dim=max(1, head // 2), v_head_dim=head)


MODELS = {
    "llama": _decoder("LlamaConfig", "LlamaForCausalLM"),
    "mistral": _decoder("MistralConfig", "MistralForCausalLM", kv_heads_half=True, sliding_window=None),
    "qwen2": _decoder("Qwen2Config", "Qwen2ForCausalLM", kv_heads_half=True),
    # MoE decoders: the export stacks transformers 4.x's experts into the experts op (moe.py; --moe dense: dense
    # dispatch)
    "mixtral": _decoder("MixtralConfig", "MixtralForCausalLM", kv_heads_half=True, sliding_window=None,
                        num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": _decoder("Qwen2MoeConfig", "Qwen2MoeForCausalLM", kv_heads_half=True, sized=_shared_expert_sizes,
                          num_experts=4, num_experts_per_tok=2),
    "qwen3_moe": _decoder("Qwen3MoeConfig", "Qwen3MoeForCausalLM", kv_heads_half=True, sized=_expert_sizes,
                          num_experts=4, num_experts_per_tok=2, norm_topk_prob=True),
    "olmoe": _decoder("OlmoeConfig", "OlmoeForCausalLM", num_experts=8, num_experts_per_tok=2),
    "deepseek_v3": _decoder("DeepseekV3Config", "DeepseekV3ForCausalLM", sized=_deepseek_sizes,
                            n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
                            first_k_dense_replace=1),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             lambda layers, hidden, heads, vocab, seq: dict(vocab_size=vocab, n_embd=hidden, n_layer=layers,
                                                            n_head=heads, n_positions=max(64, seq))),
    "bert": ("BertConfig", "BertForMaskedLM",
             lambda layers, hidden, heads, vocab, seq: dict(vocab_size=vocab, hidden_size=hidden,
                                                            intermediate_size=2 * hidden, num_hidden_layers=layers,
                                                            num_attention_heads=heads,
                                                            max_position_embeddings=max(64, seq), type_vocab_size=2)),
}


class Model:
    def __init__(self, module, inputs, targets=(), loss_fn=None):
        self.module, self.inputs, self.targets, self.loss_fn = module, inputs, targets, loss_fn


def transformers_module():
    try:
        import transformers
    except ImportError:
        raise ExportError("--hf needs the transformers package, which this Python does not have: "
                          "pip install transformers") from None
    return transformers


def first_line(e):
    """`Type: first line of the message` of an exception."""
    lines = [x for x in str(e).strip().splitlines() if x.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def zero_dropout(cfg):
    """Sets every dropout probability of a config to 0 (eager and the program then agree)."""
    for k, v in list(vars(cfg).items()):
        if "drop" in k and isinstance(v, float):
            setattr(cfg, k, 0.0)


def logits_forward(module):
    """Gives `module` a forward(input_ids) -> logits, in a subclass of its own
    class so that the parameter names stay the model's own."""
    base = type(module)

    def forward(self, input_ids):
        return base.forward(self, input_ids=input_ids).logits

    module.__class__ = type(base.__name__, (base,), {"forward": forward, "__module__": base.__module__,
                                                       "__qualname__": base.__qualname__})
    return module


def build(name, layers=2, hidden=64, heads=None, vocab=VOCAB, batch=2, seq=16, train=False, attn=None):
    """A small random `name` model (one of MODELS) and its example inputs."""
    import torch
    if name not in MODELS:
        raise ExportError(f"unknown --hf model '{name}': choose one of {', '.join(MODELS)}, or name a local "
                          f"checkpoint folder")
    heads = heads or max(1, hidden // 16)
    for what, v in (("--layers", layers), ("--hidden", hidden), ("--heads", heads), ("--vocab", vocab),
                    ("--batch", batch), ("--seq", seq)):
        if v < 1:
            raise ExportError(f"{what} must be at least 1, not {v}")
    if hidden % heads:
        raise ExportError(f"--hidden {hidden} is not a multiple of --heads {heads}")
    if vocab < 4:
        raise ExportError("--vocab must be at least 4 (ids 0-2 are pad, bos and eos)")
    transformers = transformers_module()
    cfg_name, model_name, kw = MODELS[name]
    kw = dict(kw(layers, hidden, heads, vocab, seq), pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False)
    if train:
        kw["tie_word_embeddings"] = False  # the joint graph needs one tensor per parameter name
    try:
        cfg = getattr(transformers, cfg_name)(**kw)
        zero_dropout(cfg)
        if attn:
            cfg._attn_implementation = attn
        module = getattr(transformers, model_name)(cfg)
    except Exception as e:  # noqa: BLE001  (a missing class, or transformers failing to import one)
        raise ExportError(f"transformers {transformers.__version__} could not build {model_name} "
                          f"({first_line(e)}); check that transformers, torch "
                          f"and torchvision (if installed) are versions made for each other") from None
    if train:
        pred = getattr(getattr(module, "cls", None), "predictions", None)
        if pred is not None and getattr(pred, "decoder", None) is not None and pred.decoder.bias is pred.bias:
            # BERT's head bias is one tensor under two names; keep one (the joint graph needs a
            # gradient for each name).
            pred.decoder.bias = torch.nn.Parameter(pred.bias.detach().clone())
            del pred.bias
    return causal_lm(logits_forward(module), vocab, batch, seq, train)


def causal_lm(module, vocab, batch, seq, train):
    """A Model of a logits_forward module: random input_ids (batch x seq,
    below vocab), and for a train step random labels and the cross-entropy."""
    import torch
    import torch.nn.functional as F
    low = 3 if vocab > 3 else 0  # 0-2 are pad, bos and eos
    ids = torch.randint(low, vocab, (batch, seq))
    if not train:
        return Model(module, (ids,))

    def loss_fn(logits, labels):
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    return Model(module, (ids,), (torch.randint(low, vocab, (batch, seq)),), loss_fn)
