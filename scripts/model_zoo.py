"""The model-zoo sweep: real architectures from transformers, timm and
torchvision (random weights, small configs, nothing downloaded), exported with
torch.export, compiled by spmdc under dp, fsdp and Megatron TP, run on real
worker processes by spmd-run and compared with eager PyTorch.

    python scripts/model_zoo.py                       # every model, writes docs/MODELS.md
    python scripts/model_zoo.py --only llama,bert --json zoo.json
    python scripts/model_zoo.py --list
    python scripts/model_zoo.py --quick --spmdc SPMDC --spmd-run SPMD_RUN   # CI subset (ctest model_zoo_quick)

Per model: an export (inference: torch.export.export(...).run_decompositions(),
else the undecomposed training IR, else for transformers the eager attention
path instead of sdpa; train steps: the joint graph of _export_forward_backward,
as testdata/export_models.py writes it), checked by running it in PyTorch
itself against eager (a wrong program is torch's limitation, and the next way
is tried); the eager references; for transformers models with a tensor-parallel
plan a tp_plan.json ({"base_model_tp_plan", "base_model_prefix", "tp_plan"})
next to model.pt2. Then the model's IR text (`spmdc opt --debug-info`) must
parse back to the same text, one single-device run, and compiles and runs under dp
and fsdp at mesh 2 and 4, dp at 2x2, and where the model has a tp plan
Megatron TP at 2, 4 and dp x tp at 2x2 (through `spmdc schema from-hf`; marked
pending while spmdc lacks it). Every output, loss and gradient is compared with
eager (rtol 1e-4, atol 1e-5). A cell that does not compile is also tried with
--replicate-unknown, in a separate column that never counts as a pass.
`--render zoo.json` rewrites the markdown from an earlier --json without rerunning;
`--render a.json,b.json` merges sweeps (b's record of a model replaces a's).

Exit code: 0 when every cell that ran compiled and matched (TP cells pending
on tool support do not count), 1 otherwise, 77 when transformers, timm or
torchvision is missing (ctest's skip code).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python"))  # spmdc_export, imported in the export worker only
SKIP = 77
RTOL, ATOL = 1e-4, 1e-5
BATCH, SEQ, VOCAB, IMG = 4, 16, 256, 32
EXPORT_TIMEOUT, COMPILE_TIMEOUT, RUN_TIMEOUT = 420, 180, 240
EAGER_ATTENTION = False  # set by the export worker's last fallback
WINDOW = 8  # sliding-window attention: shorter than the sequence, so the window shows
MAX_PARAMS = 30_000_000  # a config keyword that silently did not apply gives a full-size model

# ----------------------------------------------------------------- models
#
# name -> dict(source, family, build, kind, quick). build() returns
# (module, [input tensors]) with the module's forward taking the inputs
# positionally and returning a tensor or a tuple of tensors (inference), or
# the loss (kind "train"). Models are built only inside the export worker.

MODELS = {}


def model(name, source, kind="infer", note=""):
    def deco(fn):
        MODELS[name] = dict(source=source, build=fn, kind=kind, note=note)
        return fn
    return deco


def _tokens(*shape, vocab=VOCAB):
    import torch
    return torch.randint(3, vocab, shape)  # 0-2 are pad/bos/eos


def _image(px=IMG, batch=BATCH):
    import torch
    return torch.randn(batch, 3, px, px)


def _zero_dropout(cfg):
    for k, v in list(vars(cfg).items()):
        if "drop" in k and isinstance(v, float):
            setattr(cfg, k, 0.0)


def _adapt(module, forward):
    """Gives `module` a new forward in a subclass of its own class, so the
    FQNs (and so the tp plan's globs) stay the model's own."""
    base = type(module)
    module.__class__ = type(base.__name__, (base,), {"forward": forward})
    return module


def _tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    ts = tuple(t for t in out if isinstance(t, torch.Tensor))
    return ts[0] if len(ts) == 1 else ts


def hf_config(cfg_cls, **kw):
    import transformers
    kw = dict(dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False), **kw)
    cfg = _construct(getattr(transformers, cfg_cls), kw)
    for k, v in kw.items():  # some configs take other spellings; set what they ignored
        if getattr(cfg, k, None) != v:
            try:
                setattr(cfg, k, v)
            except (AttributeError, TypeError, ValueError, NotImplementedError):
                pass
    if getattr(cfg, "kv_lora_rank", None) and getattr(cfg, "num_key_value_heads", None):
        cfg.num_key_value_heads = cfg.num_attention_heads  # MLA: keys and values have every head
    layers = getattr(cfg, "layer_types", None) or ()
    if getattr(cfg, "sliding_window", 0) is None and (any("sliding" in str(t) for t in layers)
                                                      or (layers and _windowed_by_default(cfg))):
        # layers typed sliding (the generic config's None): a window they can use; or every layer full
        # in a family whose model builds a sliding mask regardless (Ministral): a window no layer reads
        cfg.sliding_window = WINDOW
    _zero_dropout(cfg)
    return cfg


def _construct(cls, kw):
    """cls(**kw), adapting kw (in place) to what the config refuses: transformers
    5's strict configs take no None window (WINDOW instead), and a config that
    refuses one of the generic spellings (ProphetNet: "does not support the
    setting of `num_hidden_layers`", it takes num_encoder/decoder_layers) is
    built without it and without the encoder_/decoder_ spellings that
    transformers 5's get_text_config() maps onto it (decoder_layers)."""
    while True:
        try:
            return cls(**kw)
        except Exception as e:  # noqa: BLE001
            refused = re.search(r"does not support the setting of `(\w+)`", str(e))
            spellings = _spellings(refused.group(1)) & set(kw) if refused else set()
            if kw.get("sliding_window", 0) is None and "sliding_window" in str(e):
                kw["sliding_window"] = WINDOW
            elif spellings:
                for k in spellings:
                    del kw[k]
            else:
                raise


def _spellings(name):
    """name and the flat encoder-decoder keys get_text_config() renames to it."""
    short = {"num_hidden_layers": "layers", "num_attention_heads": "attention_heads"}.get(name, name)
    return {name} | {f"{side}_{short}" for side in ("encoder", "decoder")}


def _windowed_by_default(cfg):
    """True when the config class's own default sliding window is a number."""
    try:
        return isinstance(type(cfg)().sliding_window, int)
    except Exception:  # noqa: BLE001  (a config that needs arguments: no default to read)
        return False


def hf_model(cfg_cls, model_cls, sized_first=False, **kw):
    """A transformers model of class model_cls (a name in transformers or a
    callable taking the config) with a small random config. sized_first:
    built on the meta device first, and refused past MAX_PARAMS before any
    memory is taken (a generic config that leaves a sub-model, a vision
    tower say, at full size would otherwise allocate gigabytes)."""
    import torch
    import transformers
    cfg = hf_config(cfg_cls, **kw)
    if EAGER_ATTENTION:
        cfg._attn_implementation = "eager"
    cls = getattr(transformers, model_cls) if isinstance(model_cls, str) else model_cls
    if sized_first:
        try:
            with torch.device("meta"):
                params = sum(p.numel() for p in cls(cfg).parameters())
        except (NotImplementedError, RuntimeError):  # an __init__ that computes on its weights: built for real
            params = 0
        if params > MAX_PARAMS:
            raise ValueError(f"{params} parameters: the generic small config did not apply")
    return cls(cfg)


def hf_build(cfg_cls, model_cls, arg_names=("input_ids",), inputs=None, pick=None, **kw):
    """Inference: the model's outputs (logits, or hidden states) as a tuple."""
    m = hf_model(cfg_cls, model_cls, **kw)
    base, names = type(m), tuple(arg_names)

    def forward(self, *xs):
        out = base.forward(self, **dict(zip(names, xs)))
        return pick(out) if pick else _tensors(out)

    m = _adapt(m, forward)
    m._zoo_hf = True
    return m, (inputs() if inputs else [_tokens(BATCH, SEQ)])


def hf_train(cfg_cls, model_cls, **kw):
    """A causal-LM (or masked-LM) train step: cross-entropy of the logits.
    Tied parameters are untied: _export_forward_backward fails on a tensor
    under two names ("Found a parameter that did not receive a gradient")."""
    import torch
    import torch.nn.functional as F
    m = hf_model(cfg_cls, model_cls, tie_word_embeddings=False, **kw)
    pred = getattr(getattr(m, "cls", None), "predictions", None)
    if pred is not None and pred.decoder.bias is pred.bias:  # BERT's decoder bias, also its head's
        del pred.bias
    elif pred is not None and isinstance(getattr(pred, "bias", None), torch.nn.Parameter):
        pred.bias.requires_grad_(False)  # transformers 5: a bias of its own that the forward never reads
    base = type(m)

    def forward(self, ids, labels):
        logits = base.forward(self, input_ids=ids).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())

    m = _adapt(m, forward)
    m._zoo_hf = True
    return m, [_tokens(BATCH, SEQ), _tokens(BATCH, SEQ)]


# Shared small shapes. Llama-like decoders: width 64, 4 heads of 16, 2 layers.
LL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
          num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
GQA = dict(LL, num_key_value_heads=2)
BERT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, type_vocab_size=2)


def _decoders():
    dec = {
        # name: (config, model class, extra config)
        "llama": ("LlamaConfig", "LlamaForCausalLM", LL),
        "mistral": ("MistralConfig", "MistralForCausalLM", dict(GQA, sliding_window=None)),
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", GQA),
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(GQA, head_dim=16)),
        "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(LL, head_dim=16)),
        "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(GQA, head_dim=16, sliding_window=8)),
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(GQA, head_dim=16, sliding_window=8)),
        "phi": ("PhiConfig", "PhiForCausalLM", LL),
        "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(LL, original_max_position_embeddings=64)),
        "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                    dict(GQA, num_local_experts=4, num_experts_per_tok=2, sliding_window=None)),
        "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                      dict(GQA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                           shared_expert_intermediate_size=64)),
        "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                      dict(GQA, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)),
        "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(LL, num_experts=8, num_experts_per_tok=2)),
        "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                        dict(LL, moe_intermediate_size=64, kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=8,
                             qk_nope_head_dim=8, v_head_dim=16, n_routed_experts=8, n_shared_experts=1,
                             num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1)),
        "olmo": ("OlmoConfig", "OlmoForCausalLM", LL),
        "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", LL),
        "granite": ("GraniteConfig", "GraniteForCausalLM", LL),
        "cohere": ("CohereConfig", "CohereForCausalLM", LL),
        "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(GQA, sliding_window=None)),
        "stablelm": ("StableLmConfig", "StableLmForCausalLM", LL),
        "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", GQA),
        "helium": ("HeliumConfig", "HeliumForCausalLM", dict(GQA, head_dim=16)),
        "glm": ("GlmConfig", "GlmForCausalLM", dict(GQA, head_dim=16)),
        "falcon": ("FalconConfig", "FalconForCausalLM",
                   dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        new_decoder_architecture=False, multi_query=True)),
        "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", LL),
        "opt": ("OPTConfig", "OPTForCausalLM",
                dict(vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=64, word_embed_proj_dim=64)),
        "gpt2": ("GPT2Config", "GPT2LMHeadModel",
                 dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64)),
        "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM",
                    dict(vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=4, max_position_embeddings=64,
                         attention_types=[[["global", "local"], 1]], window_size=8)),
        "gptj": ("GPTJConfig", "GPTJForCausalLM",
                 dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64, rotary_dim=8)),
        "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                    dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64, n_ctx=64, rotary_dim=8)),
        "bloom": ("BloomConfig", "BloomForCausalLM", dict(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4)),
        "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM",
                        dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64)),
        "mpt": ("MptConfig", "MptForCausalLM",
                dict(vocab_size=VOCAB, d_model=64, n_layers=2, n_heads=4, max_seq_len=64)),
        "biogpt": ("BioGptConfig", "BioGptForCausalLM", dict(BERT)),
        # state-space model (the pure-torch scan: no CUDA kernels on the CPU)
        "mamba": ("MambaConfig", "MambaForCausalLM",
                  dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, state_size=8, expand=2, conv_kernel=4)),
        # complex RoPE (view_as_complex, polar) and MoE layers
        "llama4": ("Llama4TextConfig", "Llama4ForCausalLM",
                   dict(GQA, head_dim=16, intermediate_size_mlp=128, num_local_experts=4, num_experts_per_tok=1,
                        interleave_moe_layer_step=2, no_rope_layers=[1, 1], attention_chunk_size=16)),
        "xglm": ("XGLMConfig", "XGLMForCausalLM",
                 dict(vocab_size=VOCAB, d_model=64, ffn_dim=128, num_layers=2, attention_heads=4,
                      max_position_embeddings=64)),
    }
    for name, (cfg, cls, kw) in dec.items():
        model(name, "transformers")(
            lambda cfg=cfg, cls=cls, kw=kw: hf_build(cfg, cls, **kw))


def _encoders():
    enc = {
        "bert": ("BertConfig", "BertForMaskedLM", BERT),
        "roberta": ("RobertaConfig", "RobertaForMaskedLM", dict(BERT, max_position_embeddings=66)),
        "xlm_roberta": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", dict(BERT, max_position_embeddings=66)),
        "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM",
                       dict(vocab_size=VOCAB, dim=64, hidden_dim=128, n_layers=2, n_heads=4,
                            max_position_embeddings=64)),
        "albert": ("AlbertConfig", "AlbertForMaskedLM", dict(BERT, embedding_size=32)),
        "electra": ("ElectraConfig", "ElectraForMaskedLM", dict(BERT, embedding_size=64)),
        "deberta": ("DebertaConfig", "DebertaForMaskedLM", BERT),
        "deberta_v2": ("DebertaV2Config", "DebertaV2ForMaskedLM", BERT),
        "megatron_bert": ("MegatronBertConfig", "MegatronBertForMaskedLM", BERT),
        "ernie": ("ErnieConfig", "ErnieForMaskedLM", BERT),
        "roformer": ("RoFormerConfig", "RoFormerForMaskedLM", dict(BERT, embedding_size=64)),
        "mpnet": ("MPNetConfig", "MPNetForMaskedLM", dict(BERT, max_position_embeddings=66)),
        "modernbert": ("ModernBertConfig", "ModernBertForMaskedLM",
                       dict(BERT, global_attn_every_n_layers=2, local_attention=8, reference_compile=False)),
        "esm": ("EsmConfig", "EsmForMaskedLM", dict(BERT, mask_token_id=3, position_embedding_type="rotary")),
    }
    for name, (cfg, cls, kw) in enc.items():
        model(name, "transformers")(
            lambda cfg=cfg, cls=cls, kw=kw: hf_build(cfg, cls, **kw))

    T5 = dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
              decoder_start_token_id=0)
    model("t5_encoder", "transformers")(lambda: hf_build("T5Config", "T5EncoderModel", **T5))
    model("t5", "transformers")(lambda: hf_build(
        "T5Config", "T5ForConditionalGeneration", arg_names=("input_ids", "decoder_input_ids"),
        inputs=lambda: [_tokens(BATCH, SEQ), _tokens(BATCH, 8)], pick=lambda o: o.logits, **T5))
    model("bart", "transformers")(lambda: hf_build(
        "BartConfig", "BartForConditionalGeneration", arg_names=("input_ids", "decoder_input_ids"),
        inputs=lambda: [_tokens(BATCH, SEQ), _tokens(BATCH, 8)], pick=lambda o: o.logits,
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64))

    def whisper_encoder(cfg):
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        return WhisperEncoder(cfg)
    model("whisper_encoder", "transformers")(lambda: hf_build(
        "WhisperConfig", whisper_encoder, arg_names=("input_features",),
        inputs=lambda: [__import__("torch").randn(BATCH, 16, 32)],
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
        max_source_positions=16, max_target_positions=16))

    VIT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               image_size=IMG, patch_size=8, num_labels=10)
    pix = dict(arg_names=("pixel_values",), inputs=lambda: [_image()])
    model("vit", "transformers")(lambda: hf_build("ViTConfig", "ViTForImageClassification", **pix, **VIT))
    model("deit", "transformers")(lambda: hf_build("DeiTConfig", "DeiTForImageClassification", **pix, **VIT))
    model("beit", "transformers")(lambda: hf_build("BeitConfig", "BeitForImageClassification", **pix, **VIT))
    model("dinov2", "transformers")(lambda: hf_build("Dinov2Config", "Dinov2Model", **pix, **VIT))
    model("clip_vision", "transformers")(lambda: hf_build("CLIPVisionConfig", "CLIPVisionModel", **pix, **VIT))
    model("siglip_vision", "transformers")(lambda: hf_build(
        "SiglipVisionConfig", "SiglipVisionModel", **pix, **VIT))
    model("clip_text", "transformers")(lambda: hf_build("CLIPTextConfig", "CLIPTextModel", **dict(BERT)))
    model("siglip_text", "transformers")(lambda: hf_build("SiglipTextConfig", "SiglipTextModel", **dict(BERT)))
    model("swin", "transformers")(lambda: hf_build(
        "SwinConfig", "SwinForImageClassification", **pix, image_size=IMG, patch_size=4, embed_dim=32,
        depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=10))
    model("convnext_hf", "transformers")(lambda: hf_build(
        "ConvNextConfig", "ConvNextForImageClassification", **pix, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
        num_labels=10))
    model("resnet_hf", "transformers")(lambda: hf_build(
        "ResNetConfig", "ResNetForImageClassification", **pix, embedding_size=16, hidden_sizes=[16, 32],
        depths=[1, 1], num_labels=10))

    # Joint train steps (loss and every gradient).
    untied = "train step with tied weights untied (_export_forward_backward rejects tied parameters)"
    model("llama_train", "transformers", kind="train")(lambda: hf_train("LlamaConfig", "LlamaForCausalLM", **LL))
    model("gpt2_train", "transformers", kind="train", note=untied)(lambda: hf_train(
        "GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64))
    model("bert_train", "transformers", kind="train", note=untied)(lambda: hf_train("BertConfig", "BertForMaskedLM", **BERT))
    model("qwen2_train", "transformers", kind="train")(lambda: hf_train("Qwen2Config", "Qwen2ForCausalLM", **GQA))
    model("mixtral_train", "transformers", kind="train")(lambda: hf_train(
        "MixtralConfig", "MixtralForCausalLM",
        **dict(GQA, num_local_experts=4, num_experts_per_tok=2, sliding_window=None)))


def _timm():
    def t(name, px=IMG, **kw):
        def build():
            import timm
            return timm.create_model(name, pretrained=False, num_classes=10, **kw), [_image(px)]
        return build
    zoo = {
        "timm_resnet18": t("resnet18"),
        "timm_efficientnet_b0": t("efficientnet_b0"),
        "timm_convnext_atto": t("convnext_atto"),
        "timm_vit_tiny": t("vit_tiny_patch16_224", img_size=IMG, patch_size=8, depth=2),
        "timm_deit_tiny": t("deit_tiny_patch16_224", img_size=IMG, patch_size=8, depth=2),
        "timm_mobilenetv3": t("mobilenetv3_small_050"),
        "timm_regnetx_002": t("regnetx_002"),
        "timm_densenet121": t("densenet121"),
        "timm_swin_tiny": t("swin_tiny_patch4_window7_224", img_size=IMG, window_size=4, depths=(1, 1, 1, 1),
                            embed_dim=32, num_heads=(1, 2, 4, 8)),
        "timm_ghostnet": t("ghostnet_050"),
        "timm_mobilevit_xxs": t("mobilevit_xxs", px=64),
        "timm_levit_128s": t("levit_128s", img_size=64, px=64),
        "timm_resnet18d": t("resnet18d"),
    }

    def mixer():  # mixer_s16_224's own arguments cannot be overridden through create_model
        from timm.models.mlp_mixer import MlpMixer
        return MlpMixer(num_classes=10, img_size=IMG, patch_size=8, num_blocks=2, embed_dim=64), [_image()]
    zoo["timm_mixer"] = mixer

    def resmlp():  # resmlp_12_224's blocks (ResBlock, Affine) at mixer()'s size: token mixing through permutes
        from timm.models.mlp_mixer import Affine, MlpMixer, ResBlock
        return MlpMixer(num_classes=10, img_size=IMG, patch_size=8, num_blocks=2, embed_dim=64,
                        mlp_ratio=4, block_layer=ResBlock, norm_layer=Affine), [_image()]
    zoo["timm_resmlp"] = resmlp
    notes = {"timm_mixer": "MlpMixer class, mixer_s16 shape shrunk",
             "timm_resmlp": "MlpMixer class with resmlp_12's ResBlock and Affine, shrunk"}
    for name, fn in zoo.items():
        model(name, "timm", note=notes.get(name, ""))(fn)


def _torchvision():
    def tv(name, px=IMG, after=None, **kw):
        def build():
            import torchvision
            m = getattr(torchvision.models, name)(weights=None, **kw)
            if after:
                after(m)
            return m, [_image(px)]
        return build

    def small_head(channels):
        def after(m):
            import torch.nn as nn  # the 4096-wide classifier alone is 200-400 MB: narrowed, same kinds of layers
            m.avgpool = nn.AdaptiveAvgPool2d(1)
            m.classifier = nn.Sequential(nn.Dropout(), nn.Linear(channels, 128), nn.ReLU(True), nn.Dropout(),
                                         nn.Linear(128, 128), nn.ReLU(True), nn.Linear(128, 10))
        return after
    zoo = {
        "tv_resnet18": tv("resnet18", num_classes=10),
        "tv_mobilenet_v2": tv("mobilenet_v2", num_classes=10),
        "tv_mobilenet_v3_small": tv("mobilenet_v3_small", num_classes=10),
        "tv_vgg11": tv("vgg11", after=small_head(512)),
        "tv_squeezenet": tv("squeezenet1_1", num_classes=10),
        "tv_shufflenet": tv("shufflenet_v2_x0_5", num_classes=10),
        "tv_efficientnet_b0": tv("efficientnet_b0", num_classes=10),
        "tv_regnet_y_400mf": tv("regnet_y_400mf", num_classes=10),
        "tv_convnext_tiny": tv("convnext_tiny", num_classes=10),
        "tv_vit_small": None,
        "tv_densenet121": tv("densenet121", num_classes=10),
        "tv_mnasnet": tv("mnasnet0_5", num_classes=10),
        "tv_swin_t": tv("swin_t", num_classes=10),
        "tv_alexnet": tv("alexnet", px=64, after=small_head(256)),
    }

    def vit_small():
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(image_size=IMG, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                 mlp_dim=128, num_classes=10), [_image()]
    zoo["tv_vit_small"] = vit_small
    head = "classifier narrowed to 128 wide after a global average pool (the 4096-wide one is 200-400 MB)"
    for name, fn in zoo.items():
        model(name, "torchvision", note=head if name in ("tv_vgg11", "tv_alexnet") else "")(fn)


_decoders()
_encoders()
_timm()
_torchvision()

# Every other family transformers can build a causal LM for from its config
# alone: one generic small config (every common spelling of width, depth and
# heads), so a family added to transformers joins the sweep without a line
# here. A family that does not build, run or export from it is a row saying
# why, not a failure of spmdc's: what counts is that every family torch.export
# accepts compiles and matches.
GENERIC = dict(GQA, head_dim=16, n_embd=64, n_layer=2, n_head=4, n_positions=64, d_model=64, num_layers=2,
               num_heads=4, ffn_dim=128, d_ff=128, n_layers=2, n_heads=4, max_seq_len=64, sliding_window=None,
               encoder_layers=2, decoder_layers=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
               encoder_attention_heads=4, decoder_attention_heads=4, num_encoder_layers=2, num_decoder_layers=2,
               num_experts=4, num_local_experts=4, n_routed_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=64, shared_expert_intermediate_size=64,
               # multi-head latent attention (DeepSeek-V2 and its kin): rope width = head_dim
               kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16)


def _discovered():
    """model_type -> (config class, model class) of the causal-LM families
    no entry above builds, from transformers' auto mappings (names only:
    nothing is imported until a model is built)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    with open(__file__) as f:  # the config classes the entries above name
        covered = set(re.findall(r'"(\w+Config)"', f.read()))
    found = {}
    for model_type, cls in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()):
        cfg = CONFIG_MAPPING_NAMES.get(model_type)
        if isinstance(cls, (tuple, list)):
            cls = cls[0]
        if cfg and cfg not in covered and f"hf_{model_type}" not in MODELS:
            found[model_type] = (cfg, cls)
    return found


def discovered(name):
    """A family the sweep found in transformers' mappings: one that does not
    build, run or export from the generic config is listed, not failed."""
    return MODELS[name]["note"].startswith("discovered")


def _register_discovered():
    try:
        found = _discovered()
    except ImportError:  # no transformers: main() says so
        return
    for model_type, (cfg, cls) in found.items():
        model(f"hf_{model_type}", "transformers", note="discovered: generic small config")(
            lambda cfg=cfg, cls=cls: hf_build(cfg, cls, sized_first=True, **GENERIC))


_register_discovered()
# Plans for models transformers ships none for, as a user would write them
# (GPT-2's fused [q; k; v] Conv1D split in three: packed_colwise:3).
OWN_PLANS = {
    "GPT2Config": {"h.*.attn.c_attn": "packed_colwise:3", "h.*.attn.c_proj": "rowwise",
                   "h.*.mlp.c_fc": "colwise", "h.*.mlp.c_proj": "rowwise"},
}

QUICK = ["llama", "llama_train", "gpt2", "bert", "timm_vit_tiny", "tv_mobilenet_v2",
         "mamba", "llama4", "timm_resmlp"]  # a state-space model; complex RoPE + MoE; token mixing by permutes


# ----------------------------------------------------------------- export (in a worker process)


def one_line(e):
    s = str(e).strip().splitlines()
    s = next((x.strip() for x in s if x.strip()), type(e).__name__)
    return f"{type(e).__name__}: {s}"[:300]


def check_program(ep, inputs, expected, path):
    """Runs the exported program in PyTorch itself and compares it with eager:
    a program torch got wrong is torch's limitation, not spmdc's."""
    import torch
    from safetensors.torch import save_file
    sig = ep.graph_signature
    got = {}
    with torch.no_grad():
        if any(s.kind.name == "LOSS_OUTPUT" for s in sig.output_specs):  # a joint graph: run it as it is
            state, args, user = ep.state_dict, [], iter(inputs)
            for s in sig.input_specs:
                if s.kind.name == "USER_INPUT":
                    args.append(next(user))
                else:
                    args.append(state[s.target] if s.target in state else ep.constants[s.target])
            for s, o in zip(sig.output_specs, ep.graph_module(*args)):
                if s.kind.name == "LOSS_OUTPUT":
                    got["loss"] = o
                elif s.kind.name == "GRADIENT_TO_PARAMETER":
                    got[f"grad.{s.target}"] = o
        else:
            outs = ep.module()(*inputs)
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            got = {f"output.{i}": o for i, o in enumerate(outs)}
    save_file({k: v.detach().contiguous() for k, v in got.items()}, path)
    return compare(path, expected)


def export_one(name, out):
    """Builds, runs eagerly and exports one model into out/ (the layout of
    testdata/pt2/<name>/ plus export.json and tp_plan.json)."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    info = {"name": name, "torch": torch.__version__}

    def done(**kw):
        info.update(kw)
        with open(os.path.join(out, "export.json"), "w") as f:
            json.dump(info, f, indent=1)
        return 0

    spec = MODELS[name]
    kind = spec["kind"]

    def build():  # seeded per model: the same weights and inputs each time
        torch.manual_seed(zlib.crc32(name.encode()))
        mod, inputs = spec["build"]()
        # transformers 5's MoE experts on their ATen path, 4.x's MoE blocks routed by dense dispatch (moe.py),
        # as the export helper sets them
        from spmdc_export import fixups
        fixups.aten_experts(mod, lambda msg: info.setdefault("notes", []).append(msg))
        for m in mod.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        mod.train(kind == "train")
        return mod, inputs

    try:
        mod, inputs = build()
    except Exception as e:  # noqa: BLE001  (any failure is a row in the table)
        return done(status="build_failed", error=one_line(e))
    params = sum(p.numel() for p in mod.parameters())
    info["params"] = params
    if params > MAX_PARAMS:
        return done(status="build_failed", error=f"{params} parameters: the small config did not apply")
    if getattr(mod, "_zoo_hf", False):
        cfg = mod.config
        plan = getattr(type(cfg), "base_model_tp_plan", None) or getattr(cfg, "base_model_tp_plan", None)
        if not plan and type(cfg).__name__ in OWN_PLANS:
            plan = OWN_PLANS[type(cfg).__name__]  # transformers ships none: the user's plan
        if plan:
            doc = {"base_model_tp_plan": dict(plan), "base_model_prefix": mod.base_model_prefix}
            head = getattr(mod, "_tp_plan", None)  # the head's own plan (lm_head), which from-hf also reads
            if head:
                doc["tp_plan"] = dict(head)
            with open(os.path.join(out, "tp_plan.json"), "w") as f:
                json.dump(doc, f, indent=1)
            info["tp_plan"] = True
    try:
        if kind == "train":
            mod.zero_grad()
            loss = mod(*inputs)
            loss.backward()
            expected = {"loss": loss.detach()}
            for k, p in mod.named_parameters():
                if p.grad is not None:
                    expected[f"grad.{k}"] = p.grad.detach().clone()
            mod.zero_grad()
        else:
            with torch.no_grad():
                ref = mod(*inputs)
            outs = ref if isinstance(ref, (tuple, list)) else (ref,)
            expected = {f"output.{i}": o for i, o in enumerate(outs)}
    except Exception as e:  # noqa: BLE001
        return done(status="eager_failed", error=one_line(e))
    # Export, falling back: decomposed (the inference IR spmdc's rules
    # target), else the undecomposed training IR, else (transformers) the
    # eager attention path instead of sdpa, decomposed.
    attempts = [("joint", False)] if kind == "train" else [("decomposed", False), ("training IR", False)]
    if getattr(mod, "_zoo_hf", False) and getattr(mod.config, "_attn_implementation", "eager") != "eager":
        attempts.append(("joint" if kind == "train" else "decomposed", True))
    errors = []
    pt2 = os.path.join(out, "model.pt2")
    global EAGER_ATTENTION
    for ir, eager_attn in attempts:
        stage = "torch.export.export"
        try:
            if eager_attn:  # rebuilt: some models pick their attention classes when constructed
                EAGER_ATTENTION = True
                stage = "rebuild with eager attention"
                mod, inputs = build()
                stage = "torch.export.export"
            t0 = time.perf_counter()
            ep = torch.export.export(mod, tuple(inputs))
            info["export_s"] = round(time.perf_counter() - t0, 2)
            if ir == "joint":
                from torch.export.experimental import _export_forward_backward
                stage = "_export_forward_backward"
                ep = _export_forward_backward(ep)
            elif ir == "decomposed":
                stage = "run_decompositions"
                ep = ep.run_decompositions()
            stage = "torch.export.save"
            torch.export.save(ep, pt2 + ".tmp")
            stage = "PyTorch's own run of the exported program"
            verdict = check_program(ep, inputs, expected, os.path.join(out, "torch.out.safetensors"))
            if not verdict.startswith("ok"):
                raise AssertionError(f"differs from eager: {verdict}")
            os.replace(pt2 + ".tmp", pt2)
        except Exception as e:  # noqa: BLE001
            if os.path.exists(pt2 + ".tmp"):
                os.remove(pt2 + ".tmp")
            errors.append(f"{ir}{', eager attention' if eager_attn else ''}: {stage}: {one_line(e)}")
            continue
        info["ir"] = ir + (", eager attention" if eager_attn else "")
        break
    else:
        return done(status="export_failed", error=errors[0].split(": ", 1)[1], attempts=errors)
    if errors:
        info["fallback_from"] = errors
    save_file({f"input.{i}": t.contiguous() for i, t in enumerate(inputs)}, os.path.join(out, "inputs.safetensors"))
    save_file({k: v.detach().contiguous() for k, v in expected.items()},
              os.path.join(out, "expected.safetensors"))
    ops = {}
    for node in ep.graph.nodes:
        if node.op == "call_function":
            ops[str(node.target)] = ops.get(str(node.target), 0) + 1
    return done(status="ok", nodes=len(ep.graph.nodes), ops=dict(sorted(ops.items())))


# ----------------------------------------------------------------- compile, run, compare


def sh(cmd, timeout):
    """Runs cmd; a binary being rebuilt (briefly missing) is waited for."""
    for attempt in range(20):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s")
        except OSError as e:  # ENOENT / ETXTBSY while another engineer relinks
            if attempt == 19:
                return subprocess.CompletedProcess(cmd, 127, "", str(e))
            time.sleep(30)


def reason(r, path_hint=""):
    """spmdc's or spmd-run's one-line reason from a failed run."""
    lines = [x.strip() for x in (r.stderr or "").splitlines() if x.strip()]
    err = [x for x in lines if x.startswith("error:") or " error: " in x]
    line = err[-1] if err else (lines[-1] if lines else f"exit {r.returncode}")
    line = re.sub(r"^.*?error:\s*", "", line)
    line = re.sub(r"^\S+\.(pt2|spmd|json|safetensors):\s*", "", line)
    if path_hint:
        line = line.replace(path_hint, "")
    return line[:240]


def compare(got, expected):
    """gpu_check's comparison of a safetensors file with eager's tensors (a
    dict, or the path of expected.safetensors)."""
    import gpu_check
    from safetensors.torch import load_file
    want = load_file(expected) if isinstance(expected, str) else expected
    return gpu_check.compare(got, want, rtol=RTOL, atol=ATOL)


def report_stats(path):
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        return None, None, None
    n = sum(rep.get("collective_counts", {}).values())
    b = sum(c.get("bytes_per_rank", 0) for c in rep.get("collectives", []))
    ms = rep.get("timings_ms", {}).get("total")
    return n, b, ms


def tool_has_from_hf(spmdc):
    r = sh([spmdc, "schema", "--help"], 30)
    return r.returncode == 0 and "from-hf" in (r.stdout + r.stderr)


class Sweep:
    def __init__(self, a):
        self.a = a
        self.from_hf = tool_has_from_hf(a.spmdc)
        self.records, self.lock, self.t0 = [], threading.Lock(), time.perf_counter()
        self.meta = {}  # versions and command, for the partial JSON

    def save_partial(self, names):
        """Rewrites --json with the models done so far (marked partial), so a
        sweep stopped early still leaves its table (--render)."""
        if not self.a.json or not names:
            return
        with self.lock:
            done = sorted(self.records, key=lambda r: names.index(r["name"]))
            doc = dict(self.meta, partial=f"{len(done)} of {len(names)} models ran",
                       seconds=round(time.perf_counter() - self.t0, 1), records=done)
            with open(self.a.json + ".tmp", "w") as f:
                json.dump(doc, f, indent=1)
            os.replace(self.a.json + ".tmp", self.a.json)

    def layouts(self, tp):
        cells = [("dp", "2"), ("dp", "4"), ("fsdp", "2"), ("fsdp", "4"), ("dp", "2x2")]
        if tp:
            cells += [("tp", "2"), ("tp", "4"), ("dp,tp", "2x2")]
        if self.a.quick:
            cells = [c for c in cells if c[1] == "2"]
        return cells

    def schema_for(self, d, layout, mesh):
        """The --schema argument for a cell, or (None, why) for a pending TP cell."""
        if layout in ("dp", "fsdp"):
            return layout, None
        if not self.from_hf:
            return None, "pending: no tp_plan support yet"
        path = os.path.join(d, f"schema.{layout.replace(',', '_')}.{mesh}.json")
        cmd = [self.a.spmdc, "schema", "from-hf", os.path.join(d, "tp_plan.json"), "--mesh", mesh,
               "--model", os.path.join(d, "model.pt2"), "-o", path]
        if layout == "dp,tp":
            cmd[6:6] = ["--axes", "dp,tp"]
        r = sh(cmd, COMPILE_TIMEOUT)
        if r.returncode != 0:
            return None, "schema from-hf: " + reason(r, d + "/")
        return path, None

    def cell(self, d, layout, mesh, replicate_unknown=False):
        label = f"{layout.replace(',', '_')}.{mesh}" + (".ru" if replicate_unknown else "")
        res = {"layout": layout, "mesh": mesh}
        schema, why = self.schema_for(d, layout, mesh)
        if schema is None:  # pending on tool support (None), or from-hf failed (False)
            res.update(compiled=None if why.startswith("pending") else False, reason=why)
            return res
        prog, rep = os.path.join(d, f"{label}.spmd"), os.path.join(d, f"{label}.report.json")
        cmd = [self.a.spmdc, "compile", os.path.join(d, "model.pt2"), "--schema", schema, "--mesh", mesh,
               "-o", prog, "--report", rep, "-q"]
        if replicate_unknown:
            cmd.append("--replicate-unknown")
        t0 = time.perf_counter()
        r = sh(cmd, COMPILE_TIMEOUT)
        wall = 1e3 * (time.perf_counter() - t0)
        if r.returncode != 0:
            res.update(compiled=False, reason=reason(r, d + "/"))
            return res
        n, b, ms = report_stats(rep)
        res.update(compiled=True, collectives=n, bytes=b, compile_ms=round(ms if ms is not None else wall, 1))
        n_ranks = 1
        for x in mesh.split("x"):
            n_ranks *= int(x)
        out = os.path.join(d, f"{label}.out.safetensors")
        r = sh([self.a.spmd_run, "-n", str(n_ranks), prog, "--inputs", os.path.join(d, "inputs.safetensors"),
                "--output", out, "--quiet", "--timeout", "120"], RUN_TIMEOUT)
        if r.returncode != 0:
            res.update(matches=False, reason="spmd-run: " + reason(r, d + "/"))
            return res
        verdict = compare(out, os.path.join(d, "expected.safetensors"))
        res["matches"] = verdict.startswith("ok")
        res["verdict"] = verdict
        if not res["matches"]:
            res["reason"] = "mismatch: " + verdict
        for p in (prog, out):
            if os.path.exists(p):
                os.remove(p)
        return res

    def single(self, d):
        out = os.path.join(d, "single.out.safetensors")
        res = {"layout": "single", "mesh": "1", "compiled": None}
        why = self.ir_text_reads_back(d)
        if why:
            res.update(matches=False, reason=why)
            return res
        r = sh([self.a.spmd_run, os.path.join(d, "model.pt2"), "--inputs", os.path.join(d, "inputs.safetensors"),
                "--output", out], RUN_TIMEOUT)
        if r.returncode != 0:
            res.update(matches=False, reason="spmd-run: " + reason(r, d + "/"))
            return res
        verdict = compare(out, os.path.join(d, "expected.safetensors"))
        res.update(matches=verdict.startswith("ok"), verdict=verdict)
        if not res["matches"]:
            res["reason"] = "mismatch: " + verdict
        return res

    def ir_text_reads_back(self, d):
        """'' when the model's IR text (with debug info) parses back to the same text, else why not."""
        text = os.path.join(d, "model.ir")
        r = sh([self.a.spmdc, "opt", os.path.join(d, "model.pt2"), "--debug-info"], COMPILE_TIMEOUT)
        if r.returncode != 0:
            return "spmdc opt: " + reason(r, d + "/")
        with open(text, "w") as f:
            f.write(r.stdout)
        again = sh([self.a.spmdc, "opt", text, "--debug-info"], COMPILE_TIMEOUT)
        if again.returncode != 0:
            return "IR text does not parse back: " + reason(again, d + "/")
        if again.stdout != r.stdout:
            return "IR text parses back to another program"
        os.remove(text)
        return ""

    def model(self, name, names=()):
        t0 = time.perf_counter()
        spec = MODELS[name]
        d = os.path.join(self.a.work, name)
        rec = {"name": name, "source": spec["source"], "kind": spec["kind"], "cells": []}
        try:
            self.run_model(name, d, rec)
        except Exception as e:  # noqa: BLE001  (one model's surprise must not end the sweep)
            rec.setdefault("export", {"status": "export_failed", "error": "model_zoo: " + one_line(e)})
            rec["cells"].append({"layout": "single" if not rec["cells"] else "?", "mesh": "-", "compiled": False,
                                 "matches": False, "reason": "model_zoo: " + one_line(e)})
        rec["seconds"] = round(time.perf_counter() - t0, 1)
        self.log(rec)
        with self.lock:
            self.records.append(rec)
        self.save_partial(names)
        return rec

    def run_model(self, name, d, rec):
        done = os.path.join(d, "export.json")
        stderr = ""
        if not (self.a.reuse_exports and os.path.exists(done)):
            if os.path.exists(done):  # a previous sweep's, in a reused --work
                os.remove(done)
            stderr = sh([sys.executable, os.path.abspath(__file__), "--export-one", name, "--work", self.a.work],
                        EXPORT_TIMEOUT).stderr
        try:
            with open(done) as f:
                rec["export"] = json.load(f)
        except (OSError, ValueError):
            rec["export"] = {"status": "export_failed",
                             "error": "export worker: " + ((stderr or "").strip().splitlines() or ["died"])[-1]}
        ex = rec["export"]
        if ex["status"] == "ok":
            rec["cells"].append(self.single(d))
            for layout, mesh in self.layouts(ex.get("tp_plan", False)):
                c = self.cell(d, layout, mesh)
                if c.get("compiled") is False and not self.a.no_diagnostic:
                    ru = self.cell(d, layout, mesh, replicate_unknown=True)
                    c["replicate_unknown"] = ("matches" if ru.get("matches") else
                                              "compiles, " + ru.get("reason", "")[:120] if ru.get("compiled") else
                                              "fails: " + ru.get("reason", "")[:120])
                rec["cells"].append(c)

    def log(self, rec):
        ex = rec["export"]
        if ex["status"] != "ok":
            print(f"{rec['name']:24s} {ex['status']}: {ex.get('error', '')[:150]}", flush=True)
            return
        for c in rec["cells"]:
            ok = c.get("matches") and c.get("compiled") is not False
            tag = "ok  " if ok else ("pend" if c.get("compiled") is None and c["layout"] != "single" else "FAIL")
            extra = (c.get("reason", "") if not ok else c.get("verdict", "") if c["layout"] == "single" else
                     f"{c.get('collectives')} collectives, {c.get('compile_ms')} ms")
            print(f"{tag} {rec['name']:24s} {c['layout']:6s} {c['mesh']:4s} {extra[:150]}", flush=True)


# ----------------------------------------------------------------- MODELS.md


def cell_ok(c):
    return c.get("compiled") is not False and c.get("matches") is True


def pending(c):
    return c.get("compiled") is None and c["layout"] != "single"


def summarize(records):
    s = {"models": len(records)}
    s["exported"] = sum(r["export"]["status"] == "ok" for r in records)
    ran = [r for r in records if r["export"]["status"] == "ok"]
    real = lambda r: [c for c in r["cells"] if c["layout"] != "single" and not pending(c)]  # noqa: E731
    s["single_matches"] = sum(all(cell_ok(c) for c in r["cells"] if c["layout"] == "single") for r in ran)
    s["compiled_everywhere"] = sum(all(c.get("compiled") for c in real(r)) for r in ran)
    s["matching_everywhere"] = sum(all(cell_ok(c) for c in r["cells"] if not pending(c)) for r in ran)
    cells = [c for r in ran for c in real(r)]
    s["cells"] = len(cells)
    s["cells_compiled"] = sum(bool(c.get("compiled")) for c in cells)
    s["cells_matching"] = sum(cell_ok(c) for c in cells)
    s["cells_pending"] = sum(pending(c) for r in ran for c in r["cells"])
    return s


def group_reasons(records):
    """Failure reason (op names for missing rules) -> set of models it blocks."""
    groups = {}
    for r in records:
        for c in r["cells"]:
            if cell_ok(c) or pending(c):
                continue
            why = c.get("reason", "")
            m = re.search(r"no sharding rule for (\S+)", why)
            if m:
                key = f"no sharding rule for {m.group(1).rstrip(',;:')}"
            elif why.startswith("mismatch: "):
                key = "mismatch: " + why.split(": ")[1]  # the first tensor that differs
            else:
                key = re.sub(r"\d[\d,.]*", "N", why)[:120]
            groups.setdefault(key, set()).add(r["name"])
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def write_markdown(path, records, summary, command, elapsed, versions, partial=None):
    L = ["# Model zoo", "",
         "Real architectures from transformers, timm and torchvision, random weights and small configs "
         "(2 layers, width 64, vocab 256, batch 4, sequence 16, images 32 px), exported with torch.export, "
         "compiled by spmdc, run by spmd-run on real worker processes (Gloo, CPU) and compared with eager "
         f"PyTorch (rtol {RTOL}, atol {ATOL}; every output, or the loss and every gradient of a train step). "
         "Generated by `scripts/model_zoo.py`; do not edit by hand.", "",
         f"Command: `{command}` ({elapsed / 60:.1f} min, {versions})."
         + (f" **Partial: {partial}** (stopped early; the rows below are those that ran)." if partial else ""), "",
         "## Summary", "",
         f"- {summary['models']} models, {summary['exported']} exported by torch.export, "
         f"{summary['single_matches']} match eager on one device (spmd-run on the .pt2)",
         f"- {summary['compiled_everywhere']} compiled under every layout tried, "
         f"{summary['matching_everywhere']} matching eager everywhere (single device included)",
         f"- {summary['cells']} distributed cells: {summary['cells_compiled']} compiled, "
         f"{summary['cells_matching']} matched; {summary['cells_pending']} TP cells pending tool support", "",
         "A model counts as compiled (matching) everywhere when every cell that ran did; TP cells marked pending "
         "are left out. Layouts: `dp` and `fsdp` are spmdc's presets (`2x2` under `dp` shards the batch over "
         "both axes); `tp` is Megatron TP from the model's own `base_model_tp_plan` (tp_plan.json through "
         "`spmdc schema from-hf`), `dp,tp` the same on a 2x2 dp x tp mesh. Collectives: count and bytes per rank "
         "from `--report`. The last column compiles the cells that failed with `--replicate-unknown` "
         "(diagnostic only: it never counts as a pass).", ""]
    groups = group_reasons(records)
    L += ["## Failure reasons", ""]
    if groups:
        L += ["| reason | models blocked | models |", "|---|---:|---|"]
        for why, models in groups:
            L.append(f"| {md_escape(why)} | {len(models)} | {', '.join(sorted(models))} |")
    else:
        L.append("None: every cell of every exported model compiled and matched eager.")
    L.append("")
    lim = [r for r in records if r["export"]["status"] != "ok"]
    if lim:
        L += ["## Not exported", "", "| model | source | stage | error |", "|---|---|---|---|"]
        for r in lim:
            st = {"export_failed": "torch.export limitation", "build_failed": "model build",
                  "eager_failed": "eager run"}.get(r["export"]["status"], r["export"]["status"])
            L.append(f"| {r['name']} | {r['source']} | {st} | {md_escape(r['export'].get('error', ''))} |")
        L.append("")
    fallback = [r for r in records if r["export"].get("fallback_from")]
    if fallback:
        L += ["## Export fallbacks", "",
              "The first way of exporting failed for these; the export column says which one worked. Every "
              "exported program is first run by PyTorch itself and compared with eager: \"PyTorch's own run of the "
              "exported program differs from eager\" means torch exported a wrong program, before spmdc saw it "
              "(with sdpa attention, the joint graph of _export_forward_backward on the CPU keeps "
              "aten._scaled_dot_product_flash_attention_for_cpu_backward behind a forward decomposed to math, "
              "and its gradients differ from eager's; the eager attention path is exact).", ""]
        for r in fallback:
            L.append(f"- {r['name']} ({r['export']['ir']}): "
                     + "; ".join(md_escape(x) for x in r["export"]["fallback_from"]))
        L.append("")
    notes = [(n, MODELS[n]["note"]) for n in (r["name"] for r in records) if MODELS[n].get("note")]
    if notes:
        L += ["## Notes on the models", ""] + [f"- {n}: {t}" for n, t in notes] + [""]
    L += ["## Per model", "",
          "Cells matching eager out of those run, per layout (dp: mesh 2, 4, 2x2; fsdp: 2, 4; tp: 2, 4 and dp,tp "
          "2x2, where the model has a tp plan); the next section has every cell.", "",
          "| model | source | parameters | export | one device | dp | fsdp | tp |", "|---|---|---:|---|---|---|---|---|"]
    for r in records:
        ex = r["export"]
        src = r["source"] + (" (train)" if r["kind"] == "train" else "")
        if ex["status"] != "ok":
            L.append(f"| {r['name']} | {src} | {ex.get('params', 0):,} | not exported | | | | |")
            continue
        cols = []
        for fam in (("single",), ("dp",), ("fsdp",), ("tp", "dp,tp")):
            cs = [c for c in r["cells"] if c["layout"] in fam and not pending(c)]
            n = sum(cell_ok(c) for c in cs)
            cols.append("-" if not cs else "ok" if n == len(cs) else f"**{n}/{len(cs)}**")
        L.append(f"| {r['name']} | {src} | {ex.get('params', 0):,} | {ex.get('ir', '')} | " + " | ".join(cols) + " |")
    L.append("")
    L += ["## Results", "",
          "| model | source | layout | mesh | compiled | matches | collectives | compile ms | failure reason "
          "| runs with --replicate-unknown |",
          "|---|---|---|---|---|---|---:|---:|---|---|"]
    yn = {True: "yes", False: "**no**", None: "-"}
    for r in records:
        ex = r["export"]
        src = r["source"] + (" (train)" if r["kind"] == "train" else "")
        if ex["status"] != "ok":
            L.append(f"| {r['name']} | {src} | - | - | - | - | - | - | not exported: "
                     f"{md_escape(ex.get('error', ''))[:160]} | |")
            continue
        for c in r["cells"]:
            coll = f"{c['collectives']} ({c['bytes']:,} B)" if c.get("collectives") is not None else ""
            comp = "pending" if pending(c) else yn[c.get("compiled")]
            match = "-" if pending(c) else yn[c.get("matches")] if c.get("compiled") is not False else "-"
            layout = c["layout"] + (f" ({ex['ir']})" if c["layout"] == "single" else "")
            L.append(f"| {r['name']} | {src} | {layout} | {c['mesh']} | {comp} | {match} | {coll} | "
                     f"{c.get('compile_ms', '')} | {md_escape(c.get('reason', ''))} | "
                     f"{md_escape(c.get('replicate_unknown', ''))} |")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ----------------------------------------------------------------- main


def public_args(argv):
    """The command line without the options that name local paths."""
    local, keep, skip = ("--work", "--json", "--spmdc", "--spmd-run"), [], False
    for x in argv:
        if skip:
            skip = False
        elif x in local:
            skip = True
        elif x.split("=")[0] not in local:
            keep.append(x)
    return keep


def merge_results(paths):
    """The --json documents at paths as one: a model's record from a later file
    replaces an earlier one (a rerun at more layouts, or after a fix), in the
    first file's order; commands are joined by " ; " and seconds added."""
    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    if len(docs) == 1:
        return docs[0]
    records, partial = {}, [d["partial"] for d in docs if d.get("partial")]
    for d in docs:
        records.update((r["name"], r) for r in d["records"])
    versions = sorted({d["versions"] for d in docs})
    return {"records": list(records.values()), "seconds": round(sum(d["seconds"] for d in docs), 1),
            "command": " ; ".join(d.get("command", "python scripts/model_zoo.py") for d in docs),
            "versions": versions[0] if len(versions) == 1 else " / ".join(versions),
            "partial": "; ".join(partial) or None}


def missing_libraries():
    out = []
    for lib in ("transformers", "timm", "torchvision"):
        try:
            __import__(lib)
        except Exception:  # noqa: BLE001  (a broken install counts as missing)
            out.append(lib)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--quick", action="store_true", help="the CI subset, mesh 2 only: " + ",".join(QUICK))
    ap.add_argument("--jobs", type=int, default=1, help="models in parallel (default 1)")
    ap.add_argument("--out", help="write the markdown table here (default docs/MODELS.md; none under --quick)")
    ap.add_argument("--json", help="also write every result as JSON")
    ap.add_argument("--work", help="keep the exports and programs in this folder (default: a temporary one)")
    ap.add_argument("--spmdc", default=os.path.join(ROOT, "build", "tools", "spmdc", "spmdc"), help="(default: build/)")
    ap.add_argument("--spmd-run", default=os.path.join(ROOT, "build", "tools", "spmd-run", "spmd-run"),
                    help="(default: build/)")
    ap.add_argument("--reuse-exports", action="store_true",
                    help="take a model's export from --work where an earlier run (or --export-one) left one, "
                         "instead of exporting it again (same torch and transformers: not checked)")
    ap.add_argument("--no-diagnostic", action="store_true", help="skip the --replicate-unknown column")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite --out from the --json file(s) of earlier sweeps (comma-separated: merged, "
                         "a later file's record of a model replacing an earlier one)")
    ap.add_argument("--export-one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.list:
        for n, s in MODELS.items():
            print(f"{n:24s} {s['source']:12s} {s['kind']}" + ("  (quick)" if n in QUICK else "")
                  + ("  (discovered)" if discovered(n) else ""))
        return 0
    if a.render:
        doc = merge_results(a.render.split(","))
        out = a.out or os.path.join(ROOT, "docs", "MODELS.md")
        write_markdown(out, doc["records"], summarize(doc["records"]), doc.get("command", "python scripts/model_zoo.py"),
                       doc["seconds"], doc["versions"], partial=doc.get("partial"))
        print(f"model_zoo: wrote {out}")
        return 0
    miss = missing_libraries()
    if miss:
        print(f"model_zoo: skipped: {', '.join(miss)} not installed "
              "(pip install -r python/requirements-zoo.txt, or scripts/setup.sh)")
        return SKIP
    if a.export_one:
        return export_one(a.export_one, os.path.join(a.work, a.export_one))
    names = a.only.split(",") if a.only else QUICK if a.quick else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; --list shows them")
    if a.out is None and not a.quick:
        a.out = os.path.join(ROOT, "docs", "MODELS.md")
    for b in (a.spmdc, a.spmd_run):
        for _ in range(20):
            if os.access(b, os.X_OK):
                break
            print(f"model_zoo: waiting for {b}", flush=True)
            time.sleep(30)
        else:
            print(f"model_zoo: error: {b} not found", file=sys.stderr)
            return 2
    tmp = None
    if not a.work:
        tmp = tempfile.TemporaryDirectory(prefix="spmdc-zoo-")
        a.work = tmp.name
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    import torch
    import transformers
    import timm
    import torchvision
    versions = (f"torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}, "
                f"timm {timm.__version__}, torchvision {torchvision.__version__.split('+')[0]}")
    sweep = Sweep(a)
    command = "python scripts/model_zoo.py " + " ".join(shlex.quote(x) for x in public_args(sys.argv[1:]))
    sweep.meta = {"versions": versions, "command": command.strip()}
    print(f"model_zoo: {len(names)} models, {versions}; TP layouts "
          + ("via spmdc schema from-hf" if sweep.from_hf else "pending (spmdc has no `schema from-hf`)"), flush=True)
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        records = list(pool.map(lambda n: sweep.model(n, names), names))
    elapsed = time.perf_counter() - t0
    summary = summarize(records)
    if a.out:
        write_markdown(a.out, records, summary, command.strip(), elapsed, versions)
        print(f"model_zoo: wrote {a.out}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "versions": versions, "seconds": round(elapsed, 1),
                       "command": command.strip(), "records": records}, f, indent=1)
    print(f"model_zoo: {json.dumps(summary)} in {elapsed:.0f} s")
    failed = [f"{r['name']} {c['layout']} {c['mesh']}: {c.get('reason', '')}" for r in records for c in r["cells"]
              if not cell_ok(c) and not pending(c)]
    failed += [f"{r['name']}: {r['export']['status']}: {r['export'].get('error', '')}" for r in records
               if r["export"]["status"] != "ok" and not discovered(r["name"])]
    if tmp:
        tmp.cleanup()
    if failed:
        print(f"model_zoo: {len(failed)} failed:\n  " + "\n  ".join(failed[:60]), file=sys.stderr)
        return 1
    print("model_zoo: every cell compiled and matches eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
