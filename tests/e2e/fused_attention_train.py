#!/usr/bin/env python3
"""Train steps with fused attention (spmdc_export --train --attention fused)
against eager PyTorch.

Usage:
    fused_attention_train.py SPMDC SPMD_RUN

Model: cp_llama.py's Llama (2 layers, hidden 64, 4 heads, RoPE, RMSNorm,
SwiGLU, F.scaled_dot_product_attention is_causal=True), batch 2, sequence
64, random weights (seed 0). Checked:

1. --attention fused keeps the fused CPU kernel: meta.json says
   "attention": "fused", the joint graph holds one
   aten._scaled_dot_product_flash_attention_for_cpu and one _backward per
   layer, no aten._softmax, and every backward reads its forward's
   logsumexp; the default (math) gives the softmax graph instead;
2. the guard can fail: the joint make_fx traces with torch's own Core ATen
   table (the fused forward decomposed, the fused backward fed the
   probabilities as its logsumexp) is flagged by attention.check, and its
   gradients differ from eager's;
3. spmdc compiles the fused step on 1 rank, dp 2, fsdp 2, Megatron TP 2
   (heads sharded: schemas/examples/llama_tp.json), cp 2 (context
   parallelism's all-gather form: the fused pair on sharded queries and
   gathered keys and values) and cp 2 with "rotate": "ring" (load-balanced
   ring attention in place of the fused pair), and spmd-run's loss and
   every gradient match eager's (rel 1e-5 on each tensor's max), and the
   parameters after one AdamW step (spmdc compile --optimizer adamw) match
   torch.optim.AdamW's (norm of the difference <= 1e-5 of the norm); the
   TP program runs the fused op on 2 of the 4 heads per rank; the
   compiler's peak per rank (--report, the fused backward's scratch
   included) is within 1% of spmd-run's measured one (--profile; 3% under
   all-gather context parallelism);
4. transformers' LlamaForCausalLM (SDPA, which passes its causal mask as
   attn_mask) exported fused (sequence 16), ring attention at cp 2: the
   mask is read as causal (the compile says load-balanced) and the loss
   and gradients match eager's (1e-5).

Exit 1 on any failure; 77 (a skip, which CI turns into a failure) when
everything else passed but transformers is missing for case 4.
"""
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))
import cp_llama  # noqa: E402  (the Llama, and compare())
from spmdc_export import attention, core  # noqa: E402

B, S, LAYERS, HEADS, D = 2, 64, cp_llama.LAYERS, cp_llama.HEADS, cp_llama.D
ADAMW = dict(lr=1e-2, betas=(0.85, 0.95), eps=1e-7, weight_decay=0.1)


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def model():
    torch.manual_seed(0)
    return cp_llama.Llama("sdpa", True, S)


def export(d, mode, failures):
    """Exports the step with `mode` (None: the default); checks its graph. Returns (module, inputs)."""
    m = model()
    ref = copy.deepcopy(m)
    tokens, labels = torch.randint(0, cp_llama.VOCAB, (B, S)), torch.randint(0, cp_llama.VOCAB, (B, S))
    ep = core.export_train_step(m, (tokens, labels), d, attention=mode)
    meta = json.loads((d / "meta.json").read_text())
    ops = meta["ops"]
    want = mode or "math"
    fused = ops.get(attention.FORWARD, 0), ops.get(attention.BACKWARD, 0)
    if meta["attention"] != want:
        failures.append(f"export {mode}: meta.json says attention {meta['attention']}, want {want}")
    if want == "fused" and (fused != (LAYERS, LAYERS) or "aten._softmax.default" in ops):
        failures.append(f"fused export: {fused} fused forward/backward ops and "
                        f"{ops.get('aten._softmax.default', 0)} softmax, want {LAYERS} each and none")
    if want == "math" and (fused != (0, 0) or ops.get("aten._softmax.default", 0) != LAYERS):
        failures.append(f"math export: fused ops {fused}, softmax {ops.get('aten._softmax.default', 0)}")
    if want == "fused" and attention.check(ep.graph) is not None:
        failures.append(f"fused export: {attention.check(ep.graph)}")
    print(f"export {want:5}: {meta['num_nodes']} nodes, fused forward/backward {fused}", flush=True)
    return ref, (tokens, labels)


def check_guard(failures):
    """torch's own table gives the wrong-gradient joint; attention.check must flag it."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.func import functional_call
    m = model()
    tokens, labels = torch.randint(0, cp_llama.VOCAB, (B, 16)), torch.randint(0, cp_llama.VOCAB, (B, 16))
    params = dict(m.named_parameters())

    def step(p, x, y):
        loss = functional_call(m, p, (x, y))
        return (loss, *torch.autograd.grad(loss, list(p.values())))

    broken = make_fx(step, decomposition_table=core_aten_decompositions())(params, tokens, labels)
    fixed = make_fx(step, decomposition_table=attention.decompositions("fused"))(params, tokens, labels)
    eager = step(params, tokens, labels)
    errs = {}
    for name, gm in (("core table", broken), ("fused table", fixed)):
        got = gm(params, tokens, labels)
        errs[name] = max(float((g - e).detach().abs().max() / e.detach().abs().max())
                         for g, e in zip(got[1:], eager[1:]))
    reason = attention.check(broken.graph)
    has_bwd = any(n.target is torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
                  for n in broken.graph.nodes)
    print(f"guard: torch's table {'has' if has_bwd else 'lacks'} the fused backward, gradient rel err "
          f"{errs['core table']:.3g}, flagged: {reason is not None}; fused table err {errs['fused table']:.3g}")
    if has_bwd and (reason is None or errs["core table"] < 1e-3):
        failures.append(f"guard: the core-table joint (grad err {errs['core table']:.3g}) was not flagged: {reason}")
    if attention.check(fixed.graph) is not None or errs["fused table"] > 1e-5:
        failures.append(f"guard: the fused-table joint is flagged or wrong (err {errs['fused table']:.3g})")


def adamw_reference(ref, inputs):
    m = copy.deepcopy(ref)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), **ADAMW)
    opt.zero_grad()
    m(*inputs).backward()
    opt.step()
    return {f"parameter.{k}": p.detach().clone() for k, p in m.named_parameters()}


def layouts(d):
    """name -> (schema file, mesh, workers)."""
    def write(name, s):
        path = d / f"{name}.json"
        path.write_text(json.dumps(s))
        return path
    tp = json.loads((ROOT / "schemas" / "examples" / "llama_tp.json").read_text())
    tp["mesh"]["shape"] = [2]
    ring = cp_llama.schema({"cp": 2})
    ring["context_parallel"]["rotate"] = "ring"  # load-balanced (the default)
    return {
        "one": (write("one", {"version": 1, "preset": "dp", "mesh": {"shape": [1], "axes": ["dp"]}}), "1", 1),
        "dp": (write("dp", {"version": 1, "preset": "dp", "mesh": {"shape": [2], "axes": ["dp"]}}), "2", 2),
        "fsdp": (write("fsdp", {"version": 1, "preset": "fsdp", "mesh": {"shape": [2], "axes": ["fsdp"]}}), "2", 2),
        "tp": (write("tp", tp), "2", 2),
        "cp": (write("cp", cp_llama.schema({"cp": 2})), "2", 2),
        "cp_ring": (write("cp_ring", ring), "2", 2),
    }


def check_layout(a, d, name, lay, want_params, failures):
    sfile, mesh, n = lay
    case = d / "fused"
    prog, out = d / f"{name}.spmd", d / f"{name}.out.safetensors"
    rep, prof = d / f"{name}.report.json", d / f"{name}.prof.json"
    run([a.spmdc, "compile", case / "model.pt2", "--schema", sfile, "-o", prog, "-q", "--report", rep])
    run([a.spmd_run, "-n", n, prog, "--inputs", case / "inputs.safetensors", "--output", out, "-q",
         "--profile", prof])
    worst, bad = cp_llama.compare(out, case / "expected.safetensors", tol=1e-5)
    failures.extend(f"{name}: {b}" for b in bad)
    # The compiler's peak (the fused backward's scratch included) against spmd-run's measured one.
    predicted = json.loads(rep.read_text())["per_rank"]["peak_bytes_estimate"]
    measured = max(r["peak_bytes"] for r in json.loads(prof.read_text())["ranks"])
    # 1% everywhere but the all-gather context parallelism, whose estimate is
    # 2.2% short of the measured peak for a reason not yet found (not attention's scratch).
    tol = 0.03 if name == "cp" else 0.01
    if abs(measured - predicted) > tol * measured:
        failures.append(f"{name}: predicted peak {predicted:,} B, measured {measured:,} B "
                        f"(more than {tol:.0%} apart)")
    aprog, aout = d / f"{name}_adamw.spmd", d / f"{name}_adamw.out.safetensors"
    run([a.spmdc, "compile", case / "model.pt2", "--schema", sfile, "-o", aprog, "-q", "--optimizer", "adamw",
         "--lr", ADAMW["lr"], "--betas", *ADAMW["betas"], "--eps", ADAMW["eps"], "--weight-decay",
         ADAMW["weight_decay"]])
    run([a.spmd_run, "-n", n, aprog, "--inputs", case / "inputs.safetensors", "--output", aout, "-q"])
    from safetensors.torch import load_file
    got = load_file(str(aout))
    worst_p = 0.0
    for k, w in want_params.items():
        g = got.get(k)
        if g is None:
            failures.append(f"{name} adamw: no {k} in spmd-run's outputs")
            continue
        err = float((g.double() - w.double()).norm() / w.double().norm())
        worst_p = max(worst_p, err)
        if err > 1e-5:
            failures.append(f"{name} adamw: {k} differs from torch.optim.AdamW's by rel {err:.3g}")
    dump = run([a.spmdc, "dump", prog]).stdout
    fused = sum(1 for line in dump.splitlines() if "_scaled_dot_product_flash_attention_for_cpu" in line)
    rings = sum(1 for line in dump.splitlines() if "= spmd.ring_attention" in line)
    want = (0, 2 * LAYERS) if name == "cp_ring" else (2 * LAYERS, 0)  # the ring replaces the fused pair
    if (fused, rings) != want:
        failures.append(f"{name}: the compiled program holds {fused} fused attention and {rings} ring attention "
                        f"ops, want {want[0]} and {want[1]}")
    if name == "tp":  # heads sharded: q is [batch, heads/2, seq, head dim] on each rank
        local = f"f32[{B}, {HEADS // 2}, {S}, {D // HEADS}]"
        if not any("_scaled_dot_product_flash_attention_for_cpu.default" in line and line.startswith(f"%") and
                   local in line for line in dump.splitlines()):
            failures.append(f"tp: no fused attention over {local} (the local heads) in the program")
    print(f"{name:5} ({n} rank{'s' if n > 1 else ''}): loss+grads rel err {worst:.2g}, peak {measured:,} B "
          f"(predicted {predicted / measured - 1:+.1%}), "
          f"AdamW params rel err {worst_p:.2g}, {fused} fused / {rings} ring attention ops", flush=True)


def check_hf_ring(a, d, failures):
    """transformers' LlamaForCausalLM (SDPA, its causal mask passed as attn_mask) exported fused: ring
    attention at cp 2 must read the mask as causal (load-balanced) and match eager."""
    from spmdc_export import hf
    torch.manual_seed(0)
    m = hf.build("llama", train=True, layers=LAYERS, hidden=D, heads=HEADS, vocab=cp_llama.VOCAB, batch=B, seq=16)
    case = d / "hf"
    core.export_train_step(m.module, m.inputs, case, loss_fn=m.loss_fn, targets=m.targets, strict=False,
                           attention="fused")
    if json.loads((case / "meta.json").read_text())["fused_attentions"] != LAYERS:
        failures.append("hf llama: the --attention fused export holds no fused attention")
    ring = cp_llama.schema({"cp": 2})
    ring["context_parallel"]["rotate"] = "ring"
    (d / "hf_ring.json").write_text(json.dumps(ring))
    r = run([a.spmdc, "compile", case / "model.pt2", "--schema", d / "hf_ring.json", "-o", d / "hf_ring.spmd"])
    if "load-balanced" not in r.stdout + r.stderr:
        failures.append(f"hf llama ring: the compile does not say load-balanced (the causal mask not read):\n"
                        f"{r.stdout}{r.stderr}")
    out = d / "hf_ring.out.safetensors"
    run([a.spmd_run, "-n", 2, d / "hf_ring.spmd", "--inputs", case / "inputs.safetensors", "--output", out, "-q"])
    worst, bad = cp_llama.compare(out, case / "expected.safetensors", tol=1e-5)
    failures.extend(f"hf llama ring: {b}" for b in bad)
    print(f"hf llama (SDPA, fused) ring cp 2, load-balanced: loss+grads rel err {worst:.2g}", flush=True)


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    a = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-fused-") as tmp:
        d = Path(tmp)
        ref, inputs = export(d / "fused", "fused", failures)
        export(d / "math", None, failures)
        check_guard(failures)
        want_params = adamw_reference(ref, inputs)
        for name, lay in layouts(d).items():
            try:
                check_layout(a, d, name, lay, want_params, failures)
            except RuntimeError as e:
                failures.append(f"{name}: {e}")
        try:
            import transformers  # noqa: F401
        except ImportError:
            transformers = None
        try:
            if transformers is not None:
                check_hf_ring(a, d, failures)
        except RuntimeError as e:
            failures.append(f"hf llama ring: {e}")
    for f in failures:
        print("FAIL:", f)
    if not failures and transformers is None:
        print("fused_attention_train: the Hugging Face case skipped: transformers is not installed")
        return 77
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
