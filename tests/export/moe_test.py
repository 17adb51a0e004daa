"""transformers 4.x MoE blocks export through python/spmdc_export/moe.py's
dense dispatch, which computes what the original blocks compute.

Per family (mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v3; tiny random
configs, 2 layers, hidden 64, 4 or 8 experts), in fp32:

* each MoE block with the replacement against a copy without it, train
  mode: outputs, router logits, and the gradients of the input and of every
  parameter (an expert that gets no token has no gradient in the original:
  compared as zeros), for a random router, a load-imbalanced one (every
  token routed to expert 0, none to the last expert: checked on the
  original's own routing), norm_topk_prob both ways where the block reads
  it, and Mixtral's router jitter (same seed);
* the whole model, train mode with output_router_logits (so the
  auxiliary load-balancing loss reads the router logits): loss and every
  parameter's gradient;
* `python -m spmdc_export --hf NAME --moe dense` and with `--train` (the
  default, the experts op, is tests/e2e/hf_moe_ep.py's): the archive's
  expected outputs (and loss and gradients) against the original model's
  eager ones on the archive's own inputs; then `spmdc compile` under dp
  (inference), Megatron TP from the model's tp_plan.json where it has one
  for the experts (inference), fsdp (train step), each run by `spmd-run -n
  2` and compared with the original model's eager numbers.

Exit 77 without transformers (a failure under CI, SPMD_ALLOW_SKIPS off).

    python tests/export/moe_test.py SPMDC SPMD_RUN
"""
import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3")
BLOCK_TOL = dict(rtol=1e-5, atol=1e-6)  # same function in fp32: only the summation order of matmuls differs
RUN_TOL = dict(rtol=1e-4, atol=1e-5)  # a distributed run against eager (the zoo's tolerance)


def close(what, got, want, tol):
    """Raises AssertionError naming `what` unless got and want are close."""
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if not torch.allclose(got, want, **tol):
        raise AssertionError(f"{what}: max abs difference {(got - want).abs().max().item():.3g} "
                             f"(rtol {tol['rtol']}, atol {tol['atol']})")


# ----------------------------------------------------------------- blocks


def moe_blocks(model):
    from spmdc_export import moe
    return [m for m in model.modules() if moe._replacement(m) is not None]


def routed(block, x):
    """The original block's top-k expert indices for x (flattened tokens)."""
    flat = x.reshape(-1, x.shape[-1])
    if hasattr(block, "moe"):  # DeepseekV3MoE: its router returns (indices, weights)
        return block.gate(flat)[0]
    return torch.topk(torch.softmax(block.gate(flat).float(), dim=-1), block.top_k, dim=-1)[1]


def router_weight(block):
    return block.gate.weight


def imbalance(block, x):
    """Sets the router and x so that every token picks expert 0 and none the last expert; checks it."""
    with torch.no_grad():
        x[..., 0] = 3.0
        w = router_weight(block)
        w[:, 0] = 0.0
        w[0, 0] = 10.0
        w[-1, 0] = -10.0
    idx = routed(block, x)
    if not bool((idx == 0).any(-1).all()) or bool((idx == w.shape[0] - 1).any()):
        raise AssertionError(f"{type(block).__name__}: the forced routing did not take: {idx.tolist()}")


def run_block(block, x, seed):
    """(outputs, input grad, {param: grad}) of block on x, train mode, a fixed random loss."""
    block.zero_grad(set_to_none=True)
    xi = x.detach().clone().requires_grad_(True)
    torch.manual_seed(seed)  # Mixtral's jitter draws from it
    out = block(xi * 1.0)  # not the leaf: the jitter scales its input in place
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator().manual_seed(1234)
    loss = sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outs)
    loss.backward()
    grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in block.named_parameters()}
    return [o.detach() for o in outs], xi.grad, grads


def check_block(label, block, x):
    """The replaced block against the original (a copy), on x."""
    from spmdc_export import moe
    original = copy.deepcopy(block)
    undo = moe.static_routing(block, lambda msg: None)
    try:
        want = run_block(original, x, 7)
        got = run_block(block, x, 7)
    finally:
        undo()
    if "forward" in block.__dict__ or "moe" in block.__dict__:
        raise AssertionError(f"{label}: the undo left the replacement on the block")
    for i, (g, w) in enumerate(zip(got[0], want[0])):
        close(f"{label}: output {i}", g, w, BLOCK_TOL)
    close(f"{label}: input gradient", got[1], want[1], BLOCK_TOL)
    for k in want[2]:
        close(f"{label}: gradient of {k}", got[2][k], want[2][k], BLOCK_TOL)
    return len(want[2])


def block_variants(block):
    """(label, setup(block)) pairs: the options this block reads."""
    yield "default", lambda b: None
    holder = "gate" if hasattr(block, "moe") else None
    target = getattr(block, holder) if holder else block
    if hasattr(target, "norm_topk_prob"):
        flip = not target.norm_topk_prob
        yield f"norm_topk_prob={flip}", lambda b: setattr(getattr(b, holder) if holder else b, "norm_topk_prob", flip)
    if hasattr(block, "jitter_noise"):
        yield "router jitter 0.1", lambda b: setattr(b, "jitter_noise", 0.1)


def case_blocks(name):
    from spmdc_export import hf
    torch.manual_seed(0)
    model = hf.build(name, train=True).module
    blocks = moe_blocks(model)
    if not blocks:
        raise AssertionError(f"{name}: no MoE block the export helper replaces")
    n = 0
    for block in blocks:
        for label, setup in block_variants(block):
            for routing in ("random", "imbalanced"):
                b = copy.deepcopy(block).train()
                setup(b)
                x = torch.randn(2, 8, model.config.hidden_size)
                if routing == "imbalanced":
                    imbalance(b, x)
                n += check_block(f"{name} {type(b).__name__} ({label}, {routing} routing)", b, x)
    print(f"ok   {name}: {len(blocks)} block(s), outputs (router logits where the block returns them) and {n} "
          f"parameter gradients "
          f"match the original's", flush=True)


# ----------------------------------------------------------------- whole model


def aux_model(name):
    """The transformers model (not the logits wrapper) with output_router_logits where it has them."""
    import transformers
    from spmdc_export import hf
    cfg_name, model_name, kw = hf.MODELS[name]
    kw = dict(kw(2, 64, 4, hf.VOCAB, 16), pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False,
              tie_word_embeddings=False)
    cfg = getattr(transformers, cfg_name)(**kw)
    hf.zero_dropout(cfg)
    if hasattr(cfg, "output_router_logits"):
        cfg.output_router_logits = True
        cfg.router_aux_loss_coef = 0.5
    return getattr(transformers, model_name)(cfg).train()


def model_step(model, ids, labels):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out, {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in model.named_parameters()}


def case_model(name):
    from spmdc_export import moe
    torch.manual_seed(0)
    model = aux_model(name)
    original = copy.deepcopy(model)
    ids, labels = torch.randint(3, 256, (2, 16)), torch.randint(3, 256, (2, 16))
    want, want_grads = model_step(original, ids, labels)
    undo = moe.static_routing(model, lambda msg: None)
    try:
        got, got_grads = model_step(model, ids, labels)
    finally:
        undo()
    aux = getattr(want, "aux_loss", None)
    if hasattr(model.config, "output_router_logits") and (aux is None or not float(aux.detach()) > 0):
        raise AssertionError(f"{name}: the model computed no auxiliary loss")
    close(f"{name}: loss", got.loss.detach(), want.loss.detach(), BLOCK_TOL)
    if aux is not None:
        close(f"{name}: aux loss", got.aux_loss.detach(), aux.detach(), BLOCK_TOL)
    for k, g in want_grads.items():
        close(f"{name}: gradient of {k}", got_grads[k], g, BLOCK_TOL)
    print(f"ok   {name}: whole model, train mode{' with the aux loss' if aux is not None else ''}: loss and "
          f"{len(want_grads)} parameter gradients match the original's", flush=True)


# ----------------------------------------------------------------- export, compile, run


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH")
                                                                          else []))
    return e


def sh(cmd, timeout):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\nexit {r.returncode}\n{(r.stderr or r.stdout).strip()[-3000:]}")
    return r.stdout


def original_eager(name, d, train):
    """The original model's (no replacement) eager outputs, or loss and
    gradients, on d's inputs, built as the CLI builds it (seed 0)."""
    from spmdc_export import hf
    torch.manual_seed(0)
    m = hf.build(name, train=train)
    inputs = load_file(os.path.join(d, "inputs.safetensors"))
    ids = inputs["input.0"]
    if not train:
        with torch.no_grad():
            return {"output.0": m.module.eval()(ids)}
    loss = m.loss_fn(m.module.train()(ids), inputs["input.1"])
    loss.backward()
    out = {"loss": loss.detach()}
    out.update({f"grad.{k}": p.grad for k, p in m.module.named_parameters() if p.grad is not None})
    return out


def compare_all(what, got, want):
    missing = sorted(set(want) - set(got))
    if missing:
        raise AssertionError(f"{what}: no {', '.join(missing[:3])}")
    for k, w in want.items():
        close(f"{what}: {k}", got[k], w, RUN_TOL)


def compile_run(a, d, label, schema):
    prog, out = os.path.join(d, f"{label}.spmd"), os.path.join(d, f"{label}.out.safetensors")
    sh([a.spmdc, "compile", os.path.join(d, "model.pt2"), "--schema", schema, "--mesh", "2", "-o", prog, "-q"], 300)
    sh([a.spmd_run, "-n", "2", prog, "--inputs", os.path.join(d, "inputs.safetensors"), "--output", out,
        "--quiet"], 300)
    return load_file(out)


def expert_tp_schema(a, d):
    """A schema from d/tp_plan.json when the plan shards the experts, else None."""
    plan_path = os.path.join(d, "tp_plan.json")
    if not os.path.exists(plan_path):
        return None
    with open(plan_path) as f:
        plan = json.load(f).get("base_model_tp_plan", {})
    if not any(".experts." in k for k in plan):
        return None
    schema = os.path.join(d, "tp.json")
    sh([a.spmdc, "schema", "from-hf", plan_path, "--mesh", "2", "--model", os.path.join(d, "model.pt2"),
        "-o", schema], 120)
    return schema


def case_cli(a, work, name, train):
    d = os.path.join(work, name + ("_train" if train else ""))
    out = sh([sys.executable, "-m", "spmdc_export", "--hf", name, "--moe", "dense", "-o", d]
             + (["--train"] if train else []), 600)
    if "dense dispatch" not in out:
        raise AssertionError(f"--hf {name}: the CLI does not say it replaced the routing: {out!r}")
    want = original_eager(name, d, train)
    compare_all(f"--hf {name}{' --train' if train else ''}: expected.safetensors against the original",
                load_file(os.path.join(d, "expected.safetensors")), want)
    cells = [("fsdp", "fsdp")] if train else [("dp", "dp")]
    tp = None if train else expert_tp_schema(a, d)
    if tp:
        cells.append(("tp", tp))
    for label, schema in cells:
        compare_all(f"--hf {name}{' --train' if train else ''} under {label} on 2 workers",
                    compile_run(a, d, label, schema), want)
    print(f"ok   --hf {name}{' --train' if train else ''}: exported, {', '.join(c for c, _ in cells)} on 2 workers "
          f"match the original's eager {'loss and gradients' if train else 'logits'}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--only", help="comma-separated families (default: all)")
    a = ap.parse_args()
    if importlib.util.find_spec("transformers") is None:
        print("not run: transformers is not installed (scripts/setup.sh installs it)", flush=True)
        return 77
    t0 = time.perf_counter()
    failures = []
    families = a.only.split(",") if a.only else FAMILIES
    with tempfile.TemporaryDirectory(prefix="spmdc-moe-") as work:
        for name in families:
            for label, case in (("blocks", lambda: case_blocks(name)), ("model", lambda: case_model(name)),
                                ("cli", lambda: case_cli(a, work, name, False)),
                                ("cli train", lambda: case_cli(a, work, name, True))):
                try:
                    case()
                except (RuntimeError, AssertionError, subprocess.TimeoutExpired) as e:
                    print(f"FAIL {name} {label}: {e}", flush=True)
                    failures.append(f"{name} {label}")
    print(f"{'FAILED' if failures else 'passed'} in {time.perf_counter() - t0:.1f} s"
          + (f": {', '.join(failures)}" if failures else ""), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
