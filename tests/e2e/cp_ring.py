#!/usr/bin/env python3
"""Ring attention ("context_parallel": {"axis": "cp", "rotate": "ring"}) of
Llama train steps at sequence 64, against eager PyTorch.

Usage:
    cp_ring.py SPMDC SPMD_RUN [--memory SEQ | --auto | --no-mask] [--json OUT]

Models (cp_llama.py's: random weights, seed 0, batch 2, sequence 64, hidden
64, 4 heads, 2 layers; expected.safetensors holds eager PyTorch's loss and
gradients):

- hf_llama: transformers LlamaForCausalLM train step (eager attention: the
  joint graph's matmul, causal mask from positions, softmax, matmul);
- sdpa_causal: a Llama with F.scaled_dot_product_attention(is_causal=True),
  train step (decomposed into the eager pattern by the joint graph:
  spmdc_export's default --attention math);
- sdpa_full: the same with is_causal=False (no mask: every block computed);
- fused_causal_infer: its logits, the graph keeping the fused
  aten.scaled_dot_product_attention (is_causal -> the ring's causal flag:
  blocks above the diagonal skipped, the diagonal masked).

Each is compiled with "rotate": "ring" (hf_llama at cp 2, cp 4, dp 2 x cp
2 and fsdp 2 x cp 2; the others at cp 2; and testdata's llama_train under llama_tp.json at tp 2 x cp 2), run on spmd-run -n (gloo, CPU) with --profile,
and must match eager at rel 1e-5 (max norm, loss and every gradient). The
compile must say the attentions became ring attention and the program must
hold no all-gather of keys and values: the bytes each rank sent
(spmd-run --profile) minus the report's collectives must equal the ring's
theory, per attention and rank with a key/value block of
c = b * (s/cp) * d * 4 bytes per tensor:

    forward:  (cp - 1) sends of K and V           = (cp - 1) * 2c
    backward: (cp - 1) sends of K and V, cp sends  = (2 cp - 1) * 2c
              of the travelling dK and dV

The report's ring_attention bytes_per_rank must equal that theory and the
measured ring bytes.

--no-mask runs sdpa_full (no mask) at cp 4 and dp 2 x cp 2 instead of the
list above (by hand, not in ctest: CI time), with the same checks.

--auto checks "rotate": "auto" instead, compile only (check_auto): the
all-gather form where the ring's exchanges cost more latency than its
blocks hide, the ring where they hide, the ring under a --memory-budget the
all-gather form's peak exceeds, a one-line refusal under a budget neither
fits.

--memory SEQ compiles sdpa_causal at sequence SEQ (batch 1) with "rotate"
"allgather" and "ring" at cp 2 and 4 and prints each rank's measured peak
(spmd-run --profile): the ring holds key/value blocks, not whole keys and
values, and no [s/cp, s] scores. Exit 1 on any mismatch; CI=true makes a
missing transformers a failure, not a skip (77).
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cp_llama  # noqa: E402  (models, export, schema, compare, run)
from hf_llama_sp_lp import collectives  # noqa: E402

B, S, D, LAYERS = cp_llama.B, cp_llama.S, cp_llama.D, cp_llama.LAYERS


def ring_schema(mesh, rotate="ring"):
    s = cp_llama.schema(mesh)
    s["context_parallel"] = {"axis": "cp", "rotate": rotate}
    return s


def ring_theory(mesh, train, seq=S, batch=B):
    """Bytes a rank sends in the ring kernels per step (all layers)."""
    cp = mesh["cp"]
    block = batch // mesh.get("dp", 1) // mesh.get("fsdp", 1) * (seq // cp) * D * 4
    per_layer = (cp - 1) * 2 * block + ((2 * cp - 1) * 2 * block if train else 0)
    return LAYERS * per_layer


def check_case(a, d, name, mesh, failures, rows):
    tag = name + "_ring_" + "x".join(f"{k}{v}" for k, v in mesh.items())
    n = math.prod(mesh.values())
    sfile, prog, rep, prof = (d / f"{tag}.{x}" for x in ("json", "spmd", "report.json", "prof.json"))
    sfile.write_text(json.dumps(ring_schema(mesh)))
    r = cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog, "--report", rep])
    note = [line for line in (r.stdout + r.stderr).splitlines() if "context parallelism on 'cp'" in line]
    if not note or "ring attention" not in note[0]:
        failures.append(f"{tag}: the compile does not say the attentions became ring attention: {note}")
    out = d / f"{tag}.out.safetensors"
    cp_llama.run([a.spmd_run, "-n", n, prog, "--inputs", d / name / "inputs.safetensors", "--output", out,
                  "--profile", prof, "-q"])
    worst, bad = cp_llama.compare(out, d / name / "expected.safetensors")
    failures.extend(f"{tag}: {b}" for b in bad)
    report = json.loads(rep.read_text())
    kinds = collectives(report)
    planned = sum(by for _, by in kinds.values())
    train = not name.endswith("_infer")
    theory = ring_theory(mesh, train)
    # Over cp: no all-gather of keys and values, no reduce-scatter of their
    # gradients (an inference graph's replicated logits are gathered once;
    # fsdp's parameters, stored over fsdp x cp, are 1-d and 2-d).
    on_cp = [c["kind"] for c in report.get("collectives", [])
             if c.get("mesh_axis") == "cp" and len(c.get("shape", [])) >= 3]
    gathers = on_cp.count("all_gather") + on_cp.count("reduce_scatter")
    if gathers != (1 if name.endswith("_infer") else 0):
        failures.append(f"{tag}: keys and values are still gathered or scattered over cp: {on_cp}")
    reported = report.get("ring_attention", {}).get("bytes_per_rank")
    if reported != theory:
        failures.append(f"{tag}: the report's ring_attention bytes_per_rank is {reported}, theory {theory:,}")
    ranks = json.loads(prof.read_text())["ranks"]
    for rk in ranks:
        ring = rk["bytes_sent"] - planned
        if ring != theory or ring != reported:
            failures.append(f"{tag}: rank {rk.get('rank')} sent {ring:,} ring bytes "
                            f"({rk['bytes_sent']:,} - planned {planned:,}), theory {theory:,}, "
                            f"report {reported}")
    rows.append({"case": tag, "ranks": n, "rel_err": worst, "collectives": kinds, "ring_theory": theory,
                 "bytes_sent": [rk["bytes_sent"] for rk in ranks], "peak": [rk["peak_bytes"] for rk in ranks]})
    print(f"{tag:32} rel {worst:.2g}  ring bytes/rank {theory:,} (theory)  "
          + "  ".join(f"{k} {c}/{by:,}" for k, (c, by) in sorted(kinds.items())), flush=True)


def check_tp_cp(a, d, failures):
    """testdata's llama_train under llama_tp.json on a tp 2 x cp 2 mesh with
    ring attention: eager's loss and gradients (its expected.safetensors)."""
    pt2 = cp_llama.ROOT / "testdata" / "pt2" / "llama_train"
    s = json.loads((cp_llama.ROOT / "schemas" / "examples" / "llama_tp.json").read_text())
    s["mesh"] = {"shape": [2, 2], "axes": ["tp", "cp"]}
    s["context_parallel"] = {"axis": "cp", "rotate": "ring"}
    (d / "tpcp.json").write_text(json.dumps(s))
    cp_llama.run([a.spmdc, "compile", pt2 / "model.pt2", "--schema", d / "tpcp.json", "-o", d / "tpcp.spmd", "-q"])
    r = cp_llama.run([a.spmd_run, "-n", 4, d / "tpcp.spmd", "--inputs", pt2 / "inputs.safetensors",
                      "--verify-against", pt2 / "expected.safetensors", "--rtol", "1e-5"], ok=(0, 1))
    if r.returncode != 0:
        failures.append(f"llama_train tp 2 x cp 2 (ring) differs from eager:\n{r.stdout}{r.stderr}")
    else:
        print("llama_train_ring_tp2xcp2         matches eager (spmd-run --verify-against, rtol 1e-5)")


def auto_compile(a, d, name, cp, extra=(), ok=(0,)):
    """Compiles d/name with "rotate": "auto" at cp; returns (the compile, the
    report or None)."""
    tag = f"{name}_auto_cp{cp}_{len(extra)}"
    sfile, prog, rep = (d / f"{tag}.{x}" for x in ("json", "spmd", "report.json"))
    sfile.write_text(json.dumps(ring_schema({"cp": cp}, "auto")))
    r = cp_llama.run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog, "--report", rep,
                      *extra], ok=ok)
    return r, (json.loads(rep.read_text()) if r.returncode == 0 else None)


def auto_note(report):
    """(chosen form, ring peak, all-gather peak) from the compile's note."""
    note = [ln for ln in report["notes"] if '"rotate": "auto" chose' in ln]
    m = re.search(r"chose (\w+): .*peak ([\d,]+) B vs ([\d,]+) B", note[0]) if note else None
    if not m:
        return None, 0, 0
    print(f"  {note[0]}", flush=True)
    return m.group(1), int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))


def check_auto(a, d, failures):
    """"rotate": "auto" both ways, compile only (sdpa_causal):

    - sequence 64, cp 4: the all-gather form (the ring's 3 cp - 2 = 10
      exchanges per attention cost more latency than its tiny blocks hide);
    - sequence 512 (batch 1), cp 4: the ring (its exchanges hide behind
      the block compute; the all-gather form's collectives do not);
    - sequence 512, cp 4 on a profile with 1 ms links: the all-gather form
      (latency again), and under a --memory-budget between the two forms'
      modeled peaks, the ring; under a budget below both, a refusal (exit 2).

    The chosen program must be that form: ring_attention in its report, or
    no ring_attention and all-gathers over cp."""
    cp_llama.export("sdpa_causal", d / "sdpa_causal")
    cp_llama.export("sdpa_causal", d / "sdpa_causal_512", seq=512, batch=1)
    slow = d / "slow_links.json"
    slow.write_text(json.dumps({"name": "slow-links", "compute": {"flops_per_second": {"default": 5e10},
                                                                  "memory_bytes_per_second": 1e10},
                                "links": {"intra_node": {"alpha_seconds": 1e-3, "bytes_per_second": 1e9},
                                          "inter_node": {"alpha_seconds": 1e-3, "bytes_per_second": 1e9}}}))
    cases = [("sdpa_causal seq 64 cp 4", "sdpa_causal", 4, (), "allgather"),
             ("sdpa_causal seq 512 cp 4", "sdpa_causal_512", 4, (), "ring"),
             ("sdpa_causal seq 512 cp 4, 1 ms links", "sdpa_causal_512", 4, ("--device-profile", slow), "allgather")]
    peaks = None
    for what, name, cp, extra, want in cases:
        print(f"{what}: expect {want}", flush=True)
        _, report = auto_compile(a, d, name, cp, extra)
        got, ring_peak, gather_peak = auto_note(report)
        peaks = (ring_peak, gather_peak)
        has_ring = "ring_attention" in report
        gathers = [c for c in report["collectives"] if c.get("mesh_axis") == "cp" and c["kind"] == "all_gather"]
        if got != want or has_ring != (want == "ring") or (want == "allgather" and not gathers):
            failures.append(f"auto: {what}: chose {got} (report ring_attention: {has_ring}, all-gathers over cp: "
                            f"{len(gathers)}), expected {want}")
    ring_peak, gather_peak = peaks
    if not ring_peak < gather_peak:
        failures.append(f"auto: the ring's modeled peak {ring_peak:,} is not under the all-gather's {gather_peak:,}")
        return
    budget = ("--device-profile", slow, "--memory-budget", str((ring_peak + gather_peak) // 2))
    print("sdpa_causal seq 512 cp 4, 1 ms links, budget between the peaks: expect ring", flush=True)
    _, report = auto_compile(a, d, "sdpa_causal_512", 4, budget)
    got, _, _ = auto_note(report)
    if got != "ring" or "ring_attention" not in report:
        failures.append(f"auto: under a budget between the peaks: chose {got}, expected ring")
    r, _ = auto_compile(a, d, "sdpa_causal_512", 4, ("--memory-budget", str(ring_peak // 2)), ok=(2,))
    err = (r.stdout + r.stderr).strip()
    print(f"budget below both peaks: exit {r.returncode}: {err}", flush=True)
    if len(err.splitlines()) != 1 or "neither form fits --memory-budget" not in err:
        failures.append(f"auto: a budget below both peaks: expected one line naming both peaks, got {err!r}")


def memory(a, d, seq):
    name = "sdpa_causal"
    cp_llama.export(name, d / "mem", seq=seq, batch=1)
    rows = []
    for cp in (2, 4):
        for rotate in ("allgather", "ring"):
            tag = f"mem_{rotate}_cp{cp}"
            sfile, prog, prof = (d / f"{tag}.{x}" for x in ("json", "spmd", "prof.json"))
            sfile.write_text(json.dumps(ring_schema({"cp": cp}, rotate)))
            cp_llama.run([a.spmdc, "compile", d / "mem" / "model.pt2", "--schema", sfile, "-o", prog, "-q"])
            cp_llama.run([a.spmd_run, "-n", cp, prog, "--inputs", d / "mem" / "inputs.safetensors", "--profile",
                          prof, "-q"])
            ranks = json.loads(prof.read_text())["ranks"]
            peaks = [r["peak_bytes"] for r in ranks]
            rows.append({"cp": cp, "rotate": rotate, "measured_peak": peaks,
                         "bytes_sent": [r["bytes_sent"] for r in ranks]})
            print(f"seq {seq} cp {cp} {rotate:9} peak per rank {' '.join(f'{p:,}' for p in peaks)}  "
                  f"bytes sent {ranks[0]['bytes_sent']:,}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--memory", type=int, default=0)
    ap.add_argument("--auto", action="store_true", help='only the "rotate": "auto" checks (compile only)')
    ap.add_argument("--no-mask", action="store_true", help="only sdpa_full (no mask) at cp 4 and dp 2 x cp 2")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("cp_ring: transformers is not installed")
        return 1 if os.environ.get("CI") == "true" else 77
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="spmdc-cp-ring-") as tmp:
        d = Path(tmp)
        if a.auto:
            check_auto(a, d, failures)
        elif a.memory:
            rows = memory(a, d, a.memory)
        else:
            meshes = {"hf_llama": [{"cp": 2}, {"cp": 4}, {"dp": 2, "cp": 2}, {"fsdp": 2, "cp": 2}],
                      "sdpa_causal": [{"cp": 2}], "sdpa_full": [{"cp": 2}],
                      "fused_causal_infer": [{"cp": 2}]}
            if a.no_mask:
                meshes = {"sdpa_full": [{"cp": 4}, {"dp": 2, "cp": 2}]}
            for name, name_meshes in meshes.items():
                cp_llama.export(name, d / name)
                for mesh in name_meshes:
                    check_case(a, d, name, mesh, failures, rows)
            check_tp_cp(a, d, failures)
    return cp_llama.finish(a.json, rows, failures)


if __name__ == "__main__":
    sys.exit(main())
