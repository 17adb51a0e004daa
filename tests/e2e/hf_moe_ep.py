#!/usr/bin/env python3
"""Hugging Face MoE models under expert parallelism, against the original models in eager PyTorch.

Usage:
    hf_moe_ep.py SPMDC SPMD_RUN [--cases ep2,ep4,dp_ep,ep_fsdp] [--families mixtral,qwen2_moe] [--steps 2]
                 [--router random|one_expert] [--parts rewrite,train,inference]

1. The rewrite. For Mixtral, Qwen2-MoE (its shared expert; norm_topk_prob
   both ways), Qwen3-MoE, OLMoE and DeepSeek-V3 (tiny random configs from
   spmdc_export.hf, 2 layers, 4 or 8 experts, fp32, train mode),
   moe.static_routing(experts_op=True) must stack every MoE block's experts
   into the experts op, and the rewritten model must give the original
   model's logits, cross-entropy loss and gradients: each stacked gradient
   (`<block>.experts.w1` [E, H, D]) against the original experts' own
   (`<block>.experts.<e>.w1.weight` or `.gate_proj.weight`, zeros for an
   expert no token reached), every other parameter by its name. For
   Mixtral and Qwen2-MoE also one block whose router sends every token to
   expert 0 and none to the last (outputs, input and parameter gradients).
   The undo must give the model its experts back.
2. The export and the run. For Mixtral and Qwen2-MoE, `python -m
   spmdc_export --hf NAME --train` and the inference export must say they
   stacked the experts; `spmdc compile` places the glob the note
   names (e.g. "model.layers.*.mlp.experts.*") S(0) on ep; spmd-run runs

       ep2     mesh 2 (ep): tokens and experts split over ep, 2 workers
       ep4     mesh 4 (ep): one expert of Mixtral's / Qwen2-MoE's 4 per rank, 4 workers
       dp_ep   mesh 2x2 (dp, ep): tokens over both, experts over ep, 4 workers
       ep_fsdp mesh 2x2 (fsdp, ep): tokens over both, experts over ep and
               their FFN dim over fsdp, every other weight over fsdp
               (gathered for use, gradients reduce-scattered), 4 workers
       ep_tp   mesh 2x2 (ep, tp): tokens over ep, replicated over tp; the
               experts over ep and their FFN dim over tp (w1, w3 S(1), w2
               S(2): torchtitan's expert TP), attention under Megatron TP on
               tp (q_proj column-wise, o_proj row-wise; k_proj and v_proj
               replicated: the tiny configs have one key/value head, fewer
               than tp, as Megatron replicates them), 4 workers; its
               --report's tp all-reduces of [tokens, hidden] must equal
               Megatron's formula (after attention and after the experts in
               the forward, each block's input gradient in the backward), the
               only other tp collectives being the routing weights' gradient
               all-reduce (one [tokens, top-k] per layer) and all-gathers into
               attention's batched matmuls (printed)

   and must match the original HF model in eager PyTorch: the loss and every
   gradient of one step, the losses of --steps AdamW steps and the
   parameters after them (torch.optim.AdamW, lr 1e-3), the inference
   logits (that program exported by spmdc_export.export in process); and
   spmd-run's tokens per expert the original routing's counts (summed over
   the MoE layers, as its summary does). --router one_expert zeroes every
   MoE block's router weights before the export (in process, as the CLI's
   --hf does): every router logit ties, so every token's top-2 are the same
   two experts (torch.topk's choice among equal values, the same in eager and
   in spmd-run; on CPU experts 2 and 3): each of them gets every token, the
   others none, so under ep 4 ranks 0 and 1 receive no token (checked on the
   original routing's counts). AdamW's reference gives a parameter no token
   reached a zero gradient (eager_adamw). The programs must hold the
   spmd.moe_experts exchange. Tolerance: ||a - b|| <= 1e-5 ||b|| + 1e-6
   sqrt(n) for tensors, |a - b| <= 1e-5 max(1, |b|) for losses.

Exit 0 when everything matches, 1 otherwise (also without transformers:
nothing is skipped).
"""
import argparse
import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
TOL, ATOL = 1e-5, 1e-6
FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3")
# torch's default lr: at 1e-2 AdamW's normalized step turns the float32 noise of Qwen2-MoE's small key-bias
# gradients (RoPE rotates the bias) into a parameter difference just above 1e-5
ADAMW = dict(lr=1e-3, betas=(0.85, 0.95), eps=1e-7, weight_decay=0.1)
SIZE = dict(layers=2, hidden=32, heads=2)  # the CLI's --layers 2 --hidden 32 --heads 2; batch 4, seq 8
BATCH, SEQ = 4, 8
# An expert's stacked name -> its own projections: (Mixtral's, the others')
PROJ = {"w1": ("w1", "gate_proj"), "w2": ("w2", "down_proj"), "w3": ("w3", "up_proj")}
EXPERT = re.compile(r"^((?:.*\.)?experts)\.(\d+)\.(\w+)\.weight$")


def close(what, got, want, bad):
    """Appends to bad unless got is within the tolerance of want; returns the relative error."""
    import torch
    if got is None:
        bad.append(f"{what}: missing")
        return 0.0
    if tuple(got.shape) != tuple(want.shape):
        bad.append(f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        return 0.0
    got, want = got.double(), want.double()
    diff = float((got - want).norm())
    bound = TOL * float(want.norm()) + ATOL * math.sqrt(want.numel())
    if not diff <= bound or not bool(torch.isfinite(got).all()):
        bad.append(f"{what}: differs from the original by {diff:.3g} (bound {bound:.3g})")
    return diff / max(float(want.norm()), 1e-30)


def stack_like(tensors, names):
    """{name: tensor} of the original model (per-expert weights, or their
    gradients, or their AdamW results) in the rewritten model's names: each
    <block>.experts.<e>.<proj>.weight stacked into <block>.experts.w1/w2/w3."""
    import torch
    out, groups = {}, {}
    for k, v in tensors.items():
        m = EXPERT.match(k)
        if not m:
            out[k] = v
            continue
        stacked = next(s for s, own in PROJ.items() if m.group(3) in own)
        groups.setdefault(f"{m.group(1)}.{stacked}", {})[int(m.group(2))] = v
    for k, per in groups.items():
        out[k] = torch.stack([per[e] for e in range(len(per))])
    missing = sorted(set(names) - set(out))
    if missing:
        raise AssertionError(f"no original tensor for {', '.join(missing[:3])}")
    return out


def build(name, seed=0, **kw):
    """spmdc_export.hf's model `name` (train), as the CLI builds it with seed 0."""
    import torch
    from spmdc_export import hf
    torch.manual_seed(seed)
    return hf.build(name, train=True, batch=BATCH, seq=SEQ, **SIZE, **kw)


def grads(module, ids, labels, loss_fn):
    """(logits, loss, {name: grad}) of one train-mode step; zeros for a parameter no token reached."""
    import torch
    module.zero_grad(set_to_none=True)
    logits = module.train()(ids)
    loss = loss_fn(logits, labels)
    loss.backward()
    g = {k: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
         for k, p in module.named_parameters()}
    module.zero_grad(set_to_none=True)
    return logits.detach(), loss.detach(), g


def block_step(block, x):
    """(outputs, input gradient, {name: grad}) of an MoE block on x, train mode, a fixed random loss."""
    import torch
    block.zero_grad(set_to_none=True)
    xi = x.detach().clone().requires_grad_(True)
    out = block.train()(xi)
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator().manual_seed(1234)
    sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outs).backward()
    g = {k: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
         for k, p in block.named_parameters()}
    return [o.detach() for o in outs], xi.grad, g


def check_one_expert(name, block, hidden, bad):
    """One MoE block whose router sends every token to expert 0 and none to
    the last expert: rewritten against the original."""
    import torch
    from spmdc_export import moe
    original = copy.deepcopy(block)
    x = torch.randn(BATCH, SEQ, hidden)
    with torch.no_grad():
        x[..., 0] = 3.0
        w = original.gate.weight
        w[:, 0] = 0.0
        w[0, 0] = 10.0
        w[-1, 0] = -10.0
    top = torch.topk(torch.softmax(original.gate(x.reshape(-1, hidden)), -1), original.top_k, -1).indices
    if not bool((top == 0).any(-1).all()) or bool((top == w.shape[0] - 1).any()):
        bad.append(f"{name} (one_expert): the forced routing did not take: {top.tolist()}")
    rewritten = copy.deepcopy(original)
    undo = moe.static_routing(rewritten, lambda msg: None, experts_op=True)
    tag = f"{name} block (one_expert)"
    try:
        if not isinstance(rewritten.experts, moe.StackedExperts):
            bad.append(f"{tag}: not stacked")
            return
        want, got = block_step(original, x), block_step(rewritten, x)
    finally:
        undo()
    worst = 0.0
    for i, (g, w) in enumerate(zip(got[0], want[0])):
        worst = max(worst, close(f"{tag} output {i}", g, w, bad))
    worst = max(worst, close(f"{tag} input gradient", got[1], want[1], bad))
    for k, w in stack_like(want[2], got[2]).items():
        worst = max(worst, close(f"{tag} grad {k}", got[2].get(k), w, bad))
    print(f"rewrite {name:11} {'one_expert':14} block outputs, input and {len(got[2])} parameter gradients: "
          f"worst rel err {worst:.2g}", flush=True)


def check_rewrite(name, variant, bad):
    """Part 1 for one family and one variant ("random", "one_expert", "norm_topk_prob")."""
    from spmdc_export import moe
    m = build(name)
    original = m.module
    if variant == "one_expert":
        block = next(b for b in original.modules() if moe._replacement(b) is not None)
        return check_one_expert(name, block, original.config.hidden_size, bad)
    if variant == "norm_topk_prob":
        for b in original.modules():
            if hasattr(b, "norm_topk_prob") and hasattr(b, "experts"):
                b.norm_topk_prob = not b.norm_topk_prob
    model = copy.deepcopy(original)
    names_before = [k for k, _ in model.named_parameters()]
    notes = []
    undo = moe.static_routing(model, notes.append, experts_op=True)
    tag = f"{name} ({variant})"
    try:
        stacks = [b for b in model.modules() if isinstance(getattr(b, "experts", None), moe.StackedExperts)]
        moe_blocks = [b for b in original.modules() if moe._replacement(b) is not None]
        if not moe_blocks or len(stacks) != len(moe_blocks):
            bad.append(f"{tag}: {len(stacks)} of {len(moe_blocks)} MoE blocks stacked; notes {notes}")
            return
        ids, labels = m.inputs[0], m.targets[0]
        want_logits, want_loss, want = grads(original, ids, labels, m.loss_fn)
        got_logits, got_loss, got = grads(model, ids, labels, m.loss_fn)
        worst = close(f"{tag} logits", got_logits, want_logits, bad)
        worst = max(worst, close(f"{tag} loss", got_loss, want_loss, bad))
        for k, w in stack_like(want, got).items():
            worst = max(worst, close(f"{tag} grad {k}", got.get(k), w, bad))
    finally:
        undo()
    if [k for k, _ in model.named_parameters()] != names_before:
        bad.append(f"{tag}: the undo did not give the model its experts back")
    print(f"rewrite {name:11} {variant:14} {len(stacks)} blocks stacked; logits, loss, {len(got)} gradients: "
          f"worst rel err {worst:.2g}", flush=True)


def routing_counts(module, ids):
    """Tokens per expert of the original model's routing on ids, summed over its MoE layers."""
    import torch
    from spmdc_export import moe
    counts, hooks = [], []

    def hook(block):
        def f(mod, args, out):
            if isinstance(out, tuple):  # DeepSeek-V3's gate routes itself: (top-k indices, weights)
                top, experts = out[0].reshape(-1), mod.weight.shape[0]
            else:  # the others' gate is a linear: router logits, softmax and top-k in the block
                top = torch.topk(torch.softmax(out.float(), dim=-1), block.top_k, dim=-1).indices.reshape(-1)
                experts = out.shape[-1]
            counts.append(torch.bincount(top, minlength=experts).tolist())
        return f
    for b in module.modules():
        if moe._replacement(b) is not None:
            hooks.append(b.gate.register_forward_hook(hook(b)))
    try:
        with torch.no_grad():
            module.eval()(ids)
    finally:
        for h in hooks:
            h.remove()
    return [sum(c[e] for c in counts) for e in range(len(counts[0]))]


# ----------------------------------------------------------------- export, compile, run


def run(cmd, ok=(0,), env=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode not in ok:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return r


def stacked_glob(name, said):
    """The glob of the stacked experts the export's note names."""
    m = re.search(r"stacked into the experts op.*?place \"([^\"]+)\" S\(0\) on an ep axis", said)
    if not m:
        raise RuntimeError(f"--hf {name}: the export does not say it stacked the experts: {said!r}")
    return m.group(1)


def export_cli(d, name):
    """Exports `python -m spmdc_export --hf name --train` into d; returns the glob its note names."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    out = run([sys.executable, "-m", "spmdc_export", "--hf", name, "--layers", SIZE["layers"], "--hidden",
               SIZE["hidden"], "--heads", SIZE["heads"], "--batch", BATCH, "--seq", SEQ, "--train", "-o", d], env=env)
    return stacked_glob(name, out.stdout + out.stderr)


def export_inference(d, name):
    """Exports the inference program of `name` with spmdc_export.export (in this process, as the CLI's
    --hf name does); returns (the glob its note names, the input ids)."""
    from spmdc_export import core
    m = build(name)
    notes = []
    core.export(m.module, m.inputs, str(d), strict=False, log=notes.append)
    return stacked_glob(name, "\n".join(notes)), m.inputs[0]


def schema(d, case, glob):
    """The placement schema of `case` (see the module's doc) and its worker count."""
    params = [{"match": glob, "placements": {"ep": "S(0)"}}]
    if case in ("ep2", "ep4"):
        n = int(case[2:])
        mesh, batch = {"shape": [n], "axes": ["ep"]}, {"ep": "S(0)"}
    elif case in ("dp_ep", "ep_fsdp"):
        axis = case.replace("_", "").replace("ep", "") or "dp"
        mesh, batch = {"shape": [2, 2], "axes": [axis, "ep"]}, {axis: "S(0)", "ep": "S(0)"}
        if axis == "fsdp":
            params = [{"match": glob, "placements": {"ep": "S(0)", "fsdp": "S(1)"}, "gather": ["fsdp"]},
                      {"match": "*.weight", "placements": {"fsdp": "S(0)"}, "gather": True},
                      {"match": "*.bias", "placements": {"fsdp": "S(0)"}, "gather": True, "optional": True}]
    elif case == "ep_tp":
        stem = glob[:-1]  # "model.layers.*.block_sparse_moe.experts."
        mesh, batch = {"shape": [2, 2], "axes": ["ep", "tp"]}, {"ep": "S(0)"}
        params = [{"match": stem + "w[13]", "placements": {"ep": "S(0)", "tp": "S(1)"}},
                  {"match": stem + "w2", "placements": {"ep": "S(0)", "tp": "S(2)"}},
                  {"match": "*self_attn.q_proj.weight", "placements": {"tp": "S(0)"}},
                  {"match": "*self_attn.q_proj.bias", "placements": {"tp": "S(0)"}, "optional": True},
                  {"match": "*self_attn.o_proj.weight", "placements": {"tp": "S(1)"}}]
    else:
        raise RuntimeError(f"unknown case {case!r} (ep2, ep4, dp_ep, ep_fsdp, ep_tp)")
    s = {"version": 1, "mesh": mesh, "params": params,
         "inputs": [{"match": "*", "placements": batch}], "outputs": "replicate"}
    path = d / f"{case}.json"
    path.write_text(json.dumps(s))
    return path, 2 if case == "ep2" else 4


def zero_routers(module):
    """--router one_expert: every MoE block's router weights zero (see the module's doc)."""
    import torch
    from spmdc_export import moe
    blocks = [b for b in module.modules() if moe._replacement(b) is not None]
    with torch.no_grad():
        for b in blocks:
            b.gate.weight.zero_()
    return len(blocks)


def export_train(d, name, router):
    """The train step of `name` exported into d: by the CLI (random routers), or in process with
    zeroed routers; returns the glob the export's note names."""
    if router == "random":
        return export_cli(d, name)
    from spmdc_export import core
    m = build(name)
    zero_routers(m.module)
    notes = []
    core.export_train_step(m.module, m.inputs, str(d), loss_fn=m.loss_fn, targets=m.targets, strict=False,
                           untie=True, log=notes.append)
    return stacked_glob(name, "\n".join(notes))


def compile_run(a, d, tag, schema_path, workers, extra=(), run_extra=()):
    """Compiles d/model.pt2 (its --report d/<tag>.report.json) and runs it; returns (outputs, spmd-run's
    stdout)."""
    from safetensors.torch import load_file
    prog, out = d / f"{tag}.spmd", d / f"{tag}.out.safetensors"
    run([a.spmdc, "compile", d / "model.pt2", "--schema", schema_path, "-o", prog, "-q", "--report",
         d / f"{tag}.report.json", *extra])
    dump = run([a.spmdc, "dump", prog]).stdout
    if "spmd.moe_experts(" not in dump:
        raise RuntimeError(f"{tag}: the program has no spmd.moe_experts exchange (experts not split over ep)")
    r = run([a.spmd_run, "-n", workers, prog, "--inputs", d / "inputs.safetensors", "--output", out, *run_extra])
    return load_file(str(out)), r.stdout


def check_tp_bytes(tag, report, bad):
    """ep_tp: --report's tp collectives against Megatron's formula (see the module's doc): the all-reduces of
    [tokens, hidden] must be Megatron's, the others the routing weights' gradients ([tokens, top-k]) and the
    whole key/value head's gradients; attention's bmm operands (batch and heads merged, split over ep and tp)
    must not be all-gathered."""
    r = json.loads(Path(report).read_text())
    tp = [c for c in r["collectives"] if c["mesh_axis"] == "tp"]
    tokens, hidden, layers, ranks = BATCH * SEQ // 2, SIZE["hidden"], SIZE["layers"], 2
    one = 2 * (ranks - 1) * tokens * hidden * 4 // ranks  # a ring all-reduce of [tokens, hidden] fp32
    want = layers * 4 * one  # attention and experts, forward and backward, per layer
    numel = lambda c: math.prod(c["shape"])  # noqa: E731
    act = sum(c["bytes_per_rank"] for c in tp if c["kind"] == "all_reduce" and numel(c) == tokens * hidden)
    routing = [c for c in tp if c["kind"] == "all_reduce" and c["shape"] == [tokens, 2]]
    gathers = [c for c in tp if c["kind"] == "all_gather" and "bmm" in c["reason"]]
    # The tiny configs have one key/value head, kept whole on tp (only q_proj is split): the backward sums
    # its key and value gradients over tp, as Megatron does for kv heads fewer than tp ranks.
    head = SIZE["hidden"] // SIZE["heads"]
    kv = [c for c in tp if c["kind"] == "all_reduce" and c["shape"] in ([BATCH // 2, 1, SEQ, head], [tokens, head])]
    other = [c for c in tp if c not in routing and c not in gathers and c not in kv and
             not (c["kind"] == "all_reduce" and numel(c) == tokens * hidden)]
    got = sum(c["bytes_per_rank"] for c in tp)
    print(f"{tag}: tp collectives {got:,} B per rank: all-reduces of [{tokens}, {hidden}] {act:,} B (Megatron's "
          f"formula {want:,} B), routing weights' gradients {len(routing)} x [{tokens}, 2] "
          f"{sum(c['bytes_per_rank'] for c in routing):,} B, attention all-gathers {len(gathers)} x "
          f"{gathers[0]['shape'] if gathers else []} {sum(c['bytes_per_rank'] for c in gathers):,} B, key/value "
          f"gradients {len(kv)} {sum(c['bytes_per_rank'] for c in kv):,} B", flush=True)
    if gathers:
        bad.append(f"{tag}: {len(gathers)} all-gathers of attention's bmm operands on tp (want none)")
    if act != want or len(routing) != layers or other:
        bad.append(f"{tag}: tp all-reduces of the tokens {act:,} B per rank, Megatron's formula {want:,} B; "
                   f"{len(routing)} routing-weight gradients for {layers} layers; unexpected "
                   f"{[(c['kind'], c['shape']) for c in other]}")


def check_tokens(tag, summary, want, bad):
    line = next((ln for ln in summary.splitlines() if "tokens per expert per step" in ln), "")
    got = [int(float(v)) for v in line.partition(": [")[2].rstrip("]").split(",") if v.strip()]
    if got != want:
        bad.append(f"{tag}: spmd-run's tokens per expert {got or line!r}, the original model routes {want}")
    print(f"{tag}: {line.strip()}", flush=True)


def eager_adamw(module, ids, labels, loss_fn, steps):
    """Losses of `steps` torch.optim.AdamW steps of the original model and its parameters after them.

    A parameter no token reached (an unrouted expert's projections: .grad None, which torch.optim.AdamW
    skips) gets a zero gradient: spmdc's stacked experts, like torchtitan's GroupedExperts, always have one,
    so AdamW decays such an expert's weights and moments (docs/DECISIONS.md)."""
    import torch
    m = copy.deepcopy(module).train()
    opt = torch.optim.AdamW(m.parameters(), **ADAMW)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(m(ids), labels)
        loss.backward()
        for p in m.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        losses.append(loss.item())
        opt.step()
    return losses, {k: p.detach().clone() for k, p in m.named_parameters()}


def check_train(a, work, name, cases, bad):
    """Part 2, the train step: one step's loss and gradients, then AdamW steps, per case."""
    from safetensors.torch import load_file
    d = work / f"{name}_train_{a.router}"
    glob = export_train(d, name, a.router)
    m = build(name)
    if a.router == "one_expert" and not zero_routers(m.module):
        bad.append(f"{name}: no MoE block to zero the router of")
    inputs = load_file(str(d / "inputs.safetensors"))
    ids, labels = inputs["input.0"], inputs["input.1"]
    _, loss, want = grads(m.module, ids, labels, m.loss_fn)
    want_tokens = routing_counts(m.module, ids)
    if a.router == "one_expert":
        tokens = ids.numel() * SIZE["layers"]
        if sorted(want_tokens)[-2:] != [tokens, tokens] or sum(want_tokens) != 2 * tokens:
            bad.append(f"{name}: the zeroed routers do not send every token to the same two experts: "
                       f"{want_tokens} ({tokens} tokens over the layers)")
    want_losses, want_params = eager_adamw(m.module, ids, labels, m.loss_fn, a.steps)
    for case in cases:
        path, workers = schema(d, case, glob)
        tag = f"{name} train {case}"
        got, summary = compile_run(a, d, f"{case}_grad", path, workers)
        check_tokens(tag, summary, want_tokens, bad)
        if case == "ep_tp":
            check_tp_bytes(tag, d / f"{case}_grad.report.json", bad)
        names = [k[5:] for k in got if k.startswith("grad.")]
        worst = close(f"{tag} loss", got.get("loss"), loss, bad)
        for k, w in stack_like(want, names).items():
            worst = max(worst, close(f"{tag} grad.{k}", got.get(f"grad.{k}"), w, bad))
        log = d / f"{case}.log"
        got, _ = compile_run(a, d, f"{case}_adamw", path, workers,
                             ["--optimizer", "adamw", "--lr", ADAMW["lr"], "--betas", *ADAMW["betas"], "--eps",
                              ADAMW["eps"], "--weight-decay", ADAMW["weight_decay"]],
                             ["--steps", a.steps, "--loss-log", log, "-q"])
        losses = [json.loads(ln)["loss"] for ln in log.read_text().splitlines()]
        if len(losses) != a.steps or any(not abs(g - w) <= TOL * max(1.0, abs(w))
                                         for g, w in zip(losses, want_losses)):
            bad.append(f"{tag}: AdamW losses {losses}, torch.optim.AdamW {want_losses}")
        for k, w in stack_like(want_params, names).items():
            worst = max(worst, close(f"{tag} parameter.{k} after AdamW", got.get(f"parameter.{k}"), w, bad))
        print(f"{tag}: loss {float(loss):.5f}, {len(names)} gradients, {a.steps} AdamW steps "
              f"({losses[0]:.5f} -> {losses[-1]:.5f}) and the parameters after them: worst rel err {worst:.2g}",
              flush=True)


def check_inference(a, work, name, cases, bad):
    """Part 2, inference: the logits per case against the original model's (eval, no_grad)."""
    import torch
    d = work / f"{name}_infer"
    glob, ids = export_inference(d, name)
    m = build(name)
    with torch.no_grad():
        want = m.module.eval()(ids)
    for case in cases:
        path, workers = schema(d, case, glob)
        got, _ = compile_run(a, d, f"{case}_infer", path, workers)
        err = close(f"{name} inference {case} logits", got.get("output.0"), want, bad)
        print(f"{name} inference {case}: logits {list(want.shape)}, rel err {err:.2g}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--cases", default="ep2")
    ap.add_argument("--families", default="mixtral,qwen2_moe")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--router", choices=("random", "one_expert"), default="random")
    ap.add_argument("--parts", default="rewrite,train,inference",
                    help="which checks run: rewrite (part 1), train and inference (part 2)")
    a = ap.parse_args()
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"hf_moe_ep: FAIL: {e} (run scripts/setup.sh; the reference is transformers' own models)")
        return 1
    t0 = time.time()
    bad = []
    parts = a.parts.split(",")
    for name in FAMILIES if "rewrite" in parts else ():
        variants = ["random"] + (["one_expert"] if name in ("mixtral", "qwen2_moe") else []) + \
            (["norm_topk_prob"] if name == "qwen2_moe" else [])
        for variant in variants:
            try:
                check_rewrite(name, variant, bad)
            except (AssertionError, RuntimeError) as e:
                bad.append(f"rewrite {name} ({variant}): {e}")
    cases = a.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="spmdc-hfmoe-") as tmp:
        for name in a.families.split(","):
            for check in [c for p, c in (("train", check_train), ("inference", check_inference)) if p in parts]:
                try:
                    check(a, Path(tmp), name, cases, bad)
                except (AssertionError, RuntimeError) as e:
                    bad.append(f"{name} {check.__name__}: {e}")
    for f in bad[:20]:
        print("FAIL:", f)
    print(f"hf_moe_ep: {len(bad)} failures, {time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
