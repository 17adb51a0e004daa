"""The joint forward+backward program of a train step, traced in one pass.

torch.export's route to a joint graph (export, then
torch.export.experimental._export_forward_backward) traces the model three
times: the export itself, then aot_autograd's metadata pass and its joint
pass over the exported GraphModule, each op going through the interpreter.
For a 32-layer llama train step that is about 37 s of a 49 s export. This
module traces the same step once, with make_fx over
`functional_call` + `torch.autograd.grad` under FakeTensors and the Core
ATen decompositions (what run_decompositions applies), and wraps the graph
in an ExportedProgram with the signature torch.export gives a joint program:

    inputs:  p_<fqn> PARAMETER, b_<fqn> BUFFER, then the forward's arguments
    outputs: the loss (LOSS_OUTPUT), one gradient per trainable parameter
             (GRADIENT_TO_PARAMETER, in named_parameters order)

Where this trace is not the same program torch.export would write, it
returns None with the reason, and the caller takes torch's route: an op that
mutates an input or a buffer (BatchNorm's running statistics need
functionalization; an in-place op on a value nothing else sees is rewritten
out of place instead), a tensor constant, an op outside ATen (a Python-only
op for fixups to replace), parameters that share a tensor.
tests/export/joint_test.py holds the two routes equal: same signature, same
loss and gradients.
"""
import inspect
import operator

import torch
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                                          TensorArgument)
from torch.func import functional_call
from torch.utils import _pytree as pytree

from . import attention as sdpa
from . import fixups
from . import precision as mixed


def input_names(module, n):
    """The names torch.export gives the first n positional inputs of
    module.forward: the parameter names, `args_<i>` style for *args."""
    names = []
    for p in inspect.signature(module.forward).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            names += [f"{p.name}_{i}" for i in range(n - len(names))]
            break
        if len(names) == n:
            break
    if len(names) < n:
        raise ValueError(f"forward takes {len(names)} positional inputs, given {n}")
    return names[:n]


def _trace(module, inputs, trainable, precision=None, attention="fused"):
    """make_fx of one step: (params, buffers, *inputs) -> (loss, *grads).
    precision: (precision.Policy, number of model inputs) for a mixed-
    precision step (precision.py), or None. attention: attention.MODES."""
    from torch.fx.experimental.proxy_tensor import make_fx

    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())

    def step(params, buffers, *batch):
        used = params
        if precision is not None:
            used = mixed.cast_params(params, precision[0])
            batch = mixed.cast_inputs(batch, precision[1], precision[0])
        loss = functional_call(module, {**used, **buffers}, tuple(batch))
        _mark_backward(loss)
        return (loss, *torch.autograd.grad(loss, [params[k] for k in trainable]))

    kw = {}
    if "record_stack_traces" in inspect.signature(make_fx).parameters:
        kw["record_stack_traces"] = True  # explain's source lines; the torch route keeps only FX's
    handles = _module_stacks(module)
    try:  # preserve_node_meta: seq_nr, which forward op a backward op belongs to
        with torch.fx.traceback.preserve_node_meta(), sdpa.context(attention):
            gm = make_fx(step, decomposition_table=sdpa.decompositions(attention), tracing_mode="fake", **kw)(
                params, buffers, *inputs)
    finally:
        for h in handles:
            h.remove()
        torch.fx.traceback.current_meta.pop("nn_module_stack", None)
    _backward_sources(gm)
    return gm


def _module_stacks(module):
    """Hooks that give each forward op the modules it runs in, as
    torch.export's nn_module_stack ({key: (path, type)}, outermost first):
    what a schema's module globs ("recompute": {"layers.*": "full"}) and
    explain's module types read. Returns the hook handles."""
    import torch.fx.traceback as fx_traceback

    stack = []

    def publish():
        fx_traceback.current_meta["nn_module_stack"] = {
            "L__self__" + path.replace(".", "_"): (path, f"{t.__module__}.{t.__qualname__}") for path, t in stack}

    def enter(path):
        def hook(mod, args):
            stack.append((path, type(mod)))
            publish()
        return hook

    def leave(mod, args, out):
        if stack:
            stack.pop()
        publish()

    handles = []
    for path, mod in module.named_modules():
        if path:  # the root frame carries no module path
            handles.append(mod.register_forward_pre_hook(enter(path)))
            handles.append(mod.register_forward_hook(leave, always_call=True))
    return handles


def _mark_backward(loss):
    """Hooks that tag each backward op with its forward op's seq_nr (what
    aot_autograd installs; private, so optional)."""
    try:
        from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks
    except ImportError:
        return
    if loss.grad_fn is not None:
        setup_stacktrace_preservation_hooks([loss.grad_fn])


def _backward_sources(gm):
    """Gives each backward op the source line and modules of the forward op
    it differentiates (the same autograd seq_nr), as aot_autograd does."""
    for key in ("stack_trace", "nn_module_stack"):
        forward = {}
        for node in gm.graph.nodes:
            seq, value = node.meta.get("seq_nr"), node.meta.get(key)
            if seq is not None and value and seq not in forward:
                forward[seq] = value
        for node in gm.graph.nodes:
            if node.op == "call_function" and not node.meta.get(key) and node.meta.get("seq_nr") in forward:
                node.meta[key] = forward[node.meta["seq_nr"]]


def _functional_twin(op):
    """aten.add.Tensor for aten.add_.Tensor: the out-of-place overload with
    the same arguments, or None."""
    name = op._schema.name.split("::")[1]
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    twin = getattr(packet, op._overloadname, None) if packet is not None else None
    if twin is None or [a.name for a in twin._schema.arguments] != [a.name for a in op._schema.arguments]:
        return None
    return twin


def _fresh(node):
    """node is a value no other name can see: made by an op that returns a
    new tensor (no alias), and read only by its one user."""
    if node.op != "call_function" or len(node.users) != 1:
        return False
    schema = getattr(node.target, "_schema", None)
    return schema is not None and all(r.alias_info is None for r in schema.returns)


def _outplace(gm):
    """Rewrites x.op_(...) as op(x, ...) where x is fresh (HF's causal mask:
    arange(...).add_(0)): the program torch.export's functionalization
    writes. Mutations of anything else stay (and send the step to torch's
    route)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        twin = _functional_twin(node.target) if node.target._schema.is_mutable else None
        if twin is None or not node.args or not _fresh(node.args[0]):
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(twin, node.args, node.kwargs)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)


def _why_not(gm):
    """The reason gm is not torch.export's joint program, or None."""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            return f"a tensor constant ({node.target})"
        if node.op != "call_function" or node.target is operator.getitem:  # getitem: a multi-output op's element
            continue
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target.namespace not in ("aten", "spmdc"):
            return f"{target} is not an ATen op"
        if target._schema.is_mutable:
            return f"{target} mutates its input"
    return None


def _signature(module, gm, names, trainable, persistent):
    """Renames gm's placeholders as torch.export does; the joint signature.
    persistent: the names in module's state_dict."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = [k for k, _ in module.named_parameters()]
    buffers = [k for k, _ in module.named_buffers()]
    specs = []
    kinds = ([("p_", InputKind.PARAMETER, k) for k in params] + [("b_", InputKind.BUFFER, k) for k in buffers]
             + [("", InputKind.USER_INPUT, k) for k in names])
    if len(kinds) != len(placeholders):
        raise AssertionError(f"traced {len(placeholders)} inputs, expected {len(kinds)}")
    for node, (prefix, kind, key) in zip(placeholders, kinds):
        node._rename(prefix + key.replace(".", "_"))
        target = None if kind == InputKind.USER_INPUT else key
        extra = {"persistent": key in persistent} if kind == InputKind.BUFFER else {}
        specs.append(InputSpec(kind=kind, arg=TensorArgument(name=node.name), target=target, **extra))
    outs = pytree.tree_leaves(next(n for n in gm.graph.nodes if n.op == "output").args[0])
    out_specs = [OutputSpec(kind=OutputKind.LOSS_OUTPUT, arg=TensorArgument(name=outs[0].name), target=None)]
    out_specs += [OutputSpec(kind=OutputKind.GRADIENT_TO_PARAMETER, arg=TensorArgument(name=o.name), target=k)
                  for o, k in zip(outs[1:], trainable)]
    return ExportGraphSignature(input_specs=specs, output_specs=out_specs)


def _call_graph(inputs, loss, names):
    in_spec = pytree.tree_flatten((tuple(inputs), {}))[1]
    out_spec = pytree.tree_flatten(loss)[1]
    try:
        sig = ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec,
                                  forward_arg_names=names)
    except TypeError:  # torch before forward_arg_names
        sig = ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec)
    return [ModuleCallEntry(fqn="", signature=sig)]


def trace_joint(module, inputs, loss, precision=None, attention="fused"):
    """(ExportedProgram, None) for the joint program of module(*inputs) in
    train mode, traced once; (None, reason) where it would differ from
    torch.export's. `loss` is an eager loss of the same step (its pytree
    spec becomes the program's out_spec). precision: (precision.Policy,
    number of model inputs) traces the step in mixed precision, the policy
    recorded on the parameters' casts. attention ("fused" or "math",
    attention.py) is how scaled_dot_product_attention is traced."""
    shared = fixups.shared_parameters(module)
    if shared:  # before the trace: it is the expensive part
        return None, f"parameters share a tensor ({', '.join(shared[0])})"
    trainable = [k for k, p in module.named_parameters() if p.requires_grad]
    names = input_names(module, len(inputs))
    gm = _trace(module, inputs, trainable, precision, attention)
    _outplace(gm)
    for node in list(gm.graph.nodes):  # an element of a multi-output op that came out None (convolution_backward)
        if node.target is operator.getitem and not node.users and "val" not in node.meta:
            gm.graph.erase_node(node)
    reason = _why_not(gm)
    if reason is not None:
        return None, reason
    state_dict = module.state_dict(keep_vars=True)  # parameters and persistent buffers
    signature = _signature(module, gm, names, trainable, state_dict)
    if precision is not None and mixed.tag(gm, precision[0]) == 0:
        return None, "no parameter is cast to the mixed-precision dtype (no floating-point parameters?)"
    gm.graph.lint()
    gm.recompile()
    constants = {k: b for k, b in module.named_buffers() if k not in state_dict}
    program = torch.export.ExportedProgram(root=gm, graph=gm.graph, graph_signature=signature,
                                           state_dict=state_dict, range_constraints={},
                                           module_call_graph=_call_graph(inputs, loss, names),
                                           constants=constants)
    return program, None
