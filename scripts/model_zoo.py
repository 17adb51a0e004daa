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
The models are registered in zoo_models.py and the page is written by
zoo_report.py, both next to this file; this one exports, compiles, runs and
compares.

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

import zoo_models  # noqa: E402  (the registry, next to this file; the names below are also the tests')
from zoo_models import (ATOL, BATCH, GENERIC, IMG, MAX_PARAMS, MODELS, OWN_PLANS, QUICK, RTOL,  # noqa: E402,F401
                        SEQ, VOCAB, WINDOW, discovered, hf_build, hf_config)
from zoo_report import cell_ok, merge_results, pending, summarize, write_markdown  # noqa: E402,F401

SKIP = 77
EXPORT_TIMEOUT, COMPILE_TIMEOUT, RUN_TIMEOUT = 420, 180, 240

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
    for ir, eager_attn in attempts:
        stage = "torch.export.export"
        try:
            if eager_attn:  # rebuilt: some models pick their attention classes when constructed
                zoo_models.EAGER_ATTENTION = True  # hf_model reads it
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
