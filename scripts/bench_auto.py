#!/usr/bin/env python3
"""Times `spmdc compile --schema auto` as a whole process (the issue's speed
goal: llama_deep_train + AdamW, 9,178 nodes, at mesh 8 and 2x4 in <= 2 s) and
prints, per configuration, the wall time (min / median / max over --runs),
the split the report gives (model building, the quick model's search, the
finalists' compiles) and the modeled step of the chosen layout.

With --vs OTHER_SPMDC the two binaries run in turn (A B A B ...), and each
pair's ratio is printed too (median, min, max), with whether the two wrote the
same .spmd bytes. --pt2 PATH times another train-step archive at the same
meshes instead, e.g. the 8B-shaped Llama (export it once:
tests/export/export_ref_test.py's llama_8b(FOLDER), then
`python -m spmdc_export --hf FOLDER --train --batch 8 --seq 16 -o DIR`).

    scripts/bench_auto.py [--runs 7] [--vs /path/to/old/spmdc] [--spmdc build/tools/spmdc/spmdc] [--pt2 DIR/model.pt2]

--check PLANS.json (with --pt2) times nothing: it compiles each case of
PLANS.json (mesh, axes, --memory-budget; PERFORMANCE.md [9b]'s, in
scripts/bench_auto_plans.json) and exits 1 unless the chosen layout, the
recompute note (the plan "auto" chose, its peak and step) and the schema
--write-schema writes are the ones recorded there; --record PLANS.json writes
them (after a change that is meant to choose otherwise).
"""
import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [  # (model, optimizer, mesh, axes)
    ("llama_deep_train", "adamw", "8", "tp"),
    ("llama_deep_train", "adamw", "2x4", "dp,tp"),
]


def run(binary, model, optimizer, mesh, axes, out_dir, tag):
    spmd = os.path.join(out_dir, tag + ".spmd")
    report = os.path.join(out_dir, tag + ".json")
    path = model if model.endswith(".pt2") else os.path.join(ROOT, "testdata/pt2", model, "model.pt2")
    cmd = [binary, "compile", path, "--optimizer", optimizer,
           "--schema", "auto", "--mesh", mesh, "--axes", axes, "-o", spmd, "--report", report, "-q"]
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"bench_auto: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    with open(report) as f:
        r = json.load(f)
    a = r["auto"]
    return {"wall": wall, "build_ms": a["build_ms"], "search_ms": a["search_ms"],
            "solve_ms": a["solve_ms"], "quick": a.get("quick_evaluations", 0),
            "step_ms": r["cost"]["modeled_step_ms"], "spmd": spmd, "method": a["method"],
            "unalike": a.get("quick_unalike", 0), "timed_out": a["timed_out"]}


def plans(binary, pt2, cases, out_dir):
    """What --schema auto chose on each case: layout, recompute note, schema."""
    got = []
    for c in cases:
        spmd, report, schema = (os.path.join(out_dir, "plan" + x) for x in (".spmd", ".json", ".schema.json"))
        cmd = [binary, "compile", pt2, "--schema", "auto", "--mesh", c["mesh"], "--axes", c["axes"],
               "--memory-budget", c["budget"], "-o", spmd, "--report", report, "--write-schema", schema, "-q"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench_auto: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        with open(report) as f:
            r = json.load(f)
        with open(schema) as f:
            written = json.load(f)
        written.pop("comment", None)  # names the archive's path
        got.append({**{k: c[k] for k in ("mesh", "axes", "budget")}, "choices": r["auto"]["choices"],
                    "recompute": [n for n in r["notes"] if n.startswith("recompute:")], "schema": written})
    return got


def check(a):
    if not a.pt2:
        sys.exit("bench_auto: --check and --record need --pt2 (PERFORMANCE.md [9b]'s deep_paths/model.pt2)")
    path = a.check or a.record
    with open(path) as f:
        cases = json.load(f)
    with tempfile.TemporaryDirectory() as out:
        got = plans(a.spmdc, a.pt2, cases, out)
    if a.record:
        with open(path, "w") as f:
            json.dump(got, f, indent=1)
            f.write("\n")
        print(f"bench_auto: recorded {len(got)} cases in {path}")
        return
    bad = [f"--mesh {g['mesh']} --memory-budget {g['budget']}" for g, w in zip(got, cases) if g != w]
    if bad:
        sys.exit(f"bench_auto: chosen plans differ from {path} on: {'; '.join(bad)}")
    print(f"bench_auto: {len(got)} cases choose as recorded in {path}")


def spread(xs, fmt):
    return f"{fmt(statistics.median(xs))} (min {fmt(min(xs))}, max {fmt(max(xs))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spmdc", default=os.path.join(ROOT, "build/tools/spmdc/spmdc"))
    ap.add_argument("--vs", help="a second spmdc binary, run in turn with the first")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pt2", help="a train-step archive to time instead of llama_deep_train")
    ap.add_argument("--check", help="cases to compile; exit 1 unless they choose as recorded there")
    ap.add_argument("--record", help="cases to compile; record what they choose there")
    a = ap.parse_args()
    if a.check or a.record:
        return check(a)
    configs = [(a.pt2, opt, mesh, axes) for _, opt, mesh, axes in CONFIGS] if a.pt2 else CONFIGS
    secs = lambda x: f"{x:.2f} s"
    with tempfile.TemporaryDirectory() as out:
        for model, opt, mesh, axes in configs:
            run(a.spmdc, model, opt, mesh, axes, out, "warm")  # page cache, children
            rows, vs, same = [], [], True
            for _ in range(a.runs):
                rows.append(run(a.spmdc, model, opt, mesh, axes, out, "a"))
                if a.vs:
                    vs.append(run(a.vs, model, opt, mesh, axes, out, "b"))
                    same = same and filecmp.cmp(rows[-1]["spmd"], vs[-1]["spmd"], shallow=False)
            print(f"== {model} + {opt}, --mesh {mesh} --axes {axes}: {rows[-1]['method']}")
            print(f"   wall {spread([r['wall'] for r in rows], secs)}; build {statistics.median(r['build_ms'] for r in rows):.0f} ms,"
                  f" search {statistics.median(r['search_ms'] for r in rows):.0f} ms"
                  f" ({rows[-1]['quick']} quick evaluations), solve {statistics.median(r['solve_ms'] for r in rows):.0f} ms;"
                  f" modeled step {rows[-1]['step_ms']:.4f} ms"
                  f"{'; time limit reached' if rows[-1]['timed_out'] else ''}"
                  f"{'; %d refused: layers plan unalike' % rows[-1]['unalike'] if rows[-1]['unalike'] else ''}")
            if a.vs:
                ratios = [x["wall"] / y["wall"] for x, y in zip(rows, vs)]
                print(f"   vs {a.vs}: wall {spread([r['wall'] for r in vs], secs)}, search"
                      f" {statistics.median(r['search_ms'] for r in vs):.0f} ms, modeled step {vs[-1]['step_ms']:.4f} ms"
                      f"{' (time limit reached)' if vs[-1]['timed_out'] else ''};"
                      f" ratio {spread(ratios, lambda x: f'{x:.2f}x')}; same .spmd: {same}")


if __name__ == "__main__":
    main()
