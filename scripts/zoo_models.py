"""The model zoo's registry (scripts/model_zoo.py): every model the sweep
builds, as name -> build(), with the small shapes and configs they share,
the families discovered in transformers' auto mappings (one generic config),
the tp plans written for models transformers ships none for, and the CI
subset. Nothing heavy is imported until a model is built (in the export
worker)."""
import re

RTOL, ATOL = 1e-4, 1e-5
BATCH, SEQ, VOCAB, IMG = 4, 16, 256, 32
EAGER_ATTENTION = False  # set by the export worker's last fallback
WINDOW = 8  # sliding-window attention: shorter than the sequence, so the window shows
MAX_PARAMS = 30_000_000  # a config keyword that silently did not apply gives a full-size model


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
    m = cls(cfg)
    if hasattr(m, "set_default_language") and getattr(cfg, "languages", None):
        m.set_default_language(cfg.languages[0])  # X-MOD's adapters: the model refuses to pick one itself
    return m


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
               moe_intermediate_size=64, shared_expert_intermediate_size=64)
# Multi-head latent attention (DeepSeek-V2 and its kin): rope width = head_dim.
# Only for configs that have it: others may read one of these names otherwise
# (MiMo-V2's v_head_dim).
MLA = dict(kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16)


def generic(cfg_cls):
    """GENERIC, with MLA's widths where the config class has latent attention."""
    import inspect
    import transformers
    cls = getattr(transformers, cfg_cls)
    fields = set(getattr(cls, "__dataclass_fields__", {})) | set(inspect.signature(cls.__init__).parameters)
    return dict(GENERIC, **MLA) if "kv_lora_rank" in fields else GENERIC


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
            lambda cfg=cfg, cls=cls: hf_build(cfg, cls, sized_first=True, **generic(cfg)))


_register_discovered()
# Plans for models transformers ships none for, as a user would write them
# (GPT-2's fused [q; k; v] Conv1D split in three: packed_colwise:3).
OWN_PLANS = {
    "GPT2Config": {"h.*.attn.c_attn": "packed_colwise:3", "h.*.attn.c_proj": "rowwise",
                   "h.*.mlp.c_fc": "colwise", "h.*.mlp.c_proj": "rowwise"},
}

QUICK = ["llama", "llama_train", "gpt2", "bert", "timm_vit_tiny", "tv_mobilenet_v2",
         "mamba", "llama4", "timm_resmlp"]  # a state-space model; complex RoPE + MoE; token mixing by permutes
