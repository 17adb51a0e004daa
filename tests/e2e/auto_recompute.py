#!/usr/bin/env python3
"""Layout and recomputation chosen together: `spmdc compile --schema auto
--memory-budget` on testdata/recompute's Llama train step (2 layers, ops
named by module, so "model.layers.*" can be recomputed), at mesh 2 and
2x2, in the three budget regimes of issue 32:

1. a budget 1% above the peak of auto's choice without a budget: nothing
   is recomputed (the report's auto.recompute.chosen.recomputed is false,
   no recompute note);
2. a budget halfway between that peak and the same layout with every
   layer fully recomputed: the chosen layout and plan fit (estimated peak,
   and every rank's measured peak, spmd-run --profile's live tensor bytes,
   within the budget), the plan recomputes no more FLOPs than full
   recomputation of the chosen layout (its schema, written by
   --write-schema, with "full" for "auto"), and loss and gradients match
   PyTorch's (expected.safetensors, rel 1e-5: layouts differ in reduction
   order);
3. a budget of 1,000 B: refused with exit 2 and one line naming the
   smallest peak found and the layouts tried; no program written.

Usage: auto_recompute.py SPMDC SPMD_RUN
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "testdata" / "recompute" / "llama_train_paths"


def run(cmd, ok=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"auto_recompute: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def flops(notes):
    """MFLOP the recompute note says were recomputed (0 without a note)."""
    for n in notes:
        m = re.match(r"recompute: \d+ ops .*?\(([\d.e+]+) MFLOP", n)
        if m:
            return float(m.group(1))
    return 0.0


def compile_auto(a, d, mesh, tag, budget=None):
    prog, rep, chosen = d / f"{tag}.spmd", d / f"{tag}.report.json", d / f"{tag}.schema.json"
    extra = ["--memory-budget", str(budget)] if budget is not None else []
    r = run([a.spmdc, "compile", MODEL / "model.pt2", "--schema", "auto", "--mesh", mesh, "-o", prog, "--report", rep,
             "--write-schema", chosen, "-q", *extra], ok=False)
    return r, prog, rep, chosen


def measured_peaks(a, d, prog, n, tag):
    prof, out = d / f"{tag}.prof.json", d / f"{tag}.out.safetensors"
    run([a.spmd_run, "-n", n, prog, "--inputs", MODEL / "inputs.safetensors", "--output", out, "--profile", prof, "-q"])
    return [r["peak_bytes"] for r in json.loads(prof.read_text())["ranks"]], out


def check_mesh(a, d, mesh, n, failures):
    import torch
    from safetensors.torch import load_file
    r, _, rep, chosen = compile_auto(a, d, mesh, f"plain{n}")
    if r.returncode != 0:
        failures.append(f"mesh {mesh}: auto without a budget failed: {r.stderr.strip()}")
        return
    p0 = json.loads(rep.read_text())["per_rank"]["peak_bytes_estimate"]
    full = json.loads(chosen.read_text())
    full["recompute"] = {"model.layers.*": "full"}
    (d / "full.json").write_text(json.dumps(full))
    run([a.spmdc, "compile", MODEL / "model.pt2", "--schema", d / "full.json", "-o", d / "full.spmd",
         "--report", d / "full.report.json", "-q"])
    pfull = json.loads((d / "full.report.json").read_text())["per_rank"]["peak_bytes_estimate"]
    print(f"mesh {mesh}: auto's layout peaks at {p0:,} B/rank, {pfull:,} B/rank with every layer recomputed")
    if not pfull < p0:
        failures.append(f"mesh {mesh}: full recomputation does not lower the peak ({pfull:,} vs {p0:,} B)")
        return
    want = load_file(str(MODEL / "expected.safetensors"))
    for label, budget in (("above", p0 + p0 // 100), ("below", pfull + (p0 - pfull) // 2)):
        tag = f"{label}{n}"
        r, prog, rep, chosen = compile_auto(a, d, mesh, tag, budget)
        if r.returncode != 0:
            failures.append(f"mesh {mesh} {label} ({budget:,} B): refused: {r.stderr.strip()}")
            continue
        report = json.loads(rep.read_text())
        rc = report["auto"].get("recompute")
        peak = report["per_rank"]["peak_bytes_estimate"]
        got_flops = flops(report["notes"])
        note = next((x for x in report["notes"] if x.startswith("recompute:")), "no recompute note")
        print(f"mesh {mesh} {label} ({budget:,} B): estimated peak {peak:,} B/rank; {note}")
        if rc is None:
            failures.append(f"mesh {mesh} {label}: the auto report has no recompute section")
            continue
        if peak > budget:
            failures.append(f"mesh {mesh} {label}: estimated peak {peak:,} over the budget {budget:,}")
        if label == "above" and (rc["chosen"]["recomputed"] or got_flops != 0 or "recompute" in
                                 json.loads(chosen.read_text())):
            failures.append(f"mesh {mesh} above the plain peak: something is recomputed: {rc['chosen']}")
        if label == "below":
            mine = json.loads(chosen.read_text())
            mine["recompute"] = {"model.layers.*": "full"}
            (d / "mine_full.json").write_text(json.dumps(mine))
            run([a.spmdc, "compile", MODEL / "model.pt2", "--schema", d / "mine_full.json", "-o", d / "mf.spmd",
                 "--report", d / "mf.report.json", "-q"])
            full_flops = flops(json.loads((d / "mf.report.json").read_text())["notes"])
            print(f"mesh {mesh} below: recomputed {got_flops} MFLOP, full recomputation of that layout {full_flops}")
            if not got_flops <= full_flops:
                failures.append(f"mesh {mesh} below: recomputes {got_flops} MFLOP, more than full's {full_flops}")
        measured, out = measured_peaks(a, d, prog, n, tag)
        print(f"mesh {mesh} {label}: measured peak per rank {measured} B")
        if max(measured) > budget:
            failures.append(f"mesh {mesh} {label}: a rank's measured peak {max(measured):,} B is over {budget:,} B")
        got = load_file(str(out))
        for k, w in want.items():
            err = float((got[k].double() - w.double()).abs().max()) / max(1e-12, float(w.double().abs().max()))
            if err > 1e-5:
                failures.append(f"mesh {mesh} {label}: {k} differs from PyTorch by rel {err:.3g}")
    r, prog, _, _ = compile_auto(a, d, mesh, f"tiny{n}", 1000)
    err = r.stderr.strip()
    print(f"mesh {mesh} at 1,000 B: {err}")
    if (r.returncode != 2 or len(err.splitlines()) != 1 or "smallest peak found is" not in err
            or "; tried " not in err or prog.exists()):
        failures.append(f"mesh {mesh} at 1,000 B: exit {r.returncode}, {err!r} (want exit 2, one line naming the "
                        "smallest peak and what was tried, no program)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a = type("Args", (), {"spmdc": sys.argv[1], "spmd_run": sys.argv[2]})
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"auto_recompute: skipped: {e} (scripts/setup.sh installs it)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-auto-recompute-") as tmp:
        for mesh, n in (("2", 2), ("2x2", 4)):
            check_mesh(a, Path(tmp), mesh, n, failures)
    for f in failures:
        print("FAIL", f)
    print(f"auto_recompute: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
