"""What the export helper changes around torch.export, and undoes afterwards.

* buffers: the eager reference step (BatchNorm's running stats,
  num_batches_tracked) must not reach the archive or the user's module;
* tied parameters: one tensor under two names has no gradient of its own in
  a joint graph, so a train step gives each name its own copy;
* transformers' MoE experts: `config._experts_implementation` other than
  "batched_mm" exports Python-only ops (grouped_mm_fallback) or a
  data-dependent loop, so it is set to "batched_mm" for the export;
  transformers 4.x's MoE blocks (a loop over a ModuleList of experts with
  data-dependent sizes) get moe.py's static-shape routing instead: their
  experts stacked into the experts op (what expert parallelism shards), or
  dense dispatch;
* Python-only ops: an op registered from Python (a torch.library custom op
  with no C++ kernel) cannot run in spmd-run: it is replaced by its
  registered decomposition, or the export fails naming it;
* dynamic batch: dim 0 of every positional tensor input, whatever the
  forward's signature (`forward(self, *args)` included).
"""
import copy
import inspect

import torch

from . import moe

BATCHED_MM = "batched_mm"
_KERNEL_KEYS = ("CPU", "CUDA", "XPU", "MPS", "HIP", "CompositeExplicitAutograd",
                "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd")
_UNTIED = "_spmdc_untied"  # marks a parameter of a group untie_parameters split


def undo_all(undos):
    """Runs undo closures in reverse order."""
    for undo in reversed(undos):
        undo()


# ----------------------------------------------------------------- buffers


def snapshot_buffers(module):
    """Every buffer of `module` (the object and a copy of its value), for restore_buffers."""
    return [(sub, name, buf, buf.detach().clone())
            for sub in module.modules() for name, buf in sub._buffers.items() if buf is not None]


def restore_buffers(snapshot):
    """Puts every buffer object back in its module with its saved value."""
    with torch.no_grad():
        for sub, name, buf, value in snapshot:
            if buf.shape == value.shape:
                buf.copy_(value)
            else:  # resized in place by the step
                buf.set_(value)
            sub._buffers[name] = buf


# ----------------------------------------------------------------- tied parameters


def _storage_key(p):
    """What identifies p's memory: its storage's address, or p itself when it has none
    (meta and fake tensors: their tied names are one object)."""
    from torch._subclasses.fake_tensor import FakeTensor
    if p.device.type == "meta" or isinstance(p, FakeTensor):
        return ("id", id(p))
    try:
        ptr = p.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        ptr = 0
    return (str(p.device), ptr) if ptr else ("id", id(p))


def shared_parameters(module):
    """Groups of parameter names (registration order) whose tensors share storage."""
    groups = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        groups.setdefault(_storage_key(p), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _resolve(module, path):
    """The submodule or parameter at a dotted path."""
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _copy_at(module, path):
    """Replaces the object at `path` by a copy of it; returns the undo closure."""
    parent_path, _, leaf = path.rpartition(".")
    parent = _resolve(module, parent_path) if parent_path else module
    old = getattr(parent, leaf)
    if isinstance(old, torch.nn.Parameter):
        new = torch.nn.Parameter(old.detach().clone(), requires_grad=old.requires_grad)
    else:  # a submodule registered under two names
        new = copy.deepcopy(old)
    for p in new.parameters() if isinstance(new, torch.nn.Module) else (new,):
        setattr(p, _UNTIED, True)
    setattr(parent, leaf, new)
    return lambda: setattr(parent, leaf, old)


def _untie_one(module, kept, alias):
    """Gives `alias` its own copy of what it shares with `kept`: the
    outermost object on alias's path that kept's path also reaches (a shared
    submodule, or the parameter itself) is copied. Returns the undo closure,
    the path copied and the path it was a copy of."""
    parts = kept.split(".")
    reached = {id(_resolve(module, p)): p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1))}
    alias_parts = alias.split(".")
    for i in range(1, len(alias_parts) + 1):
        path = ".".join(alias_parts[:i])
        source = reached.get(id(_resolve(module, path)))
        if source is not None:
            return _copy_at(module, path), path, source
    return _copy_at(module, alias), alias, kept  # distinct Parameters over one storage


def untie_parameters(module):
    """Gives every parameter name that shares storage with an earlier one
    its own copy (same values), so that a train step's joint graph has one
    gradient per name, as the --hf path's untied models have; a submodule
    registered under two names is copied whole. Returns ([(copied path,
    path it copies), ...], undo)."""
    untied, undos, tried = [], [], set()
    for names in shared_parameters(module):
        kept = _resolve(module, names[0])
        setattr(kept, _UNTIED, True)
        undos.append(lambda p=kept: p.__dict__.pop(_UNTIED, None))
    while True:
        groups = shared_parameters(module)
        if not groups:
            return untied, lambda: undo_all(undos)
        kept, alias = groups[0][:2]
        if alias in tried:  # a copy that did not take (a parametrized module, ...)
            undo_all(undos)
            raise ValueError(f"could not untie parameter {alias} from {kept}")
        tried.add(alias)
        undo, copied, source = _untie_one(module, kept, alias)
        undos.append(undo)
        untied.append((copied, source))


def was_untied(p):
    """Whether p belongs to a group untie_parameters split."""
    return bool(getattr(p, _UNTIED, False))


# ----------------------------------------------------------------- transformers' MoE experts


def _configs(module):
    """The distinct `config` objects of module and its submodules."""
    seen = {}
    for m in module.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and id(cfg) not in seen:
            seen[id(cfg)] = cfg
    return list(seen.values())


def aten_experts(module, log, experts_op=False):
    """Sets `_experts_implementation` to "batched_mm" on every config that
    has one and holds another value (transformers 5's MoE; its default path
    exports transformers::grouped_mm_fallback, registered from Python, and
    "eager" loops over the experts a batch routes to), and gives
    transformers 4.x's MoE blocks static-shape routing (moe.static_routing:
    with experts_op=True their experts stacked into the experts op, else
    dense dispatch). Returns the undo."""
    undos = [moe.static_routing(module, log, experts_op)]
    for cfg in _configs(module):
        if not hasattr(cfg, "_experts_implementation"):
            continue
        old = getattr(cfg, "_experts_implementation")
        if old == BATCHED_MM:
            continue
        setattr(cfg, "_experts_implementation", BATCHED_MM)
        undos.append(lambda c=cfg, v=old: setattr(c, "_experts_implementation", v))
        log(f"{type(cfg).__name__}._experts_implementation {old!r} -> {BATCHED_MM!r} for the export "
            f"(the ATen path of transformers' MoE experts; other paths export Python-only ops spmd-run cannot run)")
    return lambda: undo_all(undos)


# ----------------------------------------------------------------- Python-only ops


def _qualname(op):
    """The dispatcher's name of an OpOverload: ns::name or ns::name.overload."""
    overload = op._schema.overload_name
    return op._schema.name + (f".{overload}" if overload else "")


def _has_cpp_kernel(op):
    """Whether a backend or composite kernel of op was registered from C++
    (not from a .py file), per the dispatcher's own record."""
    try:
        dump = torch._C._dispatch_dump(_qualname(op))
    except (AttributeError, RuntimeError):
        return False
    for line in dump.splitlines():
        key, sep, where = line.partition(": registered at ")
        if sep and key.replace("[alias]", "").strip() in _KERNEL_KEYS:
            if not where.split(" :: ")[0].rsplit(":", 1)[0].endswith(".py"):
                return True
    return False


def python_only_ops(program):
    """The OpOverloads program calls outside aten and prims that have no C++
    kernel (spmdc's own ops, experts.py, spmd-run runs itself)."""
    ops = {}
    graphs = [m.graph for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    for node in (n for g in graphs for n in g.nodes):  # subgraphs of higher-order ops included
        op = node.target
        if node.op == "call_function" and isinstance(op, torch._ops.OpOverload) \
                and op.namespace not in ("aten", "prims", "spmdc") and op not in ops:
            ops[op] = _has_cpp_kernel(op)
    return [op for op, cpp in ops.items() if not cpp]


def _decomposition(op):
    """op's registered decomposition (torch._decomp) or its composite kernel, or None."""
    from torch._decomp import decomposition_table
    if op in decomposition_table:
        return decomposition_table[op]
    if torch._C._dispatch_has_kernel_for_dispatch_key(_qualname(op), "CompositeImplicitAutograd"):
        return op.decompose
    return None


def refusal(op):
    """The one-line error for a Python-only op left in the graph."""
    return (f"the exported graph calls {op}, an op registered from Python with no C++ kernel and no "
            f"decomposition, which spmd-run (no Python) cannot run: register a decomposition to ATen "
            f"(torch._decomp.register_decomposition(torch.ops.{op})) and export again, or export with its C++ "
            f"kernel library loaded (torch.ops.load_library), then compile with a schema rule for {op} and run "
            f"with spmd-run --load-library LIB.so")


def replace_python_only_ops(program, log):
    """Rewrites the Python-only ops of program by their registered
    decompositions (ep.run_decompositions); returns the program and the ops
    left without one."""
    ops = python_only_ops(program)
    table = {op: d for op in ops for d in (_decomposition(op),) if d is not None}
    if table:
        program = program.run_decompositions(table)
        log(f"replaced {', '.join(sorted(str(op) for op in table))} (registered from Python) by "
            f"{'its' if len(table) == 1 else 'their'} decomposition")
    return program, python_only_ops(program)


# ----------------------------------------------------------------- dynamic batch


def batch_dynamic_shapes(module, inputs, dim):
    """torch.export's dynamic_shapes giving dim 0 of every positional
    tensor input the Dim `dim`, shaped as the forward's signature binds the
    inputs (a *args parameter takes a tuple)."""
    bound = inspect.signature(module.forward).bind(*inputs)
    shapes = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        shapes[name] = tuple({0: dim} for _ in value) if kind == inspect.Parameter.VAR_POSITIONAL else {0: dim}
    return shapes
