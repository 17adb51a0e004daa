#!/usr/bin/env python3
"""Modeled against measured: do spmdc's cost figures rank layouts the way
spmd-run's step times do? (issue 12, docs/PERFORMANCE.md "Modeled vs measured")

    .venv/bin/python scripts/bench_auto_rank.py [--build build] [--steps 10]
        [--device-profile P.json] [--short] [--json OUT]

1. Calibrates this machine once per mesh: `spmd-run --calibrate -n 4
   --mesh 4` and `--mesh 2x2` (--calibrate-quick in --short) write device
   profiles, their per-axis entries dropped so that every layout's axes
   (named x, d0/d1, tp or dp/tp) take the link measured on groups of their
   size; --device-profile names one profile for every layout instead.
2. Compiles llama_train (AdamW, as train steps are compiled) under each
   layout with `spmdc compile --device-profile P --report r.json` and reads
   the report's "cost" block (modeled_step_ms = compute_ms + comm_ms).
   Layouts: presets dp and fsdp, the Megatron schema (schemas/examples/
   llama_tp.json) and `--schema auto` at mesh 4; dp, fsdp, hsdp,
   llama_dp_tp.json and auto at mesh 2x2 (dp, tp). A layout that does not
   compile (or a spmdc without --schema auto) is listed as skipped with its
   reason.
3. Runs each program with `spmd-run -n 4 --steps N --profile prof.json`,
   --rounds times round-robin over the layouts, and takes the step time:
   each rank's median over the steps (the first left out), the slowest
   rank's, the median over the rounds.
4. Prints the table and the Spearman rank correlation of modeled against
   measured step time (ties share their mean rank).

Calibration and runs use the same OMP_NUM_THREADS (cores / 4, at least 1),
so the profile describes the conditions the programs run under. A spmdc
whose --report has no "cost" block is reported as such: measured times
only, no correlation. --short (ctest bench_auto_rank): dp and fsdp at mesh
4, 1 step, 1 round, a quick calibration; proves the chain works (both layouts
compile, carry a modeled time and run), times nothing meaningful. Exit
status 1 when --short's chain breaks, or fewer than 2 layouts were measured.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "testdata", "pt2", "llama_train")
EXAMPLES = os.path.join(ROOT, "schemas", "examples")
RANKS = 4

# (label, --schema, --mesh, extra spmdc flags)
FULL = [
    ("dp", "dp", "4", []),
    ("fsdp", "fsdp", "4", []),
    ("megatron tp", os.path.join(EXAMPLES, "llama_tp.json"), "4", []),
    ("auto", "auto", "4", []),
    ("dp", "dp", "2x2", []),
    ("fsdp", "fsdp", "2x2", []),
    ("hsdp", "hsdp", "2x2", []),
    ("dp x tp", os.path.join(EXAMPLES, "llama_dp_tp.json"), "2x2", []),
    ("auto", "auto", "2x2", ["--axes", "dp,tp"]),
]
SHORT = FULL[:2]


def run(cmd, env, timeout):
    """(returncode, last stderr line, stdout) of `cmd`."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    return p.returncode, (lines[-1] if lines else ""), p.stdout


def calibrate(args, env, tmp, mesh):
    """A profile of this machine measured on `mesh` ("4", "2x2"), its "axes"
    dropped: the layouts name their axes differently (presets x / d0, d1;
    schemas tp / dp, tp), so every axis takes intra_node, measured on groups
    of the mesh's own sizes."""
    path = os.path.join(tmp, f"profile-{mesh}.json")
    flag = "--calibrate-quick" if args.short else "--calibrate"
    cmd = [args.spmd_run, flag, "-n", str(RANKS), "--mesh", mesh, "--device", "cpu", "-o", path]
    code, err, out = run(cmd, env, 600)
    if code != 0:
        sys.exit(f"error: calibration failed: {' '.join(cmd)}: {err}")
    print(out.strip())
    with open(path) as f:
        profile = json.load(f)
    profile.pop("axes", None)
    profile["source"] += "; bench_auto_rank.py dropped its \"axes\" (every axis takes intra_node)"
    with open(path, "w") as f:
        json.dump(profile, f, indent=2)
    return path


def compile_layout(args, env, tmp, i, layout, profile):
    """(program path, report dict) or (None, reason)."""
    label, schema, mesh, extra = layout
    program = os.path.join(tmp, f"l{i}.spmd")
    report = os.path.join(tmp, f"l{i}.json")
    cmd = [args.spmdc, "compile", os.path.join(MODEL, "model.pt2"), "--schema", schema, "--mesh", mesh,
           "--optimizer", "adamw", "--device-profile", profile, "--report", report, "-o", program, "-q"] + extra
    code, err, _ = run(cmd, env, 600)
    if code != 0:
        return None, err or f"spmdc exited with {code}"
    with open(report) as f:
        return program, json.load(f)


def measure(args, env, tmp, i, program):
    """Step time in ms (slowest rank's median), or (None, reason)."""
    prof = os.path.join(tmp, f"p{i}.json")
    cmd = [args.spmd_run, "-n", str(RANKS), program, "--inputs", os.path.join(MODEL, "inputs.safetensors"),
           "--steps", str(args.steps), "--device", "cpu", "--profile", prof, "-q"]
    code, err, _ = run(cmd, env, 1800)
    if code != 0:
        return None, err or f"spmd-run exited with {code}"
    with open(prof) as f:
        ranks = json.load(f)["ranks"]
    return max(r["step_ms"] for r in ranks), ""


def ranks_of(values):
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's rho of two equal-length lists; None when undefined."""
    if len(xs) < 2:
        return None
    rx, ry = ranks_of(xs), ranks_of(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx > 0 and vy > 0 else None


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def collect(args, env, tmp):
    """(rows, {mesh: profile}): every layout compiled, then run round-robin
    --rounds times (a load spike then hits one round of every layout, not
    every round of one); measured_ms is the median over the rounds."""
    layouts = SHORT if args.short else FULL
    meshes = dict.fromkeys(l[2] for l in layouts)
    profiles = {m: args.device_profile or calibrate(args, env, tmp, m) for m in meshes}
    rows, programs = [], []
    for i, layout in enumerate(layouts):
        label, _, mesh, _ = layout
        row = {"layout": label, "mesh": mesh, "modeled_ms": None, "compute_ms": None, "comm_ms": None,
               "measured_ms": None, "rounds_ms": [], "skipped": ""}
        rows.append(row)
        program, report = compile_layout(args, env, tmp, i, layout, profiles[mesh])
        if program is None:
            row["skipped"] = "compile: " + report
            continue
        cost = report.get("cost") or {}
        row.update(modeled_ms=cost.get("modeled_step_ms"), compute_ms=cost.get("compute_ms"),
                   comm_ms=cost.get("comm_ms"))
        programs.append((i, row, program))
    for _ in range(args.rounds):
        for i, row, program in programs:
            if row["skipped"]:
                continue
            ms, why = measure(args, env, tmp, i, program)
            if ms is None:
                row["skipped"] = "run: " + why
            else:
                row["rounds_ms"].append(ms)
    for _, row, _ in programs:
        if not row["skipped"]:
            row["measured_ms"] = statistics.median(row["rounds_ms"])
    loaded = {}
    for mesh, path in profiles.items():
        with open(path) as f:
            loaded[mesh] = json.load(f)
    return rows, loaded


def print_table(args, env, rows):
    """Prints the rows with both ranks; returns (rows with both times, rho)."""
    print(f"\nllama_train, AdamW, {RANKS} CPU workers, {args.steps} step(s) x {args.rounds} round(s), "
          f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}")
    print(f"{'layout':<12} {'mesh':<5} {'modeled ms':>10} {'compute':>9} {'comm':>9} {'measured ms':>11}"
          f" {'rank mod':>8} {'rank meas':>9}")
    done = [r for r in rows if r["measured_ms"] is not None and r["modeled_ms"] is not None]
    rm = dict(zip(map(id, done), ranks_of([r["modeled_ms"] for r in done])))
    rs = dict(zip(map(id, done), ranks_of([r["measured_ms"] for r in done])))
    for r in rows:
        print(f"{r['layout']:<12} {r['mesh']:<5} {fmt(r['modeled_ms'], 2):>10} {fmt(r['compute_ms'], 2):>9}"
              f" {fmt(r['comm_ms'], 2):>9} {fmt(r['measured_ms']):>11} {fmt(rm.get(id(r)), 1):>8}"
              f" {fmt(rs.get(id(r)), 1):>9}" + (f"  skipped: {r['skipped']}" if r["skipped"] else ""))
    rho = spearman([r["modeled_ms"] for r in done], [r["measured_ms"] for r in done])
    if any(r["measured_ms"] is not None for r in rows) and not done:
        print("spmdc's --report carries no \"cost\" block: measured times only, no rank correlation")
    else:
        print(f"Spearman rank correlation (modeled vs measured, {len(done)} layouts): {fmt(rho, 3)}")
    return done, rho


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build folder with spmdc and spmd-run")
    ap.add_argument("--spmdc")
    ap.add_argument("--spmd-run")
    ap.add_argument("--steps", type=int, default=10, help="train steps per run (the first is left out)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per layout, round-robin; the median counts")
    ap.add_argument("--device-profile", help="use this profile for every layout instead of calibrating")
    ap.add_argument("--short", action="store_true", help="2 layouts, 1 step, 1 round, quick calibration (ctest)")
    ap.add_argument("--json", help="also write the rows and profiles here")
    args = ap.parse_args()
    args.spmdc = args.spmdc or os.path.join(args.build, "tools", "spmdc", "spmdc")
    args.spmd_run = args.spmd_run or os.path.join(args.build, "tools", "spmd-run", "spmd-run")
    if args.short:
        args.steps, args.rounds = 1, 1
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // RANKS)))
    with tempfile.TemporaryDirectory(prefix="bench-auto-rank-") as tmp:
        rows, profiles = collect(args, env, tmp)
    done, rho = print_table(args, env, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "spearman": rho, "steps": args.steps, "rounds": args.rounds,
                       "device_profiles": profiles}, f, indent=2)
    problems = [f"{r['layout']} {r['mesh']}: {r['skipped']}" for r in rows if r["skipped"]] if args.short else []
    if args.short and not done:
        problems.append("no layout has a modeled time (no \"cost\" block in spmdc's --report)")
    if sum(r["measured_ms"] is not None for r in rows) < 2:
        problems.append("fewer than 2 layouts measured")
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
