#!/usr/bin/env python3
"""PyTorch's OpInfo database through spmdc, as DTensor's op tests use it.

For each OpInfo of torch.testing._internal.common_methods_invocations.op_db
(filtered by --ops, --limit, --shard), its CPU samples at --dtype are taken
in order; a sample whose tensors are all dense strided tensors is wrapped in
an nn.Module whose forward takes those tensors (every other argument baked
in) and calls op(sample.input, *sample.args, **sample.kwargs); the module is
exported with spmdc_export's core.export (model.pt2, inputs.safetensors,
expected.safetensors holding eager's outputs). Samples torch.export (or
eager, or safetensors) rejects are counted as "not exportable": not spmdc's
failure. Ops whose outputs change with the random seed, or are uninitialized
memory (empty*), are skipped.

Each exported sample is compiled at mesh 2 under each layout:

  dp    spmdc's dp preset: every user input's dim 0 sharded
  last  the first input's last dim sharded, S(-1), every other input replicated

and run with `spmd-run -n 2 p.spmd --inputs ... --verify-against ...`.
OpInfo's samples mostly have size-5 dims, so many shards are uneven
(torch.chunk sizes 3 and 2): each row records whether a sharded dim was.

Classes: match; refused (spmdc exit 2, with its one-line reason);
n/a (the layout shards nothing: no input with a dim to shard); and the BAD
ones: run_fail (compiled, then spmd-run failed), wrong (--verify-against
ABOVE TOLERANCE), crash (spmdc died by a signal or exited other than 0 or 2),
timeout (spmdc or spmd-run ran past --timeout). The exit code is 1 when any
case is BAD, 0 otherwise.

  python scripts/opinfo_sweep.py --quick                 # ctest opinfo_quick's subset
  python scripts/opinfo_sweep.py --json out.json          # every OpInfo, first sample each
  python scripts/opinfo_sweep.py --json out.json --resume # the same, continuing a stopped run
  python scripts/opinfo_sweep.py --ops squeeze --samples 0 --layouts dp --keep-bad /tmp/bad
"""

import argparse
import collections
import json
import multiprocessing as mp
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

LAYOUTS = ("dp", "last")
BAD = ("run_fail", "wrong", "crash", "timeout")
CLASSES = ("match", "refused", "n/a") + BAD + ("not_exportable", "skipped", "harness")

# ctest opinfo_quick: common ops of real models, first sample each, dp and last.
QUICK_OPS = [
    "add", "sub", "mul", "div.no_rounding_mode", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "pow",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "softmax", "log_softmax",
    "sum", "mean", "amax", "mm", "bmm", "matmul", "nn.functional.linear", "addmm",
    "cat", "transpose", "permute", "reshape", "unsqueeze", "where", "clamp", "nn.functional.layer_norm",
    "nn.functional.embedding", "cumsum",
]

# Ops whose output is uninitialized memory: never comparable.
UNINITIALIZED = re.compile(r"^(empty|new_empty|empty_like|empty_strided|new_empty_strided|empty_permuted)\b")


# ----------------------------------------------------------------- OpInfo database (parent and workers)


def load_op_db():
    """op_db, importable without expecttest (a test-only package torch's
    common_utils imports; its TestCase is not used here)."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    import warnings
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_name(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def select_ops(op_db, args):
    import torch
    dtype = getattr(torch, args.dtype)
    wanted = None
    if args.quick:
        wanted = set(QUICK_OPS)
    if args.ops:
        wanted = set(x.strip() for x in args.ops.split(",") if x.strip())
    picked = []
    for i, op in enumerate(op_db):
        if wanted is not None and op_name(op) not in wanted and (args.quick or op.name not in wanted):
            continue
        picked.append(i)
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        picked = [i for j, i in enumerate(picked) if j % n == k]
    if args.limit:
        picked = picked[:args.limit]
    out, unsupported = [], []
    for i in picked:
        try:
            ok = dtype in op_db[i].supported_dtypes("cpu")
        except Exception:  # noqa: BLE001
            ok = True
        (out if ok else unsupported).append(i)
    return out, unsupported


# ----------------------------------------------------------------- one OpInfo (in a worker process)


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("timed out")


def one_line(e):
    s = [x.strip() for x in str(e).strip().splitlines() if x.strip()]
    return f"{type(e).__name__}: {s[0] if s else ''}"[:240]


def _flatten(sample):
    from torch.utils._pytree import tree_flatten
    return tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))


def _dense(t):
    import torch
    return (type(t) in (torch.Tensor, torch.nn.Parameter) and t.layout == torch.strided
            and not t.is_nested and not t.is_quantized and t.device.type == "cpu")


def make_module(op, sample):
    """(module, tensor inputs): forward(*tensors) calls op with the sample's
    arguments, its tensors replaced by the forward's."""
    import torch
    from torch.utils._pytree import tree_unflatten
    leaves, spec = _flatten(sample)
    where = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    fixed = [None if isinstance(x, torch.Tensor) else x for x in leaves]
    fn = op.op

    class OpModule(torch.nn.Module):
        def forward(self, *tensors):
            vals = list(fixed)
            for i, t in zip(where, tensors):
                vals[i] = t
            inp, a, kw = tree_unflatten(vals, spec)
            out = fn(inp, *a, **kw)
            # torch.return_types (sort, topk, max.dim, ...) as a plain tuple:
            # torch.export.save cannot serialize them as outputs.
            return tuple(out) if isinstance(out, tuple) else out

    return OpModule(), tuple(leaves[i] for i in where)


def _same(a, b):
    import torch
    from torch.utils._pytree import tree_leaves
    la, lb = tree_leaves(a), tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            if x != y and not (x != x and y != y):
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            eq = (x == y) | (x.isnan() & y.isnan())
            if not bool(eq.all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def deterministic(module, inputs):
    """False when the module's outputs change with the random seed."""
    import torch
    with torch.no_grad():
        torch.manual_seed(0)
        a = module(*inputs)
        torch.manual_seed(1)
        b = module(*inputs)
    return _same(a, b)


def describe(inputs, sample):
    """Tensor shapes and the baked-in arguments, one line."""
    import torch
    from torch.utils._pytree import tree_map
    shapes = ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in inputs)

    def show(x):
        return "T" if isinstance(x, torch.Tensor) else x
    rest = tree_map(show, (tuple(sample.args), dict(sample.kwargs)))
    a = ", ".join([repr(x) for x in rest[0]] + [f"{k}={v!r}" for k, v in rest[1].items()])
    return shapes, a[:200]


def check_program(ep, inputs, case_dir, dtype):
    """None when PyTorch's own run of the exported program matches eager's
    outputs (expected.safetensors); else why not. A program torch.export got
    wrong (a decomposition that differs from the eager kernel) is torch's
    limitation, not spmdc's."""
    import torch
    from safetensors.torch import load_file
    from torch.utils._pytree import tree_leaves
    want = load_file(os.path.join(case_dir, "expected.safetensors"))
    with torch.no_grad():
        got = [x for x in tree_leaves(ep.module()(*inputs)) if isinstance(x, torch.Tensor)]
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    if len(got) != len(want):
        return f"PyTorch's own run of the exported program gives {len(got)} outputs, eager {len(want)}"
    for i, g in enumerate(got):
        w = want[f"output.{i}"]
        if tuple(g.shape) != tuple(w.shape):
            return (f"PyTorch's own run of the exported program differs from eager: output.{i} has shape "
                    f"{list(g.shape)}, eager {list(w.shape)}")
        try:
            torch.testing.assert_close(g, w, equal_nan=True, check_dtype=False, check_stride=False, **(
                tol if g.is_floating_point() else dict(rtol=0, atol=0)))
        except AssertionError as e:
            return f"PyTorch's own run of the exported program differs from eager: output.{i}: " + one_line(e)
    return None


def schema_for(layout, inputs, case_dir):
    """(--schema argument, uneven, sharded description) or None when the layout shards nothing."""
    if layout == "dp":
        dims = [t.shape[0] for t in inputs if t.dim() >= 1]
        if not dims:
            return None
        return "dp", any(d % 2 for d in dims), "dim 0 of " + ",".join(str(d) for d in dims)
    if layout == "last":
        if not inputs or inputs[0].dim() < 1:
            return None
        path = os.path.join(case_dir, "last.json")
        with open(path, "w") as f:
            json.dump({"version": 1, "inputs": [{"match": "input.0", "placements": {"x": "S(-1)"}}]}, f)
        d = inputs[0].shape[-1]
        return path, bool(d % 2), f"input.0 dim -1 of {d}"
    raise ValueError(layout)


def sh(cmd, timeout):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for attempt in range(10):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s")
        except OSError:  # ENOENT, EACCES, ETXTBSY while the tool is being relinked: wait for it
            if attempt == 9:
                raise
            time.sleep(15)


def reason(r, case_dir):
    """The one-line reason of a failed spmdc or spmd-run (its error line, paths removed)."""
    errs = [x.strip() for x in (r.stderr or "").splitlines() if x.strip()]
    outs = [x.strip() for x in (r.stdout or "").splitlines() if x.strip()]
    bad = [x for x in errs + outs if "ABOVE TOLERANCE" in x or x.startswith("verify:")]
    err = [x for x in errs if x.startswith("error:") or " error: " in x or x.startswith("rank ")]
    last = errs[-1] if errs else outs[-1] if outs else f"exit {r.returncode}"
    line = bad[0] if bad else err[0] if err else last
    line = line.replace(case_dir + "/", "").replace(case_dir, "")
    line = re.sub(r"^error:\s*", "", line)
    line = re.sub(r"^(model\.pt2|p\.spmd|last\.json):\s*", "", line)
    return line[:300]


NAN_PROBLEM = "has non-finite values (nan or inf) where the reference differs"


def nan_match(got_path, case_dir):
    """True when spmd-run's outputs equal eager's with NaN at the same places
    (torch.testing.assert_close with equal_nan, f32/bf16 tolerances as
    --verify-against's): spmd-run's --verify-against counts NaN as differing
    from NaN, as assert_close does by default; PyTorch's own OpInfo tests
    (TestCase.assertEqual, DTensor's included) take NaN as equal to NaN."""
    import torch
    from safetensors.torch import load_file
    try:
        got, want = load_file(got_path), load_file(os.path.join(case_dir, "expected.safetensors"))
    except Exception:  # noqa: BLE001 - no outputs written: not a match
        return False
    if set(got) != set(want):
        return False
    for k, w in want.items():
        try:
            torch.testing.assert_close(got[k], w, equal_nan=True, check_stride=False)
        except AssertionError:
            return False
    return True


def run_case(tools, case_dir, layout, inputs, timeout, flags):
    """One layout of one exported sample: (class, message, uneven, sharded, seconds)."""
    sch = schema_for(layout, inputs, case_dir)
    if sch is None:
        return "n/a", "no input with a dim to shard", False, "", 0.0
    schema, uneven, sharded = sch
    prog = os.path.join(case_dir, f"{layout}.spmd")
    t0 = time.time()
    c = sh([tools.spmdc, "compile", os.path.join(case_dir, "model.pt2"), "--mesh", "2", "--schema", schema,
            "-o", prog, "--quiet"] + flags, timeout)
    if c.returncode == 124:
        return "timeout", "spmdc compile: " + c.stderr, uneven, sharded, time.time() - t0
    if c.returncode == 2:
        return "refused", reason(c, case_dir), uneven, sharded, time.time() - t0
    if c.returncode != 0:
        sig = f"signal {-c.returncode}" if c.returncode < 0 else f"exit {c.returncode}"
        return "crash", f"spmdc {sig}: {reason(c, case_dir)}", uneven, sharded, time.time() - t0
    got = os.path.join(case_dir, f"{layout}.out.safetensors")
    cmd = [tools.spmd_run, "-n", "2", prog, "--inputs", os.path.join(case_dir, "inputs.safetensors"),
           "-o", got, "--verify-against", os.path.join(case_dir, "expected.safetensors"),
           "--timeout", str(timeout // 2)]
    retried = ""
    for attempt in range(2):
        r = sh(cmd, timeout)
        text = (r.stderr or "") + (r.stdout or "")
        # A rendezvous collision or a Gloo mesh set-up that a concurrent launch
        # crossed is the launcher's, not the program's: once more, noted.
        m = re.search(r"EADDRINUSE|Address already in use|cannot set up the process groups", text)
        if r.returncode != 0 and attempt == 0 and m:
            retried = f" (first try: {m.group(0)}; retried)"
            continue
        break
    dt = time.time() - t0
    if r.returncode == 0:
        return "match", retried.strip(" ()"), uneven, sharded, dt
    if r.returncode == 124:
        return "timeout", "spmd-run: " + r.stderr, uneven, sharded, dt
    if NAN_PROBLEM in text and nan_match(got, case_dir):
        return "match", "NaN where eager has NaN (equal_nan)" + retried, uneven, sharded, dt
    if "ABOVE TOLERANCE" in text:
        return "wrong", reason(r, case_dir) + retried, uneven, sharded, dt
    sig = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
    return "run_fail", f"spmd-run {sig}: {reason(r, case_dir)}{retried}", uneven, sharded, dt


def process_op(op_db, idx, args, tools):
    """Every row of one OpInfo."""
    import torch
    from spmdc_export import core
    op = op_db[idx]
    name = op_name(op)
    dtype = getattr(torch, args.dtype)
    rows = []
    base = dict(op=name, dtype=args.dtype)
    if UNINITIALIZED.match(op.name):
        return [dict(base, sample=-1, layout="-", cls="skipped", msg="output is uninitialized memory")]
    flags = ["--replicate-unknown"] if args.replicate_unknown else []
    exported = tried = 0
    signal.signal(signal.SIGALRM, _alarm)
    it = None
    try:
        signal.alarm(args.timeout)
        it = iter(op.sample_inputs("cpu", dtype, requires_grad=False))
        signal.alarm(0)
    except Exception as e:  # noqa: BLE001
        signal.alarm(0)
        return [dict(base, sample=-1, layout="-", cls="harness", msg="sample_inputs: " + one_line(e))]
    sidx = -1
    while True:
        if args.samples and (exported >= args.samples or tried >= args.samples + 2):
            break
        try:
            signal.alarm(args.timeout)
            sample = next(it)
            signal.alarm(0)
        except StopIteration:
            signal.alarm(0)
            break
        except Exception as e:  # noqa: BLE001
            signal.alarm(0)
            rows.append(dict(base, sample=sidx + 1, layout="-", cls="harness", msg="sample_inputs: " + one_line(e)))
            break
        sidx += 1
        if args.sample is not None and sidx != args.sample:
            continue
        leaves, _ = _flatten(sample)
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        if not all(_dense(t) for t in tensors):
            rows.append(dict(base, sample=sidx, layout="-", cls="skipped", msg="a tensor argument is not dense strided"))
            continue
        if any(t.is_complex() for t in tensors):
            rows.append(dict(base, sample=sidx, layout="-", cls="skipped", msg="complex input"))
            continue
        if args.samples and args.sample is None and tensors and all(t.dim() == 0 for t in tensors):
            rows.append(dict(base, sample=sidx, layout="-", cls="skipped", msg="only 0-dim tensors (--samples 0 takes them)"))
            continue
        tried += 1
        module, inputs = make_module(op, sample)
        shapes, rest = describe(inputs, sample)
        row0 = dict(base, sample=sidx, inputs=shapes, args=rest)
        case_dir = tempfile.mkdtemp(prefix=f"{re.sub(r'[^A-Za-z0-9_.]', '_', name)}.{sidx}.", dir=args.workdir)
        try:
            signal.alarm(args.timeout)
            if not deterministic(module, inputs):
                signal.alarm(0)
                rows.append(dict(row0, layout="-", cls="skipped", msg="random: outputs change with the seed"))
                continue
            t0 = time.time()
            ep = core.export(module, inputs, case_dir)
            export_s = time.time() - t0
            torch_own = check_program(ep, inputs, case_dir, dtype)
            signal.alarm(0)
            seeded = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"
                             and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())})
            if seeded:  # OpInfo's wrapper_set_seed reseeds eager; the program has no seed to match
                rows.append(dict(row0, layout="-", cls="skipped", msg="random: " + ", ".join(seeded)))
                shutil.rmtree(case_dir, ignore_errors=True)
                continue
            if torch_own:
                rows.append(dict(row0, layout="-", cls="not_exportable", msg=torch_own))
                shutil.rmtree(case_dir, ignore_errors=True)
                continue
        except BaseException as e:  # noqa: BLE001 (torch.export raises many kinds; Timeout too)
            signal.alarm(0)
            if isinstance(e, KeyboardInterrupt):
                raise
            rows.append(dict(row0, layout="-", cls="not_exportable", msg=one_line(e)))
            shutil.rmtree(case_dir, ignore_errors=True)
            continue
        exported += 1
        keep = False
        for layout in args.layouts:
            cls, msg, uneven, sharded, secs = run_case(tools, case_dir, layout, inputs, args.timeout, flags)
            rows.append(dict(row0, layout=layout, cls=cls, msg=msg, uneven=uneven, sharded=sharded,
                             secs=round(secs, 2), export_s=round(export_s, 2)))
            keep = keep or cls in BAD
        if keep and args.keep_bad:
            dst = os.path.join(args.keep_bad, os.path.basename(case_dir))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(case_dir, dst)
            for r in rows[-len(args.layouts):]:
                r["kept"] = dst
        shutil.rmtree(case_dir, ignore_errors=True)
    if not rows:
        rows.append(dict(base, sample=-1, layout="-", cls="skipped", msg="no samples"))
    return rows


def worker(op_db, args, tools, tasks, results, wid):
    import torch
    torch.set_num_threads(1)
    while True:
        try:
            idx = tasks.get_nowait()
        except queue.Empty:
            results.put(("exit", wid, None, None))
            return
        results.put(("start", wid, idx, time.time()))
        try:
            rows = process_op(op_db, idx, args, tools)
        except BaseException as e:  # noqa: BLE001
            rows = [dict(op=op_name(op_db[idx]), dtype=args.dtype, sample=-1, layout="-", cls="harness",
                         msg="sweep: " + one_line(e))]
        results.put(("rows", wid, idx, rows))


# ----------------------------------------------------------------- the pool (parent)


def run_pool(op_db, indices, args, tools, progress):
    """Rows of every OpInfo in `indices`, --jobs worker processes (forked
    after op_db's import). A worker that dies (a crash inside eager PyTorch
    or torch.export) or overruns --op-timeout costs one harness row and is
    replaced."""
    ctx = mp.get_context("fork")
    tasks, results = ctx.Queue(), ctx.Queue()
    for i in indices:
        tasks.put(i)
    time.sleep(0.2)  # let the feeder thread fill the pipe before workers poll it
    procs, current, rows, done = {}, {}, [], 0
    next_wid = [0]

    def spawn():
        wid = next_wid[0]
        next_wid[0] += 1
        p = ctx.Process(target=worker, args=(op_db, args, tools, tasks, results, wid), daemon=True)
        p.start()
        procs[wid] = p

    for _ in range(min(args.jobs, len(indices))):
        spawn()
    while procs:
        try:
            kind, wid, idx, payload = results.get(timeout=2)
        except queue.Empty:
            kind = None
        if kind == "start":
            current[wid] = (idx, payload)
        elif kind == "rows":
            current.pop(wid, None)
            rows.extend(payload)
            done += 1
            progress(done, len(indices), payload)
        elif kind == "exit":
            procs.pop(wid).join()
        for w, p in list(procs.items()):
            cur = current.get(w)
            over = cur is not None and time.time() - cur[1] > args.op_timeout
            if p.is_alive() and not over:
                continue
            if over:
                p.kill()
            p.join()
            procs.pop(w)
            if cur is not None:
                current.pop(w)
                why = f"worker overran {args.op_timeout} s" if over else f"worker died (exit {p.exitcode})"
                r = [dict(op=op_name(op_db[cur[0]]), dtype=args.dtype, sample=-1, layout="-", cls="harness",
                          msg=why + " in eager PyTorch, torch.export or the sweep")]
                rows.extend(r)
                done += 1
                progress(done, len(indices), r)
            if not tasks.empty() or done < len(indices):
                spawn()
    return rows


# ----------------------------------------------------------------- the table


def short(msg):
    """A refusal's reason in brief: "no sharding rule for aten.X, aten.Y" for a missing rule."""
    if msg.startswith("no sharding rule for"):
        ops = sorted(set(re.findall(r"((?:aten|higher_order|prims)\.[A-Za-z0-9_.]+) \(node", msg)))
        return "no sharding rule for " + ", ".join(ops)
    return re.sub(r"^model/models/model\.json: ", "", msg)


def group_key(msg):
    """A refusal's reason with node names and sizes folded, for grouping."""
    m = re.sub(r"%[A-Za-z_][A-Za-z0-9_]*", "%_", short(msg))
    m = re.sub(r"\b\d+\b", "N", m)
    return m[:160]


def repro(r, args):
    return (f"python scripts/opinfo_sweep.py --ops {r['op']} --sample {r['sample']} --layouts {r['layout']}"
            f"{' --dtype ' + args.dtype if args.dtype != 'float32' else ''} --keep-bad /tmp/opinfo-bad")


def summarize(rows, args, n_ops, n_unsupported, elapsed):
    counts = collections.Counter(r["cls"] for r in rows)
    cases = [r for r in rows if r["layout"] != "-"]
    lines = []
    lines.append(f"OpInfos: {n_ops} at {args.dtype} on CPU ({n_unsupported} more without {args.dtype} support); "
                 f"samples exported: {len({(r['op'], r['sample']) for r in cases})}; "
                 f"cases (sample x layout): {len(cases)}; {elapsed / 60:.1f} min")
    lines.append("")
    lines.append("class            cases   (uneven shard)")
    for c in CLASSES:
        if counts.get(c):
            un = sum(1 for r in rows if r["cls"] == c and r.get("uneven"))
            lines.append(f"  {c:<14} {counts[c]:>6}   {'(' + str(un) + ')' if r_has_layout(c) else ''}")
    per = collections.defaultdict(collections.Counter)
    for r in cases:
        per[r["layout"]][r["cls"]] += 1
    lines.append("")
    for lay in args.layouts:
        lines.append(f"  {lay:<6} " + ", ".join(f"{k} {v}" for k, v in sorted(per[lay].items())))
    bad = [r for r in rows if r["cls"] in BAD]
    lines.append("")
    lines.append(f"BAD cases: {len(bad)}")
    for r in sorted(bad, key=lambda r: (r["op"], r["sample"], r["layout"])):
        lines.append(f"  {r['cls']:<9} {r['op']} sample {r['sample']} {r['layout']}"
                     f"{' (uneven)' if r.get('uneven') else ''} inputs {r.get('inputs', '')} args ({r.get('args', '')}): "
                     f"{r['msg']}")
        lines.append(f"            {repro(r, args)}")
    ref = collections.defaultdict(list)
    for r in rows:
        if r["cls"] == "refused":
            ref[group_key(r["msg"])].append(r)
    lines.append("")
    lines.append(f"refusals: {counts.get('refused', 0)} cases, {len(ref)} reasons")
    for k, rs in sorted(ref.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ops = sorted({r["op"] for r in rs})
        lines.append(f"  {len(rs):>4}  {short(rs[0]['msg'])}   [{', '.join(ops[:6])}{' ...' if len(ops) > 6 else ''}]")
    return "\n".join(lines)


def r_has_layout(c):
    return c not in ("not_exportable", "skipped", "harness")


def markdown(rows, args, n_ops, n_unsupported, elapsed, command):
    counts = collections.Counter(r["cls"] for r in rows)
    cases = [r for r in rows if r["layout"] != "-"]
    out = []
    out.append(f"Command: `{command}` ({elapsed / 60:.1f} min, 2 CPU workers, Gloo).")
    out.append("")
    out.append(f"- {n_ops} OpInfos with {args.dtype} on CPU ({n_unsupported} more without it); "
               f"{len({(r['op'], r['sample']) for r in cases})} samples exported, {len(cases)} cases (sample x layout)")
    out.append("")
    out.append("| class | cases | of them uneven shards |")
    out.append("|---|---|---|")
    for c in CLASSES:
        if counts.get(c):
            un = sum(1 for r in rows if r["cls"] == c and r.get("uneven"))
            out.append(f"| {c}{' (BAD)' if c in BAD else ''} | {counts[c]} | {un if r_has_layout(c) else ''} |")
    out.append("")
    per = collections.defaultdict(collections.Counter)
    for r in cases:
        per[r["layout"]][r["cls"]] += 1
    out.append("| layout | " + " | ".join(c for c in CLASSES if r_has_layout(c)) + " |")
    out.append("|---|" + "---|" * sum(1 for c in CLASSES if r_has_layout(c)))
    for lay in args.layouts:
        out.append(f"| {lay} | " + " | ".join(str(per[lay].get(c, 0)) for c in CLASSES if r_has_layout(c)) + " |")
    bad = [r for r in rows if r["cls"] in BAD]
    out.append("")
    out.append("### BAD cases")
    out.append("")
    if not bad:
        out.append("None.")
    else:
        out.append("| class | op | sample | layout | inputs | args | message |")
        out.append("|---|---|---|---|---|---|---|")
        for r in sorted(bad, key=lambda r: (r["op"], r["sample"], r["layout"])):
            out.append(f"| {r['cls']} | {r['op']} | {r['sample']} | {r['layout']}{' (uneven)' if r.get('uneven') else ''} "
                       f"| {md(r.get('inputs', ''))} | {md(r.get('args', ''))} | {md(r['msg'])} |")
        out.append("")
        out.append("Each reproduces with `python scripts/opinfo_sweep.py --ops OP --sample N --layouts LAYOUT "
                   "--keep-bad /tmp/opinfo-bad` (the case's model.pt2, inputs and expected outputs are kept there).")
    ref = collections.defaultdict(list)
    for r in rows:
        if r["cls"] == "refused":
            ref[group_key(r["msg"])].append(r)
    out.append("")
    out.append("### Refusals by reason")
    out.append("")
    out.append("| cases | reason (first case's) | ops |")
    out.append("|---|---|---|")
    for k, rs in sorted(ref.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ops = sorted({r["op"] for r in rs})
        out.append(f"| {len(rs)} | {md(short(rs[0]['msg']))} | {md(', '.join(ops[:12]) + (' ...' if len(ops) > 12 else ''))} |")
    nx = collections.Counter(group_key(r["msg"]) for r in rows if r["cls"] in ("not_exportable", "skipped", "harness"))
    out.append("")
    out.append("### Not exported or skipped, by reason")
    out.append("")
    out.append("| samples | reason |")
    out.append("|---|---|")
    for k, n in nx.most_common(25):
        out.append(f"| {n} | {md(k)} |")
    if len(nx) > 25:
        out.append(f"| {sum(n for _, n in nx.most_common()[25:])} | ({len(nx) - 25} other reasons) |")
    return "\n".join(out) + "\n"


def load_partial(path):
    """The rows of a stopped run's .partial file (JSON lines), each OpInfo's
    complete: progress() writes an OpInfo's rows at once."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by the stop
                break
    return rows


def md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


# ----------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ops", help="comma-separated OpInfo names (name: every variant; name.variant: one)")
    ap.add_argument("--quick", action="store_true", help="ctest opinfo_quick's subset (%d ops)" % len(QUICK_OPS))
    ap.add_argument("--limit", type=int, help="first N OpInfos (after --ops and --shard)")
    ap.add_argument("--shard", help="K/N: every N-th OpInfo starting at the K-th")
    ap.add_argument("--samples", type=int, default=1,
                    help="exported samples per OpInfo (0: all; default 1): samples with only 0-dim tensors are passed "
                         "over, and at most 2 more are tried when some do not export")
    ap.add_argument("--sample", type=int, help="only the sample with this index (reproduce a case)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--layouts", default="dp,last", help="comma-separated from: " + ", ".join(LAYOUTS))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (at most 2)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per spmdc, spmd-run or export (default 60)")
    ap.add_argument("--op-timeout", type=int, default=900, help="seconds per OpInfo before its worker is killed")
    ap.add_argument("--replicate-unknown", action="store_true", help="compile with --replicate-unknown")
    ap.add_argument("--spmdc", default=os.path.join(ROOT, "build/tools/spmdc/spmdc"))
    ap.add_argument("--spmd-run", default=os.path.join(ROOT, "build/tools/spmd-run/spmd-run"))
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--markdown", help="write the results as a Markdown section body to this file")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows of --json's .partial file (a stopped run's) and run only the OpInfos it lacks")
    ap.add_argument("--keep-bad", help="copy the case folder of every BAD case here")
    ap.add_argument("--workdir", help="where case folders are made (default: a temporary folder)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every row as it comes")
    args = ap.parse_args()
    args.layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    for lay in args.layouts:
        if lay not in LAYOUTS:
            ap.error(f"unknown layout {lay}; choose from {', '.join(LAYOUTS)}")
    args.jobs = max(1, min(args.jobs, 2))
    for tool in (args.spmdc, args.spmd_run):
        if not os.access(tool, os.X_OK):
            print(f"error: {tool}: not found (build it: cmake --build build --target spmdc spmd-run)", file=sys.stderr)
            return 2
    tools = types.SimpleNamespace(spmdc=os.path.abspath(args.spmdc), spmd_run=os.path.abspath(args.spmd_run))
    if args.keep_bad:
        os.makedirs(args.keep_bad, exist_ok=True)
    own_workdir = args.workdir is None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="opinfo-sweep.")
    os.makedirs(args.workdir, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    t0 = time.time()
    import torch
    torch.set_num_threads(1)
    op_db = load_op_db()
    indices, unsupported = select_ops(op_db, args)
    if not indices:
        print("error: no OpInfo selected", file=sys.stderr)
        return 2
    print(f"opinfo_sweep: {len(indices)} OpInfos, {args.dtype}, layouts {','.join(args.layouts)}, "
          f"samples {args.samples or 'all'}, {args.jobs} jobs, torch {torch.__version__}", flush=True)

    if args.resume and not args.json:
        ap.error("--resume needs --json (its .partial file holds the stopped run's rows)")
    kept = load_partial(args.json + ".partial") if args.resume else []
    selected = list(indices)
    if kept:
        done_ops = {r["op"] for r in kept}
        indices = [i for i in indices if op_name(op_db[i]) not in done_ops]
        print(f"opinfo_sweep: resuming: {len(done_ops)} OpInfos' rows kept, {len(indices)} to run", flush=True)
    # rows as they come (JSON lines), appended to on --resume
    partial = open(args.json + ".partial", "a" if args.resume else "w") if args.json else None

    def progress(done, total, rows):
        if partial:
            for r in rows:
                partial.write(json.dumps(r) + "\n")
            partial.flush()
        bad = [r for r in rows if r["cls"] in BAD]
        tally = collections.Counter(r["cls"] for r in rows)
        if args.verbose or bad or done % 25 == 0 or done == total:
            print(f"[{done}/{total} {time.time() - t0:6.0f}s] {rows[0]['op']}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())), flush=True)
        for r in (rows if args.verbose else bad):
            if r["layout"] != "-" or args.verbose:
                print(f"    {r['cls']} sample {r['sample']} {r['layout']}: {r.get('msg', '')}", flush=True)

    try:
        rows = kept + (run_pool(op_db, indices, args, tools, progress) if indices else [])
    finally:
        if own_workdir:
            shutil.rmtree(args.workdir, ignore_errors=True)
    elapsed = time.time() - t0
    order = {op_name(op_db[i]): k for k, i in enumerate(selected)}
    rows.sort(key=lambda r: (order.get(r["op"], 1 << 30), r["sample"], r["layout"]))
    print()
    print(summarize(rows, args, len(selected), len(unsupported), elapsed))
    shown, skip = [], False
    for a in sys.argv[1:]:  # the command, less where its outputs went
        if skip:
            skip = False
        elif a.startswith(("--json", "--markdown", "--keep-bad", "--workdir", "--spmdc", "--spmd-run")):
            skip = "=" not in a
        else:
            shown.append(a)
    command = " ".join(["python scripts/opinfo_sweep.py"] + shown)
    if args.json:
        partial.close()
        os.remove(args.json + ".partial")
        with open(args.json, "w") as f:
            json.dump({"command": command, "torch": torch.__version__, "elapsed_s": round(elapsed, 1),
                       "opinfos": len(selected), "unsupported_dtype": len(unsupported), "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, args, len(selected), len(unsupported), elapsed, command))
    return 1 if any(r["cls"] in BAD for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
