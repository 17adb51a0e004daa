"""A local Hugging Face checkpoint folder exported by reference, for
`python -m spmdc_export --hf PATH`: the weights are never read.

PATH holds config.json and model.safetensors, or model.safetensors.index.json
and its shards. The model is built from the config with its parameters on
the meta device (meta_parameters: nothing allocated) and its buffers real
(rotary inv_freq and other non-persistent buffers are computed in __init__,
not stored), with hf.py's fixups (forward(input_ids) -> logits, dropout 0).
torch.export traces it with the parameters as FakeTensors on the CPU (the
meta device has no autocast, which transformers' rotary embedding enters);
the archive then holds every parameter (and every persistent buffer the
checkpoint stores) on meta, a 0-byte payload, and the real values of the
other buffers. Where each meta tensor's values are is the member
<top>/extra/spmdc_weights.json:

    {"format": 1,
     "root": "/absolute/path/of/the/checkpoint/folder",
     "tensors": {"<fqn as in ep.state_dict>": {"file": "model-00001-of-00002.safetensors",
                                               "tensor": "model.layers.0.self_attn.q_proj.weight"}}}

"file" is relative to root, "tensor" the name in that file. Checkpoint names
map to the module's as transformers maps them on load (legacy renames, the
class's _checkpoint_conversion_mapping, the base-model prefix added or
dropped); a tied name (lm_head.weight of tie_word_embeddings) points at the
tensor stored under any name of its group. Shapes are checked against the
safetensors headers (read by hand: the 8-byte length and the JSON). The
default dtype is the one the checkpoint stores most of.

expected.safetensors needs the weights: only with expected=True is the
checkpoint loaded (from_pretrained) to compute it. A train step traces the
joint program in one pass (joint.py) on the fake parameters; a step that
needs torch's route is refused.
"""
import contextlib
import json
import os
import re

from . import attention as sdpa
from . import fixups, hf
from .core import ExportError

MANIFEST = "spmdc_weights.json"
FORMAT = 1
_SINGLE, _INDEX = "model.safetensors", "model.safetensors.index.json"
_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}
_MAX_HEADER = 100 << 20


def is_checkpoint(value):
    """Whether an --hf value names a folder (a checkpoint) rather than a model name."""
    return bool(value) and os.path.isdir(value)


# ----------------------------------------------------------------- the checkpoint's files


def read_header(path):
    """{name: (dtype, shape)} of a safetensors file, from its header alone."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if n < 2 or n > _MAX_HEADER:
                raise ExportError(f"{path}: not a safetensors file (header length {n})")
            meta = json.loads(f.read(n))
            size = f.seek(0, os.SEEK_END)
    except OSError as e:
        raise ExportError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportError(f"{path}: the safetensors header is not JSON ({e})") from None
    out = {}
    for k, v in meta.items():
        if k == "__metadata__":
            continue
        try:
            dtype, shape, (_, end) = v["dtype"], tuple(int(d) for d in v["shape"]), v["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ExportError(f"{path}: tensor {k} has no dtype, shape and data_offsets in the header") from None
        if 8 + n + int(end) > size:
            raise ExportError(f"{name}: tensor {k} ends past the end of the file ({size} bytes): truncated?")
        out[k] = (dtype, shape)
    return out


class Checkpoint:
    """A checkpoint folder: root, and per stored tensor name its file and (dtype, shape)."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        if not os.path.isfile(os.path.join(self.root, "config.json")):
            raise ExportError(f"checkpoint folder {self.root} has no config.json")
        self.files = {}  # tensor name -> file (relative to root)
        self.headers = {}  # tensor name -> (dtype, shape)
        index = os.path.join(self.root, _INDEX)
        if os.path.isfile(index):
            self._read_index(index)
        elif os.path.isfile(os.path.join(self.root, _SINGLE)):
            self._read_file(_SINGLE, None)
        else:
            raise ExportError(f"checkpoint folder {self.root} has neither {_SINGLE} nor {_INDEX} (only safetensors "
                              f"checkpoints can be exported by reference)")

    def _read_index(self, index):
        try:
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ExportError(f"{index}: no weight_map ({type(e).__name__}: {e})") from None
        by_file = {}
        for name, file in weight_map.items():
            by_file.setdefault(file, []).append(name)
        for file, names in sorted(by_file.items()):
            self._read_file(file, names)

    def _read_file(self, file, names):
        path = os.path.join(self.root, file)
        if not os.path.isfile(path):
            raise ExportError(f"{os.path.join(self.root, _INDEX)} names {file}, which is not in the folder")
        header = read_header(path)
        for name in header if names is None else names:
            if name not in header:
                raise ExportError(f"{_INDEX} puts tensor {name} in {file}, whose header does not have it")
            self.files[name], self.headers[name] = file, header[name]

    def dtype(self):
        """The floating dtype (a torch attribute name) most of the stored elements have, or None."""
        count = {}
        for dtype, shape in self.headers.values():
            if dtype in _DTYPES:
                n = 1
                for d in shape:
                    n *= d
                count[_DTYPES[dtype]] = count.get(_DTYPES[dtype], 0) + n
        return max(count, key=count.get) if count else None


# ----------------------------------------------------------------- building the model


@contextlib.contextmanager
def meta_parameters():
    """Every parameter registered inside goes to the meta device (buffers
    stay where they are): accelerate's init_empty_weights(include_buffers=False)."""
    import torch
    register = torch.nn.Module.register_parameter

    def on_meta(self, name, param):
        register(self, name, param)
        p = self._parameters.get(name)
        if p is not None and p.device.type != "meta":
            meta = type(p)(p.to("meta"), requires_grad=p.requires_grad)
            meta.__dict__.update(p.__dict__)
            self._parameters[name] = meta

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def _config(transformers, root, attn):
    try:
        cfg = transformers.AutoConfig.from_pretrained(root)
    except Exception as e:  # noqa: BLE001  (an unknown model_type, a broken config.json)
        raise ExportError(f"transformers {transformers.__version__} cannot read {root}/config.json: "
                          f"{hf.first_line(e)}") from None
    hf.zero_dropout(cfg)
    cfg.use_cache = False
    if attn:
        cfg._attn_implementation = attn
    return cfg


def _dtype_kwarg(transformers, dtype):
    """from_config/from_pretrained's dtype keyword (torch_dtype before transformers 4.56)."""
    major, minor = (int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def build(root, dtype=None, batch=2, seq=16, train=False, attn=None):
    """The checkpoint's model (meta parameters, real buffers) as an hf.Model,
    with `checkpoint` (a Checkpoint) and `dtype` (its torch dtype) added."""
    import torch
    ckpt = Checkpoint(root)
    transformers = hf.transformers_module()
    name = dtype or ckpt.dtype() or "float32"
    torch_dtype = getattr(torch, name)
    cfg = _config(transformers, ckpt.root, attn)
    try:
        with meta_parameters():
            module = transformers.AutoModelForCausalLM.from_config(cfg, **_dtype_kwarg(transformers, torch_dtype))
    except Exception as e:  # noqa: BLE001
        raise ExportError(f"transformers {transformers.__version__} could not build a causal LM from "
                          f"{ckpt.root}/config.json ({hf.first_line(e)})") from None
    vocab = getattr(cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg, "vocab_size", None) or 4
    m = hf.causal_lm(hf.logits_forward(module), vocab, batch, seq, train)
    m.checkpoint, m.dtype = ckpt, torch_dtype
    return m


def load_pretrained(root, dtype, attn=None):
    """The checkpoint with its weights (from_pretrained), with build's fixups: for expected.safetensors."""
    transformers = hf.transformers_module()
    cfg = _config(transformers, root, attn)
    try:
        module = transformers.AutoModelForCausalLM.from_pretrained(root, config=cfg,
                                                                   **_dtype_kwarg(transformers, dtype))
    except Exception as e:  # noqa: BLE001
        raise ExportError(f"--expected: from_pretrained({root}) failed: {hf.first_line(e)}") from None
    return hf.logits_forward(module)


# ----------------------------------------------------------------- the manifest


def _renamed(module, key):
    """A checkpoint key as transformers renames it on load (legacy names, _checkpoint_conversion_mapping)."""
    fix = getattr(module, "_fix_state_dict_key_on_load", None)
    if callable(fix):
        try:
            key = fix(key)[0]
        except Exception:  # noqa: BLE001  (another transformers' signature)
            pass
    for pattern, replacement in (getattr(module, "_checkpoint_conversion_mapping", None) or {}).items():
        key, n = re.subn(pattern, replacement, key)
        if n:
            break
    return key


def checkpoint_names(module, names):
    """{module key: checkpoint name} for the stored `names`, mapped as
    transformers' _load_pretrained_model maps them (the base model prefix
    added where the checkpoint is a bare base model, dropped where the
    module is one)."""
    prefix = getattr(module, "base_model_prefix", "") or ""
    has_prefix = bool(prefix) and any(k.startswith(prefix) for k in names)
    expects_prefix = bool(prefix) and hasattr(module, prefix)
    out = {}
    for name in names:
        key = _renamed(module, name)
        if expects_prefix and not has_prefix:
            key = f"{prefix}.{key}"
        elif has_prefix and not expects_prefix:
            if not key.startswith(prefix + "."):
                continue
            key = key[len(prefix) + 1:]
        out.setdefault(key, name)
    return out


def _groups(module):
    """{fqn: [fqn and the other names of the same parameter or buffer object]}."""
    by_id = {}
    for fqn, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        by_id.setdefault(id(t), []).append(fqn)
    return {fqn: names for names in by_id.values() for fqn in names}


def weight_entries(module, ckpt):
    """{fqn: {"file", "tensor"}} for every parameter of `module` and every
    persistent buffer the checkpoint stores; ExportError naming a parameter
    the checkpoint lacks or stores with another shape."""
    stored = checkpoint_names(module, list(ckpt.files))
    groups = _groups(module)
    state = module.state_dict(keep_vars=True)
    params = {k for k, _ in module.named_parameters(remove_duplicate=False)}
    entries = {}
    for fqn, t in state.items():
        name = next((stored[k] for k in groups.get(fqn, [fqn]) if k in stored), None)
        if name is None:
            if fqn in params:
                raise ExportError(f"parameter {fqn} has no tensor in the checkpoint {ckpt.root} (tried "
                                  f"{', '.join(groups.get(fqn, [fqn]))}, as transformers maps the names)")
            continue  # a persistent buffer the checkpoint does not store: its value from __init__
        dtype, shape = ckpt.headers[name]
        if tuple(t.shape) != shape:
            raise ExportError(f"{fqn}: shape {list(t.shape)} in the model, but {ckpt.files[name]} stores {name} "
                              f"as {list(shape)}")
        entries[fqn] = {"file": ckpt.files[name], "tensor": name}
    return entries


def dtype_note(module, ckpt, entries, say):
    """Says which tensors the checkpoint stores in another dtype than the
    module's (the weights' reader converts them: the manifest names no dtype)."""
    state = module.state_dict(keep_vars=True)
    pairs = {}
    for k, e in entries.items():
        stored, want = ckpt.headers[e["tensor"]][0], str(state[k].dtype).replace("torch.", "")
        if _DTYPES.get(stored) != want:
            pairs[f"{stored} -> {want}"] = pairs.get(f"{stored} -> {want}", 0) + 1
    if pairs:
        say(f"{sum(pairs.values())} of the {len(entries)} checkpoint tensors are stored in another dtype than the "
            f"program's ({', '.join(f'{n} {p}' for p, n in sorted(pairs.items()))}): the weights' reader converts "
            f"them")


def manifest_text(ckpt, entries):
    return json.dumps({"format": FORMAT, "root": ckpt.root, "tensors": entries}, indent=1) + "\n"


# ----------------------------------------------------------------- fake parameters, real buffers


def fakify(module, mode, stored):
    """Swaps, in place, every parameter and every buffer in `stored` (FQNs
    whose values the checkpoint holds) for a FakeTensor of `mode` on the
    CPU (a tied group stays one object); the other buffers become fakes of
    their real values. Returns {fqn: real value} of those buffers."""
    import torch
    fakes, real = {}, {}
    groups = _groups(module)
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for name, p in list(sub._parameters.items()):
            if p is not None:
                if id(p) not in fakes:
                    with mode:
                        value = torch.empty(p.shape, dtype=p.dtype, device="cpu")
                    fakes[id(p)] = torch.nn.Parameter(value, requires_grad=p.requires_grad)
                sub._parameters[name] = fakes[id(p)]
        for name, b in list(sub._buffers.items()):
            fqn = f"{prefix}.{name}" if prefix else name
            if b is None or id(b) in fakes:
                sub._buffers[name] = fakes.get(id(b), b)
                continue
            if any(k in stored for k in groups.get(fqn, [fqn])):
                with mode:
                    fakes[id(b)] = torch.empty(b.shape, dtype=b.dtype, device="cpu")
            else:
                fakes[id(b)] = mode.from_tensor(b)
                for k in groups.get(fqn, [fqn]):
                    real[k] = b.detach()
            sub._buffers[name] = fakes[id(b)]
    return real


def settle(program, real, entries, inputs=None):
    """Puts the program's state in the archive's form: the tensors `entries`
    lists on meta (a tied group one tensor), the other buffers and constants
    their real values; ExportError for any other fake left (a parameter or
    constant with no source)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    metas = {}
    for table in (program.state_dict, program.constants):
        for fqn, t in list(table.items()):
            if fqn in real:
                table[fqn] = real[fqn]
            elif fqn in entries:
                if id(t) not in metas:
                    meta = torch.empty(t.shape, dtype=t.dtype, device="meta")
                    metas[id(t)] = torch.nn.Parameter(meta, requires_grad=t.requires_grad) \
                        if isinstance(t, torch.nn.Parameter) else meta
                table[fqn] = metas[id(t)]
            elif isinstance(t, FakeTensor):
                raise ExportError(f"{fqn}: the exported program holds it, but it is neither in the checkpoint "
                                  f"nor a buffer of the model")
    if inputs is not None:
        try:
            program.example_inputs = (tuple(inputs), {})
        except (AttributeError, ValueError):
            program._example_inputs = None  # (the fakes the trace saw cannot be saved)


# ----------------------------------------------------------------- exports


def _save(out_dir, program, inputs, expected, meta, ckpt, entries, module):
    """Writes out_dir/ (core.save_case, the manifest in the archive, tp_plan.json); returns the entries kept."""
    from . import core
    from torch._subclasses.fake_tensor import FakeTensor
    import torch
    tables = {k: t for k, t in {**program.constants, **program.state_dict}.items() if isinstance(t, torch.Tensor)}
    kept = {k: v for k, v in entries.items() if k in tables and tables[k].device.type == "meta"}
    left = [k for k, t in tables.items() if isinstance(t, FakeTensor) or (t.device.type == "meta" and k not in kept)]
    if left:
        raise ExportError(f"{left[0]}: on meta in the exported program, with no tensor of the checkpoint")
    meta = dict(meta, weights={"by_reference": ckpt.root, "tensors": len(kept), "manifest": f"extra/{MANIFEST}"})
    core.save_case(out_dir, program, inputs, expected, meta, extra_files={MANIFEST: manifest_text(ckpt, kept)})
    core.write_tp_plan(module, out_dir)
    return kept


def export(module, example_inputs, out_dir, ckpt, dynamic_shapes=None, decompose=True, strict=False, log=None,
           expected=None):
    """Exports build()'s module for inference by reference (core.export's
    program, with MoE experts and Python-only ops handled the same way):
    traced on fake parameters, saved with meta parameters, real buffers and
    the manifest; `expected` ({output.<i>: tensor}) is written when given.
    The module is left with fake parameters: build a new one to use it
    again. Returns the ExportedProgram."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from . import core
    core.check_torch()
    inputs = core._as_inputs(example_inputs)
    notes = []
    say = core._logger(log, notes)
    entries = weight_entries(module, ckpt)
    dtype_note(module, ckpt, entries, say)
    undo_experts = fixups.aten_experts(module, say)
    module.eval()
    mode = FakeTensorMode()
    real = fakify(module, mode, entries)
    try:
        ep = torch.export.export(module, tuple(mode.from_tensor(t) for t in inputs),
                                 **core._export_kwargs(dynamic_shapes, strict))
        if decompose:
            ep = ep.run_decompositions()
        ep = core._aten_only(ep, say)
    finally:
        undo_experts()
    settle(ep, real, entries, inputs)
    _save(out_dir, ep, inputs, expected, {"kind": "inference", "decomposed": decompose, "note": "", "notes": notes},
          ckpt, entries, module)
    return ep


def export_train_step(module, example_inputs, out_dir, ckpt, loss_fn, targets=(), log=None, expected=None,
                      precision=None, attention=None):
    """Exports one train step of build(train=True)'s module by reference:
    the joint program of loss_fn(module(*inputs), *targets), traced in one
    pass (joint.trace_joint) on fake parameters; tied parameters are untied
    (both names point at the stored tensor). A step that needs torch's
    joint route (a mutated buffer, a tensor constant) is refused: that
    route is not supported by reference yet. `expected` (loss and
    grad.<fqn>) is written when given. precision (a precision.Policy)
    traces the step in mixed precision as core.export_train_step does (the
    module's parameters are its float32 masters; meta.json records the
    policy). attention: as core.export_train_step's. Returns the joint
    ExportedProgram."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from . import core, joint
    core.check_torch()
    inputs, targets = core._as_inputs(example_inputs), core._as_inputs(targets)
    notes = []
    say = core._logger(log, notes)
    entries = weight_entries(module, ckpt)  # before untying: each copy keeps its group's stored tensor
    dtype_note(module, ckpt, entries, say)
    n_inputs, _ = core._with_loss(module, loss_fn)
    n_inputs.append(len(inputs))
    fixups.aten_experts(module, say)
    core._untie(module, say)
    module.train()
    mode = FakeTensorMode()
    real = fakify(module, mode, entries)
    fake_inputs = tuple(mode.from_tensor(t) for t in inputs + targets)
    mp = (precision, len(inputs)) if precision is not None else None
    mode = attention or "math"
    program, reason = joint.trace_joint(module, fake_inputs, torch.zeros(()), mp, mode)
    why = sdpa.check(program.graph) if program is not None and mode == "fused" else None
    if why is not None:
        raise ExportError(f"--attention fused: {why}; export the step with --attention math")
    if program is None and precision is not None:
        raise ExportError(f"--mixed-precision: the step cannot be traced in one pass ({reason})")
    if program is None:
        raise ExportError(f"--train by reference: this step needs torch.export's joint route ({reason}), which "
                          f"is not supported by reference yet; export it with its weights instead")
    settle(program, real, entries)
    meta = {"kind": "train_step_joint", "joint_route": "make_fx", "note": "", "notes": notes, "attention": mode,
            "fused_attentions": sdpa.count(program.graph)}
    if precision is not None:
        meta["mixed_precision"] = precision.as_dict()
    _save(out_dir, program, inputs + targets, expected, meta, ckpt, entries, module)
    return program


def expected_outputs(root, dtype, inputs, attn=None):
    """{output.<i>} of the checkpoint's eager forward (from_pretrained, eval, no_grad)."""
    from . import core
    module = load_pretrained(root, dtype, attn)
    undo = fixups.aten_experts(module, lambda msg: None)
    try:
        outs = core._reference_outputs(module.eval(), core._as_inputs(inputs))
    finally:
        undo()
    return {f"output.{i}": o for i, o in enumerate(outs)}


def expected_train_step(root, dtype, inputs, targets, loss_fn, attn=None, precision=None):
    """{loss, grad.<fqn>} of one eager train step of the checkpoint (tied
    parameters untied, as exported); in mixed precision under `precision`
    (a precision.Policy) as precision.eager_step runs it."""
    from . import core
    from . import precision as mixed
    module = load_pretrained(root, dtype, attn)
    quiet = lambda msg: None  # noqa: E731  (the export says it)
    n_inputs, _ = core._with_loss(module, loss_fn)
    n_inputs.append(len(inputs))
    fixups.aten_experts(module, quiet)
    core._untie(module, quiet)
    module.train()
    if precision is not None:
        return mixed.eager_step(module, tuple(inputs) + tuple(targets), len(inputs), precision)
    expected, _ = core._eager_step(module, tuple(inputs) + tuple(targets), loss_fn, quiet)
    return expected
