#!/usr/bin/env python3
"""Context parallelism ("context_parallel": {"axis": "cp"}) of Llama train
steps at sequence 64, against eager PyTorch.

Usage:
    cp_llama.py SPMDC SPMD_RUN [--quick] [--memory SEQ] [--json OUT]

Models (random weights, seed 0, batch 2, sequence 64, exported as one
train step with spmdc_export; expected.safetensors holds eager PyTorch's
loss and gradients):

- hf_llama: a 2-layer transformers LlamaForCausalLM (hidden 64, 4 heads,
  vocabulary 256; its attention is the eager pattern: matmul, the causal
  mask built in the graph from positions, softmax, matmul);
- sdpa_causal / sdpa_full: a 2-layer Llama (RMSNorm, RoPE from buffers,
  SwiGLU) whose attention is F.scaled_dot_product_attention, is_causal True
  or False (the fused CPU kernel in the graph);
- eager_full: the same with the eager pattern and no mask;
- fused_causal_infer / fused_full_infer: the sdpa Llama's logits
  (inference), exported without decompositions so that the graph keeps
  aten.scaled_dot_product_attention (a train step holds the eager pattern,
  or with --attention fused the CPU flash pair); the causal one exercises the
  explicit mask of global positions.

Each is compiled with context parallelism at cp 2 and 4, and at dp 2 x cp 2
(and hf_llama also at fsdp 2 x cp 2; testdata's llama_train at tp 2 x cp 2
under llama_tp.json), run on spmd-run -n 2/4 (gloo, CPU),
and the loss and every gradient must equal eager's (rel 1e-5, on the max
norm). The compile must say it applied context parallelism, and the
collectives of the report must be those of the all-gather form: per
attention, keys and values all-gathered in the forward and their gradients
reduce-scattered in the backward, bytes as theory gives (check_case). A sequence
of 63 over cp 2 must be refused in one line (exit 2).

--memory SEQ exports sdpa_causal at sequence SEQ (batch 1) and prints the
measured peak (spmd-run --profile) and the report's estimate per rank at
cp 1, 2 and 4; fails when a rank's measured peak at cp 2 or 4 is more
than 1.25 / cp of cp 1's (ctest cp_memory: SEQ 512). Exit 77 (skip) without transformers, 1 on any mismatch.
"""
import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_llama_sp_lp import collectives  # noqa: E402  (count and bytes of each collective kind in a report)

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from spmdc_export import core  # noqa: E402

B, S, D, HEADS, VOCAB, LAYERS = 2, 64, 64, 4, 256, 2


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rope(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Layer(nn.Module):
    def __init__(self, d, heads, attn, causal):
        super().__init__()
        self.hd, self.attn, self.causal = d // heads, attn, causal
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.w2 = nn.Linear(2 * d, d, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.n1(x)
        q, k, v = (w(h).view(b, s, -1, self.hd) for w in (self.wq, self.wk, self.wv))
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.attn == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            if self.causal:
                att = att + torch.full((s, s), float("-inf"), dtype=att.dtype).triu(1)
            y = att.softmax(-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(b, s, -1))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, attn, causal, max_seq, d=D, heads=HEADS, layers=LAYERS, vocab=VOCAB):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, attn, causal) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        ang = torch.outer(torch.arange(max_seq).float(), 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd)))
        self.register_buffer("cos", ang.cos()[:, None, :])
        self.register_buffer("sin", ang.sin()[:, None, :])

    def logits(self, tokens):
        s = tokens.shape[1]
        x = self.tok(tokens)
        for layer in self.layers:
            x = layer(x, self.cos[:s], self.sin[:s])
        return self.out(self.norm(x))

    def forward(self, tokens, labels):
        return F.cross_entropy(self.logits(tokens).flatten(0, 1), labels.flatten())


class Logits(nn.Module):
    """Llama's logits (inference), for an export that keeps the fused op."""

    def __init__(self, llama):
        super().__init__()
        self.llama = llama

    def forward(self, tokens):
        return self.llama.logits(tokens)


def run(cmd, ok=(0,)):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode not in ok:
        sys.exit(f"cp_llama: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def export(name, d, seq=S, batch=B):
    torch.manual_seed(0)
    if name == "hf_llama":
        from spmdc_export import hf
        m = hf.build("llama", train=True, layers=LAYERS, hidden=D, heads=HEADS, vocab=VOCAB, batch=batch, seq=seq)
        # --attention math (the default, said here): transformers' SDPA traced as the eager pattern (the mask
        # built from positions), what this model stands for; the fused pair is fused_attention_train.py's.
        core.export_train_step(m.module, m.inputs, d, loss_fn=m.loss_fn, targets=m.targets, strict=False,
                               attention="math")
        return
    attn, causal = {"sdpa_causal": ("sdpa", True), "sdpa_full": ("sdpa", False), "eager_full": ("eager", False),
                    "eager_causal": ("eager", True),
                    "fused_causal_infer": ("sdpa", True), "fused_full_infer": ("sdpa", False)}[name]
    tokens, labels = torch.randint(0, VOCAB, (batch, seq)), torch.randint(0, VOCAB, (batch, seq))
    if name.endswith("_infer"):  # not decomposed: the graph keeps aten.scaled_dot_product_attention
        core.export(Logits(Llama(attn, causal, seq)), (tokens,), d, decompose=False)
    else:
        core.export_train_step(Llama(attn, causal, seq), (tokens, labels), d)


def schema(mesh, cp=True):
    """mesh: {"cp": 2}, {"dp": 2, "cp": 2} or {"fsdp": 2, "cp": 2}."""
    axes = list(mesh)
    s = {"version": 1, "mesh": {"shape": [mesh[a] for a in axes], "axes": axes}, "outputs": "replicate"}
    if cp:
        s["context_parallel"] = {"axis": "cp"}
    if "dp" in mesh:
        s["inputs"] = [{"match": "*", "placements": {"dp": "S(0)"}}]
    if "fsdp" in mesh:
        s["preset"] = "fsdp"
    return s


def compare(got_path, want_path, tol=1e-5):
    from safetensors.torch import load_file
    got, want = load_file(str(got_path)), load_file(str(want_path))
    worst, bad = 0.0, []
    for name, w in want.items():
        if name not in got:
            bad.append(f"no output '{name}'")
            continue
        err = float((got[name].double() - w.double()).abs().max()) / max(1e-12, float(w.double().abs().max()))
        worst = max(worst, err)
        if err > tol:
            bad.append(f"{name} differs from eager by rel {err:.3g}")
    return worst, bad


def check_case(a, d, name, mesh, failures, rows):
    tag = name + "_" + "x".join(f"{k}{v}" for k, v in mesh.items())
    n = math.prod(mesh.values())
    sfile, prog, rep = d / f"{tag}.json", d / f"{tag}.spmd", d / f"{tag}.report.json"
    sfile.write_text(json.dumps(schema(mesh)))
    r = run([a.spmdc, "compile", d / name / "model.pt2", "--schema", sfile, "-o", prog, "--report", rep])
    if "note: context parallelism on 'cp'" not in r.stdout + r.stderr:
        failures.append(f"{tag}: the compile does not say it applied context parallelism")
    out = d / f"{tag}.out.safetensors"
    run([a.spmd_run, "-n", n, prog, "--inputs", d / name / "inputs.safetensors", "--output", out, "-q"])
    worst, bad = compare(out, d / name / "expected.safetensors")
    failures.extend(f"{tag}: {b}" for b in bad)
    report = json.loads(rep.read_text())
    kinds = collectives(report)
    cp = mesh["cp"]
    # Theory, per rank and step (the report counts what a rank sends, a ring
    # all-gather's (cp-1)/cp of the whole tensor): per layer, K and V
    # ([b, s, d] fp32, b the rank's batch) all-gathered once in the forward.
    b = B // mesh.get("dp", 1) // mesh.get("fsdp", 1)
    kv = LAYERS * 2 * b * S * D * 4 * (cp - 1) // cp
    if name.endswith("_infer"):  # and the logits, gathered over cp (then dp) for the replicated output
        dp = mesh.get("dp", 1)
        kv += b * S * VOCAB * 4 * (cp - 1) // cp + B * S * VOCAB * 4 * (dp - 1) // dp
    got = kinds.get("all_gather", [0, 0])
    if "fsdp" not in mesh and got[1] != kv:
        failures.append(f"{tag}: all_gather {got[1]} bytes per rank, theory {kv}")
    # The backward reduce-scatters dK and dV: the same bytes (train steps).
    got = kinds.get("reduce_scatter", [0, 0])
    if "fsdp" not in mesh and not name.endswith("_infer") and got[1] != kv:
        failures.append(f"{tag}: reduce_scatter {got[1]} bytes per rank, theory {kv}")
    rows.append({"case": tag, "ranks": n, "rel_err": worst, "collectives": kinds, "kv_theory": kv,
                 "peak_estimate": report["per_rank"]["peak_bytes_estimate"],
                 "saved_activations": report["per_rank"].get("saved_activation_bytes")})
    print(f"{tag:28} rel {worst:.2g}  " + "  ".join(f"{k} {c}/{by:,}" for k, (c, by) in sorted(kinds.items())),
          flush=True)


def check_uneven(a, d, failures):
    export("sdpa_causal", d / "uneven", seq=63)
    sfile = d / "uneven.json"
    sfile.write_text(json.dumps(schema({"cp": 2})))
    r = run([a.spmdc, "compile", d / "uneven" / "model.pt2", "--schema", sfile, "-o", d / "uneven.spmd"], ok=(2,))
    err = (r.stderr + r.stdout).strip().splitlines()
    if len(err) != 1 or "does not divide over 'cp'" not in err[0]:
        failures.append(f"sequence 63 over cp 2: want one line saying it does not divide, got {err}")
    else:
        print("uneven:", err[0])


def check_tp_cp(a, d, failures):
    """testdata's llama_train under llama_tp.json on a tp 2 x cp 2 mesh with
    context parallelism: eager's loss and gradients (its expected.safetensors)."""
    pt2 = ROOT / "testdata" / "pt2" / "llama_train"
    s = json.loads((ROOT / "schemas" / "examples" / "llama_tp.json").read_text())
    s["mesh"] = {"shape": [2, 2], "axes": ["tp", "cp"]}
    s["context_parallel"] = {"axis": "cp"}
    (d / "tpcp.json").write_text(json.dumps(s))
    run([a.spmdc, "compile", pt2 / "model.pt2", "--schema", d / "tpcp.json", "-o", d / "tpcp.spmd", "-q"])
    r = run([a.spmd_run, "-n", 4, d / "tpcp.spmd", "--inputs", pt2 / "inputs.safetensors", "--verify-against",
             pt2 / "expected.safetensors", "--rtol", "1e-5"], ok=(0, 1))
    if r.returncode != 0:
        failures.append(f"llama_train tp 2 x cp 2 differs from eager:\n{r.stdout}{r.stderr}")
    else:
        print("llama_train_tp2xcp2          matches eager (spmd-run --verify-against, rtol 1e-5)")


def memory(a, d, seq, failures):
    name = "sdpa_causal"
    export(name, d / "mem", seq=seq, batch=1)
    print(f"{'cp':>3} {'estimate peak':>14} {'saved activations':>18} {'measured peak per rank':>40}")
    out = []
    for cp in (1, 2, 4):
        sfile, prog, rep, prof = (d / f"mem{cp}.{x}" for x in ("json", "spmd", "report.json", "prof.json"))
        sfile.write_text(json.dumps(schema({"cp": cp}, cp=cp > 1) if cp > 1 else
                                    {"version": 1, "preset": "dp", "mesh": {"shape": [1], "axes": ["cp"]}}))
        run([a.spmdc, "compile", d / "mem" / "model.pt2", "--schema", sfile, "-o", prog, "--report", rep, "-q"])
        run([a.spmd_run, "-n", cp, prog, "--inputs", d / "mem" / "inputs.safetensors", "--profile", prof, "-q"])
        report = json.loads(rep.read_text())["per_rank"]
        ranks = json.loads(prof.read_text())["ranks"]
        peaks, rss = [r["peak_bytes"] for r in ranks], [r["rss_growth_bytes"] for r in ranks]
        out.append({"cp": cp, "peak_estimate": report["peak_bytes_estimate"],
                    "saved_activations": report.get("saved_activation_bytes"), "measured_peak": peaks,
                    "rss_growth": rss})
        print(f"{cp:>3} {report['peak_bytes_estimate']:>14,} {report.get('saved_activation_bytes', 0):>18,} "
              f"{' '.join(f'{p:,}' for p in peaks):>40}  RSS growth {' '.join(f'{x:,}' for x in rss)}",
              flush=True)
    base = max(out[0]["measured_peak"])
    for row in out[1:]:  # the [heads, seq/cp, seq] scores dominate: the peak falls about as 1/cp
        ratio = max(row["measured_peak"]) / base
        print(f"cp {row['cp']}: measured peak per rank {ratio:.3f}x cp 1's (1/cp = {1 / row['cp']:.3f})")
        if ratio > 1.25 / row["cp"]:
            failures.append(f"seq {seq} cp {row['cp']}: measured peak per rank {ratio:.3f}x cp 1's, "
                            f"more than 1.25 / cp")
    return out


def finish(json_path, rows, failures):
    """Writes the rows to json_path (when given), prints the failures; the exit status."""
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--quick", action="store_true", help="cp 2 and dp 2 x cp 2 only")
    ap.add_argument("--memory", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("cp_llama: skipped: transformers is not installed")
        return 77
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="spmdc-cp-") as tmp:
        d = Path(tmp)
        if a.memory:
            rows = memory(a, d, a.memory, failures)
        else:
            meshes = [{"cp": 2}, {"dp": 2, "cp": 2}] + ([] if a.quick else [{"cp": 4}])
            for name in ("hf_llama", "sdpa_causal", "sdpa_full", "eager_full", "fused_causal_infer",
                         "fused_full_infer"):
                export(name, d / name)
                for mesh in meshes + ([{"fsdp": 2, "cp": 2}] if name == "hf_llama" and not a.quick else []):
                    check_case(a, d, name, mesh, failures, rows)
            check_tp_cp(a, d, failures)
            check_uneven(a, d, failures)
    return finish(a.json, rows, failures)


if __name__ == "__main__":
    sys.exit(main())
