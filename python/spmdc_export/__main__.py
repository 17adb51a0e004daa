"""python -m spmdc_export: export a model (or one train step) for spmdc.

    python -m spmdc_export mypkg.models:make_model --example-input 'randint(0,256,(2,32))' -o out/
    python -m spmdc_export path/to/file.py:make_model --example-input 'randn(32,64)' -o out/
    python -m spmdc_export mypkg.models:make_model --example-input 'randn(32,64)' \\
        --train --loss mse --target 'randn(32,64)' -o out/
    python -m spmdc_export --hf llama --layers 2 --hidden 64 [--train] -o out/
    python -m spmdc_export --hf llama --train --mixed-precision bf16 [--reduce-dtype float32] -o out/
    python -m spmdc_export --hf path/to/checkpoint-folder [--dtype bfloat16] [--expected] -o out/
    python -m spmdc_export --hf mixtral --train [--moe dense] -o out/

The factory is imported and called with no arguments; it returns an
nn.Module (or a (module, example_inputs) pair, used when no --example-input
is given). Example inputs are expressions over randint, randn, rand, ones,
zeros, full and arange (and dtypes such as float64 or int32), evaluated
with nothing else in scope. What the export changes is printed as a note:
tied parameters untied for --train, transformers' MoE experts set to their
ATen path, transformers 4.x MoE blocks' experts stacked into the experts op
(parameters <block>.experts.w1, w2, w3, which expert parallelism places on
an ep axis; --moe dense keeps the per-expert parameters and routes by dense
dispatch), ops registered from Python replaced by their decompositions (one
with none is an error). Errors are one line; the exit code is then 2.

--hf PATH exports a local Hugging Face checkpoint folder (config.json and
model.safetensors, or model.safetensors.index.json and its shards) by
reference: the weights are never read. model.pt2 holds the parameters on
the meta device (0-byte payloads) and the member extra/spmdc_weights.json
says which file and tensor of the folder holds each (hfref.py); its
non-persistent buffers (rotary inv_freq) are real. No expected.safetensors
is written unless --expected loads the checkpoint (from_pretrained) to
compute it.
"""
import argparse
import ast
import importlib
import importlib.util
import json
import os
import sys
import traceback

PROG = "python -m spmdc_export"
FUNCS = ("randint", "randn", "rand", "ones", "zeros", "full", "arange")
DTYPES = ("float16", "bfloat16", "float32", "float64", "float", "double", "half", "int8", "int16", "int32",
          "int64", "long", "int", "uint8", "bool")
MP_DTYPES = ("bf16", "bfloat16", "fp16", "float16", "fp32", "float32")  # precision.NAMES, without torch
_NODES = (ast.Expression, ast.Call, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.keyword,
          ast.UnaryOp, ast.USub, ast.UAdd, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div)


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        raise UsageError(f"{message} (see {PROG} --help)")


def fail(msg):
    print(f"spmdc_export: error: {msg}", file=sys.stderr, flush=True)
    return 2


def example_input(text):
    """Evaluates an --example-input expression with only torch's factories in scope."""
    import torch
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise UsageError(f"example input '{text}': not an expression ({e.msg}); e.g. 'randn(32, 64)'") from None
    allowed = set(FUNCS) | set(DTYPES)
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise UsageError(f"example input '{text}': {type(node).__name__} is not allowed; use calls of "
                             f"{', '.join(FUNCS)} on numbers and tuples")
        if isinstance(node, ast.Name) and node.id not in allowed:
            raise UsageError(f"example input '{text}': unknown name '{node.id}'; use {', '.join(FUNCS)} "
                             f"(and dtypes such as float64, int32)")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            raise UsageError(f"example input '{text}': only numbers are allowed as constants")
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Name):
            raise UsageError(f"example input '{text}': call {', '.join(FUNCS)} by name")
    scope = {"__builtins__": {}}
    scope.update({f: getattr(torch, f) for f in FUNCS})
    scope.update({d: getattr(torch, d) for d in DTYPES})
    try:
        value = eval(compile(tree, "<example-input>", "eval"), scope)  # noqa: S307  (names checked above)
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"example input '{text}': {type(e).__name__}: {str(e).strip().splitlines()[0]}") from None
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"example input '{text}' is a {type(value).__name__}, not a tensor")
    return value


def load_factory(spec):
    """module.path:function or path/to/file.py:function -> the function."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise UsageError(f"factory '{spec}': write it as package.module:function or path/to/file.py:function")
    if mod_name.endswith(".py") or os.sep in mod_name:
        if not os.path.isfile(mod_name):
            raise UsageError(f"factory '{spec}': no file {mod_name}")
        name = os.path.splitext(os.path.basename(mod_name))[0]
        sys.path.insert(0, os.path.dirname(os.path.abspath(mod_name)))
        loader_spec = importlib.util.spec_from_file_location(name, mod_name)
        module = importlib.util.module_from_spec(loader_spec)
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"factory '{spec}': importing {mod_name} raised {type(e).__name__}: "
                             f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise UsageError(f"factory '{spec}': cannot import module '{mod_name}' ({e}); check the name "
                             f"and that its package is on PYTHONPATH") from None
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"factory '{spec}': importing {mod_name} raised {type(e).__name__}: "
                             f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    fn = getattr(module, fn_name, None)
    if fn is None:
        raise UsageError(f"factory '{spec}': module '{mod_name}' has no '{fn_name}'")
    if not callable(fn):
        raise UsageError(f"factory '{spec}': '{fn_name}' is not callable")
    return fn


def loss_function(name):
    import torch.nn.functional as F
    if name == "mse":
        return F.mse_loss
    if name == "cross_entropy":
        return lambda out, target: F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    raise UsageError(f"unknown --loss '{name}': mse or cross_entropy")


def describe(path):
    from safetensors import safe_open
    parts = []
    with safe_open(path, framework="pt") as f:
        for k in f.keys():
            t = f.get_slice(k)
            parts.append(f"{k} {str(t.get_dtype()).lower()}{list(t.get_shape())}")
    return ", ".join(parts[:6]) + (f", ... ({len(parts)} tensors)" if len(parts) > 6 else "")


def parse(argv):
    ap = Parser(prog=PROG, description=__doc__.strip(),
                epilog="Then: spmdc compile OUT/model.pt2 --schema dp --mesh 2 -o x.spmd && "
                       "spmd-run -n 2 x.spmd --inputs OUT/inputs.safetensors --output out.safetensors",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("factory", nargs="?", help="package.module:function (or file.py:function) returning the model")
    ap.add_argument("-o", "--out", help="output folder (created)")
    ap.add_argument("--example-input", action="append", default=[], metavar="EXPR",
                    help="one model input, e.g. 'randint(0,256,(2,32))'; repeat for each input, in order")
    ap.add_argument("--train", action="store_true",
                    help="export one train step (joint forward+backward: loss and gradients); parameters that "
                         "share a tensor (tied embeddings) get one copy per name")
    ap.add_argument("--torch-joint", action="store_true",
                    help="with --train: trace the joint graph by torch.export and _export_forward_backward, "
                         "about 2x slower, instead of in one pass (see python/spmdc_export/joint.py)")
    ap.add_argument("--loss", choices=("mse", "cross_entropy"),
                    help="with --train: the loss of the model's output and the --target inputs "
                         "(default: the model's forward returns the loss)")
    ap.add_argument("--mixed-precision", metavar="DTYPE",
                    help="with --train: FSDP2's MixedPrecisionPolicy: float32 master parameters cast to DTYPE "
                         "(bf16 or fp16) before use, gradients reduced in --reduce-dtype and cast back to "
                         "float32 for the optimizer (python/spmdc_export/precision.py)")
    ap.add_argument("--reduce-dtype", metavar="DTYPE",
                    help="with --mixed-precision: the gradients' reduction dtype (default float32)")
    ap.add_argument("--attention", choices=("fused", "math"),
                    help="with --train: how F.scaled_dot_product_attention enters the step: 'math' (default) "
                         "traces matmul, softmax, matmul, saving the [batch, heads, seq, seq] probabilities; "
                         "'fused' keeps the fused CPU kernel and its backward, saving the output and log-sum-exp "
                         "as eager does (about 10x less activation memory at sequence 2048; CPU only: the op "
                         "has no CUDA kernel). See docs/DECISIONS.md")
    ap.add_argument("--target", action="append", default=[], metavar="EXPR",
                    help="with --loss: a target tensor, as --example-input")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="inference: export dim 0 of every input as one dynamic batch size")
    ap.add_argument("--no-decompose", action="store_true",
                    help="inference: keep the training IR (no run_decompositions())")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before building (default 0)")
    ap.add_argument("--moe", choices=("experts", "dense"), default="experts",
                    help="transformers 4.x MoE blocks (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3): 'experts' "
                         "(default) stacks each block's experts into the experts op, parameters "
                         "<block>.experts.w1, w2, w3 [E, ...] that expert parallelism shards over an ep axis "
                         "(docs/EXPERT_PARALLEL.md); 'dense' keeps the per-expert parameters and runs every expert "
                         "on every token (no ep); a checkpoint folder (--hf PATH) is always 'dense'")
    hf = ap.add_argument_group("Hugging Face models (nothing downloaded; needs transformers)")
    hf.add_argument("--hf", metavar="NAME|PATH",
                    help="NAME: a small model with random weights (llama, mistral, qwen2, the MoE mixtral, qwen2_moe, "
                         "qwen3_moe, olmoe, deepseek_v3, gpt2, bert); PATH: a "
                         "local checkpoint folder (config.json and model.safetensors or "
                         "model.safetensors.index.json), exported by reference: parameters on meta in model.pt2, "
                         "their file and tensor in its extra/spmdc_weights.json, the weights never read")
    hf.add_argument("--layers", type=int, help="with --hf NAME (default 2)")
    hf.add_argument("--hidden", type=int, help="with --hf NAME (default 64)")
    hf.add_argument("--heads", type=int, help="with --hf NAME: attention heads (default hidden/16)")
    hf.add_argument("--vocab", type=int, help="with --hf NAME (default 256)")
    hf.add_argument("--batch", type=int, default=2)
    hf.add_argument("--seq", type=int, default=16)
    hf.add_argument("--dtype", choices=("bfloat16", "float16", "float32"),
                    help="with --hf PATH: the model's dtype (default: the one the checkpoint stores)")
    hf.add_argument("--expected", action="store_true",
                    help="with --hf PATH: load the weights (from_pretrained) and write expected.safetensors "
                         "(without it none is written)")
    ap.add_argument("--verbose", action="store_true", help="print the traceback of a failed export")
    a = ap.parse_args(argv)
    if not a.out:
        ap.error("name the output folder with -o OUT")
    if bool(a.factory) == bool(a.hf):
        ap.error("give a factory (package.module:function) or --hf NAME" if not a.factory else
                 "give a factory or --hf NAME, not both")
    if a.hf and (a.example_input or a.target or a.loss):
        ap.error("--hf models make their own inputs and loss; leave out --example-input, --target and --loss")
    if (a.loss or a.torch_joint or a.attention) and not a.train:
        ap.error("--loss, --torch-joint and --attention are for --train")
    if (a.mixed_precision or a.reduce_dtype) and not a.train:
        ap.error("--mixed-precision and --reduce-dtype are for --train")
    if a.reduce_dtype and not a.mixed_precision:
        ap.error("--reduce-dtype needs --mixed-precision")
    for flag, v, ok in (("--mixed-precision", a.mixed_precision, MP_DTYPES[:4]), ("--reduce-dtype", a.reduce_dtype,
                                                                                 MP_DTYPES)):
        if v and v not in ok:
            ap.error(f"{flag} {v}: not one of {', '.join(ok)}")
    if a.mixed_precision and a.torch_joint:
        ap.error("--mixed-precision: the step is traced in one pass only; leave out --torch-joint")
    if a.target and not a.loss:
        ap.error("--target needs --loss")
    if a.train and (a.dynamic_batch or a.no_decompose):
        ap.error("--dynamic-batch and --no-decompose are for inference exports, not --train")
    _check_hf(ap, a)
    return a


def _check_hf(ap, a):
    """The --hf NAME / --hf PATH flags; a.ref: whether --hf names a checkpoint folder."""
    a.ref = bool(a.hf) and os.path.isdir(a.hf)
    if a.ref:
        given = [f"--{k}" for k in ("layers", "hidden", "heads", "vocab") if getattr(a, k) is not None]
        if given:
            ap.error(f"{', '.join(given)} shape a random --hf NAME model; a checkpoint folder has its own config")
        if a.torch_joint:
            ap.error("--torch-joint: a checkpoint folder's train step is traced in one pass only")
        if a.mixed_precision and a.dtype not in (None, "float32"):
            ap.error(f"--mixed-precision: the master parameters are float32; leave out --dtype {a.dtype}")
        if a.mixed_precision:
            a.dtype = "float32"  # the masters; the checkpoint's bf16 tensors convert as they load
        return
    if a.hf and (os.sep in a.hf or "/" in a.hf or a.hf.startswith(".")):
        ap.error(f"--hf {a.hf}: {'a file, not a folder' if os.path.exists(a.hf) else 'no such folder'} "
                 f"(a checkpoint folder holds config.json and model.safetensors)")
    if a.dtype or a.expected:
        ap.error("--dtype and --expected are for --hf PATH (a checkpoint folder)")
    for k, v in (("layers", 2), ("hidden", 64), ("vocab", 256)):
        if getattr(a, k) is None:
            setattr(a, k, v)


def build_hf(a, attn=None):
    """(module, inputs, targets, loss_fn) of --hf NAME or --hf PATH (then
    a.checkpoint and a.model_dtype are set too)."""
    import torch
    torch.manual_seed(a.seed)
    if a.ref:
        from . import hfref
        m = hfref.build(a.hf, dtype=a.dtype, batch=a.batch, seq=a.seq, train=a.train, attn=attn)
        a.checkpoint, a.model_dtype = m.checkpoint, m.dtype
    else:
        from . import hf
        m = hf.build(a.hf, layers=a.layers, hidden=a.hidden, heads=a.heads, vocab=a.vocab, batch=a.batch,
                     seq=a.seq, train=a.train, attn=attn)
    return m.module, m.inputs, m.targets, m.loss_fn


def build(a):
    """(module, inputs, targets, loss_fn) from the factory or --hf."""
    import torch
    if a.hf:
        return build_hf(a)
    fn = load_factory(a.factory)
    torch.manual_seed(a.seed)
    try:
        made = fn()
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"factory '{a.factory}' raised {type(e).__name__}: "
                         f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    inputs = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, inputs = made
        inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    if not isinstance(made, torch.nn.Module):
        raise UsageError(f"factory '{a.factory}' returned a {type(made).__name__}, not a torch.nn.Module")
    if a.example_input:
        inputs = tuple(example_input(e) for e in a.example_input)
    if not inputs:
        raise UsageError("give the model's inputs with --example-input EXPR (once per input), "
                         "e.g. --example-input 'randn(32, 64)'")
    targets = tuple(example_input(e) for e in a.target)
    return made, inputs, targets, loss_function(a.loss) if a.loss else None


def note(msg):
    """Prints one of the export's notes (what it changed, and why)."""
    print(f"note: {msg}", flush=True)


def dynamic_batch(module, inputs):
    """dynamic_shapes with one dynamic batch size as dim 0 of every input."""
    import torch
    from . import fixups
    for i, t in enumerate(inputs):
        if t.dim() == 0:
            raise UsageError(f"--dynamic-batch: input {i} is a scalar, it has no batch dim")
    try:
        return fixups.batch_dynamic_shapes(module, inputs, torch.export.Dim("batch", min=2, max=1 << 20))
    except TypeError as e:
        raise UsageError(f"--dynamic-batch: the model's forward does not take {len(inputs)} positional "
                         f"inputs ({e})") from None


def export_ref(a, module, inputs, targets, loss_fn):
    """--hf PATH: exports the checkpoint by reference (hfref.py)."""
    from . import hfref, moe
    if a.moe == "experts" and any(moe._replacement(m) is not None for m in module.modules()):
        note("MoE experts of a checkpoint exported by reference are not stacked into the experts op (the "
             "archive reads each expert's own tensors from the checkpoint): they are routed by dense dispatch, "
             "without expert parallelism")
    attn = getattr(getattr(module, "config", None), "_attn_implementation", None)
    if a.train:
        policy = mixed_policy(a)
        expected = hfref.expected_train_step(a.checkpoint.root, a.model_dtype, inputs, targets, loss_fn, attn,
                                             policy) if a.expected else None
        return hfref.export_train_step(module, inputs, a.out, a.checkpoint, loss_fn, targets, log=note,
                                       attention=a.attention,
                                       expected=expected, precision=policy)
    expected = hfref.expected_outputs(a.checkpoint.root, a.model_dtype, inputs, attn) if a.expected else None
    dynamic = dynamic_batch(module, inputs) if a.dynamic_batch else None
    return hfref.export(module, inputs, a.out, a.checkpoint, dynamic_shapes=dynamic, decompose=not a.no_decompose,
                        log=note, expected=expected)


def mixed_policy(a):
    """The precision.Policy of --mixed-precision / --reduce-dtype, or None."""
    if not a.mixed_precision:
        return None
    from . import precision
    try:
        return precision.policy(a.mixed_precision, a.reduce_dtype or "float32")
    except ValueError as e:
        raise UsageError(str(e)) from None


def export(a, module, inputs, targets, loss_fn):
    """Exports the inference program or the train step as the flags say."""
    from . import core
    if a.ref:
        return export_ref(a, module, inputs, targets, loss_fn)
    strict = False if a.hf else None  # transformers models trace best without dynamo (torch 2.6's default is strict)
    if a.train:
        return core.export_train_step(module, inputs, a.out, loss_fn=loss_fn, targets=targets, strict=strict,
                                      untie=True, log=note, fast=not a.torch_joint, precision=mixed_policy(a),
                                      moe=a.moe, attention=a.attention)
    dynamic = dynamic_batch(module, inputs) if a.dynamic_batch else None
    return core.export(module, inputs, a.out, dynamic_shapes=dynamic, decompose=not a.no_decompose, strict=strict,
                       log=note, moe=a.moe)


def one_line(e):
    lines = [x.strip() for x in str(e).strip().splitlines() if x.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:400]


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        return fail(e)
    try:
        from . import core
    except ImportError as e:
        return fail(f"spmdc_export needs torch and safetensors ({e}): pip install torch safetensors")
    try:
        core.check_torch()
        module, inputs, targets, loss_fn = build(a)
        try:
            program = export(a, module, inputs, targets, loss_fn)
        except Exception as e:  # noqa: BLE001
            # transformers' sdpa attention may not export on an older torch; its eager attention does.
            cfg = getattr(module, "config", None)
            if not a.hf or isinstance(e, (UsageError, core.ExportError)) or \
                    getattr(cfg, "_attn_implementation", "eager") == "eager":
                raise
            program = export(a, *build_hf(a, attn="eager"))
    except (UsageError, core.ExportError) as e:
        return fail(e)
    except Exception as e:  # noqa: BLE001
        if a.verbose:
            traceback.print_exc()
        import torch
        return fail(f"export failed (torch {torch.__version__}): {one_line(e)}"
                    + ("" if a.verbose else " (--verbose prints the traceback)"))
    nodes = sum(1 for _ in program.graph.nodes)
    out = a.out
    print(f"wrote {os.path.join(out, 'model.pt2')} ({'train step' if a.train else 'inference'}, {nodes} nodes)")
    print(f"  inputs.safetensors:   {describe(os.path.join(out, 'inputs.safetensors'))}")
    if os.path.exists(os.path.join(out, "expected.safetensors")):
        print(f"  expected.safetensors: {describe(os.path.join(out, 'expected.safetensors'))}")
    else:
        print("  expected.safetensors: not written (the weights are by reference; --expected loads them to "
              "compute it)")
    if a.ref:
        with open(os.path.join(out, "meta.json")) as f:
            n = json.load(f)["weights"]["tensors"]
        print(f"  weights: by reference to {a.checkpoint.root} ({str(a.model_dtype).replace('torch.', '')}): "
              f"{n} tensors on meta, listed in model.pt2's extra/spmdc_weights.json")
    if os.path.exists(os.path.join(out, "tp_plan.json")):
        print(f"  tp_plan.json: spmdc schema from-hf {os.path.join(out, 'tp_plan.json')} --mesh 2 "
              f"--model {os.path.join(out, 'model.pt2')} -o s.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
