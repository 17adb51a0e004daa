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


def spread(xs, fmt):
    return f"{fmt(statistics.median(xs))} (min {fmt(min(xs))}, max {fmt(max(xs))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spmdc", default=os.path.join(ROOT, "build/tools/spmdc/spmdc"))
    ap.add_argument("--vs", help="a second spmdc binary, run in turn with the first")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pt2", help="a train-step archive to time instead of llama_deep_train")
    a = ap.parse_args()
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
