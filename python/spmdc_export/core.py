"""Writing torch.export archives in the layout spmdc and spmd-run read.

    out_dir/model.pt2            torch.export.save of the exported (or joint) program
    out_dir/inputs.safetensors   input.0, input.1, ... (spmd-run --inputs)
    out_dir/expected.safetensors eager outputs output.<i>, or loss and grad.<fqn> (none for a
                                 checkpoint exported by reference, unless asked: hfref.py)
    out_dir/meta.json            kind, torch version, node count, op histogram
    out_dir/tp_plan.json         a Hugging Face model's tensor-parallel plan, when it has one
                                 (spmdc schema from-hf tp_plan.json --mesh N -o s.json)

A checkpoint exported by reference (hfref.py) has its parameters on meta in
model.pt2 and says where their values are in the archive's member
<top>/extra/spmdc_weights.json.
"""
import json
import os

import torch
from safetensors.torch import save_file

from . import attention as sdpa
from . import fixups, joint
from . import precision as mixed

MIN_TORCH = (2, 6)


class ExportError(Exception):
    """A one-line message naming what to fix."""


def torch_version():
    """(major, minor) of the installed torch."""
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return MIN_TORCH


def check_torch():
    if torch_version() < MIN_TORCH:
        raise ExportError(f"spmdc_export needs torch 2.6 to 2.14; this is torch {torch.__version__}: upgrade torch")


def _joint_exporter():
    """torch.export.experimental._export_forward_backward (private; torch 2.6 to 2.14 have it)."""
    try:
        from torch.export.experimental import _export_forward_backward
    except ImportError as e:
        raise ExportError(
            f"a train step needs torch.export.experimental._export_forward_backward, which torch "
            f"{torch.__version__} does not have ({e}); use torch 2.6 to 2.14") from None
    return _export_forward_backward


def _leaves(out):
    """The flattened outputs of a module, in the order torch.export numbers its user outputs."""
    try:
        from torch.utils._pytree import tree_leaves  # private, but in every torch 2.x
    except ImportError:
        tree_leaves = None
    if tree_leaves is not None:
        return tree_leaves(out)
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    if isinstance(out, dict):
        return [x for o in out.values() for x in _leaves(o)]
    return [] if out is None else [out]


def _as_inputs(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise ExportError(f"example_inputs must be a tuple of tensors, not {type(example_inputs).__name__}")
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor):
            raise ExportError(f"example input {i} is a {type(t).__name__}: spmd-run's inputs are tensors; "
                              f"pass only tensors (bake other arguments into the module)")
    return tuple(example_inputs)


def _check_module(module):
    if not isinstance(module, torch.nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(module).__name__}")


def _op_histogram(program):
    ops = {}
    nodes = 0
    for node in program.graph.nodes:
        nodes += 1
        if node.op == "call_function":
            ops[str(node.target)] = ops.get(str(node.target), 0) + 1
    return nodes, dict(sorted(ops.items()))


def save_case(out_dir, program, inputs, expected, meta, extra_files=None):
    """Writes model.pt2, inputs.safetensors (input.<i>), expected.safetensors
    (none where expected is None: an old one is removed) and meta.json
    (`meta` plus torch, num_nodes, ops) into out_dir; extra_files ({name:
    text}) go into the archive as <top>/extra/<name>. Returns the node count."""
    os.makedirs(out_dir, exist_ok=True)
    torch.export.save(program, os.path.join(out_dir, "model.pt2"), **({"extra_files": extra_files} if extra_files
                                                                       else {}))
    save_file({f"input.{i}": t.contiguous() for i, t in enumerate(inputs)},
              os.path.join(out_dir, "inputs.safetensors"))
    expected_path = os.path.join(out_dir, "expected.safetensors")
    if expected is not None:
        save_file({k: v.detach().contiguous() for k, v in expected.items()}, expected_path)
    elif os.path.exists(expected_path):
        os.remove(expected_path)
    nodes, ops = _op_histogram(program)
    meta = dict(meta, torch=torch.__version__, num_nodes=nodes, ops=ops)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return nodes


def find_tp_plan(module):
    """The Hugging Face tensor-parallel plan `module` (or a submodule, or its
    config) carries, as tp_plan.json holds it, or None."""
    for m in module.modules():
        cfg = getattr(m, "config", None)
        plan = getattr(cfg, "base_model_tp_plan", None) if cfg is not None else None
        if not plan and cfg is not None and callable(getattr(cfg, "get_text_config", None)):
            try:
                plan = getattr(cfg.get_text_config(), "base_model_tp_plan", None)
            except Exception:  # noqa: BLE001  (a config without a text part)
                plan = None
        if not plan:
            plan = getattr(m, "base_model_tp_plan", None)
        if plan and isinstance(plan, dict):
            head = getattr(type(m), "_tp_plan", None)
            return {"base_model_tp_plan": dict(plan),
                    "tp_plan": dict(head) if isinstance(head, dict) else {},
                    "base_model_prefix": getattr(m, "base_model_prefix", "") or ""}
    return None


def write_tp_plan(module, out_dir):
    """Writes out_dir/tp_plan.json when `module` carries a plan; returns its path or None."""
    plan = find_tp_plan(module)
    if plan is None:
        return None
    path = os.path.join(out_dir, "tp_plan.json")
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")
    return path


def _export_kwargs(dynamic_shapes=None, strict=None):
    kw = {}
    if dynamic_shapes is not None:
        kw["dynamic_shapes"] = dynamic_shapes
    if strict is not None:  # torch's default: strict before 2.7, non-strict after
        kw["strict"] = strict
    return kw


def _logger(log, notes):
    """A function that records a note in `notes` and passes it to `log` (when given)."""
    def say(msg):
        notes.append(msg)
        if log is not None:
            log(msg)
    return say


def _aten_only(program, say):
    """program with its Python-only ops replaced by their decompositions;
    ExportError naming the first one that has none."""
    program, left = fixups.replace_python_only_ops(program, say)
    if left:
        raise ExportError(fixups.refusal(left[0]))
    return program


def _reference_outputs(module, inputs):
    """The module's eager outputs (eval mode, no_grad), checked to be tensors."""
    with torch.no_grad():
        outs = _leaves(module(*inputs))
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise ExportError(f"output {i} of the module is a {type(o).__name__}: spmd-run's outputs are "
                              f"tensors; return only tensors")
    if not outs:
        raise ExportError("the module returns no tensor")
    return outs


MOE_ROUTES = ("experts", "dense")  # transformers 4.x MoE blocks: stacked into the experts op, or dense dispatch


def _moe_experts_op(moe):
    """Whether `moe` (one of MOE_ROUTES) stacks MoE blocks into the experts op."""
    if moe not in MOE_ROUTES:
        raise ExportError(f"moe={moe!r}: choose 'experts' (the experts op, expert parallelism) or 'dense' "
                          f"(dense dispatch, per-expert parameters)")
    return moe == "experts"


def export(module, example_inputs, out_dir, dynamic_shapes=None, decompose=True, note="", strict=None, log=None,
           moe="experts"):
    """Exports `module` for inference: runs it eagerly in eval mode under
    no_grad for the reference outputs, exports it with torch.export.export
    (then run_decompositions() unless decompose=False) and writes out_dir/
    (model.pt2, inputs.safetensors, expected.safetensors with output.<i>,
    meta.json, and tp_plan.json for a Hugging Face model with a plan).
    strict=None leaves torch.export's default. Ops registered from Python
    are replaced by their registered decompositions (ExportError when one
    has none), transformers' MoE experts take their ATen path; each such
    change is a note in meta.json, also passed to log(str) when given.
    transformers 4.x MoE blocks have their experts stacked into the experts
    op (moe="experts": parameters <block>.experts.w1/w2/w3, what expert
    parallelism shards) or dense dispatch (moe="dense"; moe.py). The
    module's buffers, configs and experts are left as they were. Returns
    the ExportedProgram."""
    check_torch()
    _check_module(module)
    inputs = _as_inputs(example_inputs)
    experts_op = _moe_experts_op(moe)
    notes = []
    say = _logger(log, notes)
    was_training = module.training
    buffers = fixups.snapshot_buffers(module)
    undo_experts = fixups.aten_experts(module, say, experts_op)
    module.eval()
    try:
        outs = _reference_outputs(module, inputs)
        fixups.restore_buffers(buffers)
        ep = torch.export.export(module, inputs, **_export_kwargs(dynamic_shapes, strict))
        if decompose:
            ep = ep.run_decompositions()
        ep = _aten_only(ep, say)
    finally:
        module.train(was_training)
        undo_experts()
        fixups.restore_buffers(buffers)
    save_case(out_dir, ep, inputs, {f"output.{i}": o for i, o in enumerate(outs)},
              {"kind": "inference", "decomposed": decompose, "note": note, "notes": notes})
    write_tp_plan(module, out_dir)
    return ep


def _with_loss(module, loss_fn):
    """Gives `module` (in place, undone by the returned function) a forward
    that returns loss_fn(original forward(*inputs), *targets): a subclass of
    its own class, so parameter names (and a tp plan's globs) stay its own."""
    base = type(module)
    n_inputs = []

    def forward(self, *args):
        return loss_fn(base.forward(self, *args[:n_inputs[0]]), *args[n_inputs[0]:])

    module.__class__ = type(base.__name__, (base,), {"forward": forward, "__module__": base.__module__,
                                                       "__qualname__": base.__qualname__})

    def restore():
        module.__class__ = base
    return n_inputs, restore


def _check_loss(loss, loss_fn):
    """ExportError unless `loss` is a scalar floating-point tensor."""
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.is_floating_point():
        return
    what = f"a tensor of shape {list(loss.shape)}" if isinstance(loss, torch.Tensor) else f"a {type(loss).__name__}"
    if loss_fn is not None:
        raise ExportError(f"loss_fn must return a scalar floating-point tensor, got {what}")
    raise ExportError(f"a train step's forward must return the scalar floating-point loss, got {what}: "
                      f"pass loss_fn=... and targets=... (on the command line: --loss and --target)")


def _freeze_unused_copies(module, missing, say):
    """Freezes (for the export) the parameters of an untied group that get no
    gradient (an alias the forward never reads, as BERT's decoder bias);
    returns the names left without a gradient and the undo."""
    params = dict(module.named_parameters())
    frozen = [k for k in missing if fixups.was_untied(params[k])]
    for k in frozen:
        params[k].requires_grad_(False)
    if frozen:
        say(f"froze {', '.join(frozen)} for the train step: tied to another name, and the loss does not use it")
    return [k for k in missing if k not in frozen], lambda: [params[k].requires_grad_(True) for k in frozen]


def _eager_step(module, inputs, loss_fn, say):
    """The eager loss and gradients (train mode) as expected.safetensors
    holds them, and the undo of the parameters it froze. Clears .grad."""
    module.zero_grad()
    loss = module(*inputs)
    _check_loss(loss, loss_fn)
    loss.backward()
    expected = {"loss": loss.detach()}
    missing = []
    for k, p in module.named_parameters():
        if not p.requires_grad:  # frozen: the joint graph has no gradient for it either
            continue
        if p.grad is None:
            missing.append(k)
        else:
            expected[f"grad.{k}"] = p.grad.detach().clone()
    module.zero_grad()
    missing, unfreeze = _freeze_unused_copies(module, missing, say)
    if missing:
        unfreeze()
        raise ExportError(f"parameter(s) {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} get no "
                          f"gradient from the loss; the joint graph needs one for every parameter: remove them "
                          f"or let the loss depend on them")
    return expected, unfreeze


def _fast_joint(module, inputs, loss, say, precision=None, attention="fused"):
    """joint.trace_joint's program, or None (with a note why) where torch's
    route must trace it. A mixed-precision step (precision: (Policy, model
    inputs)) has only this route: ExportError with the reason."""
    try:
        program, reason = joint.trace_joint(module, inputs, loss, precision, attention)
    except Exception as e:  # noqa: BLE001  (torch's route reports its own errors)
        program, reason = None, (str(e).strip().splitlines() or [type(e).__name__])[0]
    if program is None and precision is not None:
        raise ExportError(f"--mixed-precision: the step cannot be traced in one pass ({reason}); export it "
                          f"without --mixed-precision")
    if program is None:
        say(f"joint traced by torch.export (slower): {reason}")
    return program


def _joint_program(module, inputs, strict, say, loss=None, precision=None, attention="fused"):
    """The joint forward+backward program of module(*inputs): traced in one
    pass (joint.py) when `loss` (the eager loss) is given and it can be, else
    by torch.export (its Python-only ops replaced first), with the usual cause
    of torch's failures named. A mixed-precision step (precision: (Policy,
    model inputs)) is traced in one pass only. attention: attention.MODES.
    Returns (program, route)."""
    if precision is not None and (loss is None or strict):
        raise ExportError("--mixed-precision: the step is traced in one pass only; leave out --torch-joint "
                          "and strict export")
    if loss is not None and not strict:
        program = _fast_joint(module, inputs, loss, say, precision, attention)
        if program is not None:
            return program, "make_fx"
    joint_export = _joint_exporter()
    try:
        with sdpa.context(attention):
            ep = _aten_only(torch.export.export(module, inputs, **_export_kwargs(strict=strict)), say)
            joint = joint_export(ep)
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001  (rephrased with the usual cause)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "did not receive a gradient" in msg:
            raise ExportError(f"_export_forward_backward (torch {torch.__version__}): {msg}; tied parameters "
                              f"(one tensor under two names, e.g. an embedding and lm_head) cause this: "
                              f"pass untie=True (on the command line it is the default)") from e
        raise
    left = fixups.python_only_ops(joint)  # from a backward formula: the joint is not decomposed again
    if left:
        raise ExportError(fixups.refusal(left[0]))
    return joint, "torch.export"


def _attention_joint(module, inputs, strict, say, loss, precision, attention):
    """_joint_program with sdpa traced as `attention` says (None: "math");
    ExportError where "fused" was asked for and this torch cannot keep it.
    Returns (program, route, mode)."""
    mode = attention or "math"
    program, route = _joint_program(module, inputs, strict, say, loss, precision, mode)
    reason = sdpa.check(program.graph) if mode == "fused" else None
    if reason is not None:
        raise ExportError(f"--attention fused: {reason}; export the step with --attention math")
    return program, route, mode


def _untie(module, say):
    """untie_parameters with a note per name; returns the undo."""
    try:
        untied, undo = fixups.untie_parameters(module)
    except ValueError as e:
        raise ExportError(f"{e}; untie it in the model for the train step") from None
    if untied:
        say(f"untied {', '.join(f'{a} (from {k})' for a, k in untied)} for the train step: each name gets its "
            f"own copy and its own gradient")
    return undo


def export_train_step(module, example_inputs, out_dir, loss_fn=None, targets=(), note="", strict=None,
                      untie=False, log=None, fast=True, precision=None, moe="experts", attention=None):
    """Exports one training step as the joint forward+backward graph
    (torch.export.experimental._export_forward_backward): its outputs are the
    loss, then one gradient per parameter. Without loss_fn, module(*inputs)
    must return the scalar loss; with it, the loss is loss_fn(module(*inputs),
    *targets) and the program's inputs are the example inputs followed by the
    targets. Writes out_dir/ as export() does, with loss and grad.<fqn> (the
    eager loss and gradients, train mode; frozen parameters have none) in
    expected.safetensors. The archive holds the module's state from before
    the eager step: its buffers (BatchNorm's running statistics) are
    restored, and .grad fields cleared. untie=True gives parameter names
    that share a tensor their own copies for the export (a tied name the
    loss never reads is frozen). Python-only ops and MoE experts as in
    export(); notes to meta.json and log. Dropout makes the eager reference
    random: set its p to 0 to compare. fast=True traces the joint in one
    pass (joint.py; meta.json's joint_route says "make_fx") unless strict
    export is asked for or the step needs torch's route (a note says why);
    fast=False always takes torch.export's route. precision (a
    precision.Policy, or a param dtype name such as "bf16" with a float32
    reduce_dtype) traces the step in mixed precision as FSDP2 runs it
    (precision.py): expected.safetensors then holds that step's eager loss
    and float32 gradients and meta.json its "mixed_precision". attention
    ("fused" or "math", attention.py; None is "math") is how
    scaled_dot_product_attention is traced; "fused" raises ExportError
    where this torch cannot keep the fused backward's logsumexp
    (attention.check). meta.json's "attention" says which, and
    "fused_attentions" how many fused forwards the step holds. Returns
    the joint ExportedProgram."""
    check_torch()
    _check_module(module)
    inputs = _as_inputs(example_inputs)
    targets = _as_inputs(targets) if targets is not None else ()
    if targets and loss_fn is None:
        raise ExportError("targets given without loss_fn: pass loss_fn(outputs, *targets)")
    if loss_fn is not None and not callable(loss_fn):
        raise ExportError(f"loss_fn must be callable, not {type(loss_fn).__name__}")
    _joint_exporter()
    if attention is not None and attention not in sdpa.MODES:
        raise ExportError(f"attention must be one of {', '.join(sdpa.MODES)}, not {attention!r}")
    experts_op = _moe_experts_op(moe)
    if isinstance(precision, str):
        try:
            precision = mixed.policy(precision)
        except ValueError as e:
            raise ExportError(str(e).replace("--mixed-precision", "precision")) from None
    notes = []
    say = _logger(log, notes)
    undos = []
    was_training = module.training
    buffers = fixups.snapshot_buffers(module)
    try:
        n_model = len(inputs)
        if loss_fn is not None:
            n_inputs, restore = _with_loss(module, loss_fn)
            undos.append(restore)
            n_inputs.append(len(inputs))
            inputs = inputs + targets
        undos.append(fixups.aten_experts(module, say, experts_op))
        if untie:
            undos.append(_untie(module, say))
        module.train()
        expected, unfreeze = _eager_step(module, inputs, loss_fn, say)
        undos.append(unfreeze)
        fixups.restore_buffers(buffers)
        mp = (precision, n_model) if precision is not None else None
        if mp is not None:
            expected = mixed.eager_step(module, inputs, n_model, precision)
            fixups.restore_buffers(buffers)
        joint, route, mode = _attention_joint(module, inputs, strict, say, expected["loss"] if fast else None, mp,
                                              attention)
    finally:
        module.train(was_training)
        fixups.undo_all(undos)
        fixups.restore_buffers(buffers)
    meta = {"kind": "train_step_joint", "joint_route": route, "note": note, "notes": notes, "attention": mode,
            "fused_attentions": sdpa.count(joint.graph)}
    if precision is not None:
        meta["mixed_precision"] = precision.as_dict()
    save_case(out_dir, joint, inputs, expected, meta)
    write_tp_plan(module, out_dir)
    return joint
