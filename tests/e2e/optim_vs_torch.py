#!/usr/bin/env python3
"""Multi-step optimizer numerics of compiled train steps against torch.optim.

Usage:
    optim_vs_torch.py SPMDC SPMD_RUN [--steps 20] [--optimizers adamw,adam,sgd] [--layouts dp,fsdp,...]
                      [--spmdc-override momentum=0.8] [--no-mutation-check]

testdata/pt2/llama_train (a 2-layer llama + cross-entropy, one joint
forward+backward graph) is compiled with `spmdc compile --optimizer ...` and
run for --steps steps by `spmd-run --steps N --loss-log ... --output ...`.
The reference is eager PyTorch: testdata/export_models.py's LlamaLoss with
the archive's weights, autograd, and torch.optim (AdamW, Adam, SGD) with the
same hyper-parameters, on the same batch. For every optimizer and layout

    dp (2), fsdp (2), hsdp (2x2), Megatron TP (schemas/examples/llama_tp.json, 2),
    dp x tp (schemas/examples/llama_dp_tp.json, 2x2)

the loss of every step must match torch's (|a - b| <= 1e-4 * max(1, |b|)),
and every parameter after the last step (spmd-run's parameter.<fqn>) must
match torch's (||a - b|| <= 1e-4 * ||b|| + 1e-6 * sqrt(n)). Resume: the fsdp
run also saves a checkpoint after half the steps; the rest run from it under
dp x tp (2x2, resharded), and the continued losses and final parameters must
match the same torch run. The dp x tp run also checks itself with
`spmd-run --verify-against` a file of torch's last loss and parameters.

The mutation check (on unless --no-mutation-check) compiles, per optimizer,
once with one hyper-parameter changed on the spmdc side only (beta1, eps,
momentum), runs 5 steps under dp and requires the comparison to fail.
--spmdc-override KEY=VALUE changes a hyper-parameter on the spmdc side for the
whole run (by hand: the test must then fail). Exit 0 when everything matches,
1 otherwise (also when torch or safetensors is missing: nothing is skipped).
"""
import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "testdata" / "pt2" / "llama_train"
LOSS_TOL = 1e-4  # relative (absolute below a loss of 1)
PARAM_RTOL, PARAM_ATOL = 1e-4, 1e-6  # on the norm; atol per element (RMS)

# Hyper-parameters, deliberately not PyTorch's defaults (a flag the compile
# ignored would show). "adam" is spmdc's adamw without weight decay, which is
# torch.optim.Adam's update.
OPTIMIZERS = {
    "adamw": dict(kind="adamw", lr=1e-2, betas=(0.85, 0.95), eps=1e-7, weight_decay=0.1),
    "adam": dict(kind="adamw", lr=5e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0),
    "sgd": dict(kind="sgd", lr=0.2, momentum=0.9, weight_decay=0.01),
}
# One changed hyper-parameter per optimizer for the mutation check.
MUTATIONS = {"adamw": ("betas", (0.9, 0.95)), "adam": ("eps", 1e-3), "sgd": ("momentum", 0.8)}


def tp_schema(d, name, shape):
    s = json.loads((ROOT / "schemas" / "examples" / name).read_text())
    s["mesh"]["shape"] = shape
    path = d / f"{name.removesuffix('.json')}_{'x'.join(map(str, shape))}.json"
    path.write_text(json.dumps(s))
    return path


def layouts(d):
    """name -> (schema, mesh, workers)."""
    return {
        "dp": ("dp", "2", 2),
        "fsdp": ("fsdp", "2", 2),
        "hsdp": ("hsdp", "2x2", 4),
        "tp": (tp_schema(d, "llama_tp.json", [2]), "2", 2),
        "dp_tp": (tp_schema(d, "llama_dp_tp.json", [2, 2]), "2x2", 4),
    }


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def optimizer_flags(hp):
    flags = ["--optimizer", hp["kind"], "--lr", hp["lr"], "--weight-decay", hp["weight_decay"]]
    if hp["kind"] == "sgd":
        return flags + ["--momentum", hp["momentum"]]
    return flags + ["--betas", hp["betas"][0], hp["betas"][1], "--eps", hp["eps"]]


def torch_reference(name, hp, steps):
    """Eager PyTorch: losses before each update and the parameters after the last."""
    import torch
    sys.path.insert(0, str(ROOT / "testdata"))
    from export_models import LlamaLoss
    from safetensors.torch import load_file

    ep = torch.export.load(str(MODEL / "model.pt2"))
    m = LlamaLoss()
    m.load_state_dict(ep.state_dict)
    m.train()
    inputs = load_file(str(MODEL / "inputs.safetensors"))
    tokens, labels = inputs["input.0"], inputs["input.1"]
    if name == "adamw":
        opt = torch.optim.AdamW(m.parameters(), lr=hp["lr"], betas=hp["betas"], eps=hp["eps"],
                                weight_decay=hp["weight_decay"])
    elif name == "adam":
        opt = torch.optim.Adam(m.parameters(), lr=hp["lr"], betas=hp["betas"], eps=hp["eps"])
    else:
        opt = torch.optim.SGD(m.parameters(), lr=hp["lr"], momentum=hp["momentum"],
                              weight_decay=hp["weight_decay"])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = m(tokens, labels)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses, {k: p.detach().clone() for k, p in m.named_parameters()}


def spmd_steps(a, d, tag, prog, workers, steps, extra=()):
    """Runs `steps` steps; returns the loss log's losses and the output tensors."""
    from safetensors.torch import load_file
    log, out = d / f"{tag}.log", d / f"{tag}.out.safetensors"
    run([a.spmd_run, "-n", workers, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", steps,
         "--loss-log", log, "--output", out, "-q", *extra])
    losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    return losses, load_file(str(out))


def verify_against_args(d, name, want_losses, want_params):
    """spmd-run flags comparing the last step's loss and the final parameters
    with torch's (expected.safetensors written here, from PyTorch)."""
    import torch
    from safetensors.torch import save_file
    expected = {f"parameter.{k}": v.contiguous() for k, v in want_params.items()}
    expected["loss"] = torch.tensor(want_losses[-1], dtype=torch.float32)
    path = d / f"{name}_expected.safetensors"
    save_file(expected, str(path))
    return ["--verify-against", path, "--rtol", PARAM_RTOL, "--atol", PARAM_ATOL]


def compare(what, got_losses, want_losses, got_out, want_params):
    """Mismatches (strings) of the losses and the final parameters; the worst errors."""
    bad, worst_loss, worst_param = [], 0.0, 0.0
    if len(got_losses) != len(want_losses):
        bad.append(f"{what}: {len(got_losses)} losses logged, torch has {len(want_losses)}")
    for i, (g, w) in enumerate(zip(got_losses, want_losses)):
        err = abs(g - w) / max(1.0, abs(w)) if g is not None else math.inf
        worst_loss = max(worst_loss, err)
        if not err <= LOSS_TOL:
            bad.append(f"{what}: step {i} loss {g} vs torch {w} (err {err:.3g})")
            break
    for fqn, w in want_params.items():
        g = got_out.get(f"parameter.{fqn}")
        if g is None:
            bad.append(f"{what}: no parameter.{fqn} in the outputs")
            continue
        diff = float((g.double() - w.double()).norm())
        bound = PARAM_RTOL * float(w.double().norm()) + PARAM_ATOL * math.sqrt(w.numel())
        worst_param = max(worst_param, diff / max(float(w.double().norm()), 1e-30))
        if not diff <= bound:
            bad.append(f"{what}: parameter {fqn} differs from torch's by {diff:.3g} (bound {bound:.3g})")
    return bad, worst_loss, worst_param


def compile_prog(a, d, tag, schema, mesh, hp):
    prog = d / f"{tag}.spmd"
    run([a.spmdc, "compile", MODEL / "model.pt2", "--schema", schema, "--mesh", mesh, *optimizer_flags(hp),
         "-o", prog, "-q"])
    return prog


def check_optimizer(a, d, name, hp, spmdc_hp, lay, failures):
    want_losses, want_params = torch_reference(name, hp, a.steps)
    k = a.steps // 2
    ckpt = d / f"{name}_ckpt"
    for lname in a.layouts.split(","):
        schema, mesh, workers = lay[lname]
        tag = f"{name}_{lname}"
        prog = compile_prog(a, d, tag, schema, mesh, spmdc_hp)
        # fsdp also saves after step k: the resume case below continues from it.
        extra = ["--save", ckpt, "--save-every", k, "--keep", 0] if lname == "fsdp" else []
        if lname == "dp_tp":  # spmd-run's own check against the same torch run
            extra = verify_against_args(d, name, want_losses, want_params)
        try:
            losses, out = spmd_steps(a, d, tag, prog, workers, a.steps, extra)
        except RuntimeError as e:
            failures.append(f"{name} {lname}: {e}")
            continue
        bad, wl, wp = compare(f"{name} {lname}", losses, want_losses, out, want_params)
        failures += bad
        print(f"{name:5} {lname:6} {a.steps} steps: loss {losses[0]:.4f} -> {losses[-1]:.4g} "
              f"(torch {want_losses[-1]:.4g}), loss err {wl:.2g}, param rel err {wp:.2g}"
              f"{'' if not bad else '  MISMATCH'}", flush=True)
    if not (ckpt / f"step-{k}").is_dir():
        failures.append(f"{name}: no checkpoint {ckpt}/step-{k} to resume from (is fsdp in --layouts?)")
        return
    # Resume: the fsdp run's checkpoint after step k, continued under dp x tp.
    schema, mesh, workers = lay["dp_tp"]
    prog = compile_prog(a, d, f"{name}_resume", schema, mesh, spmdc_hp)
    losses, out = spmd_steps(a, d, f"{name}_resume", prog, workers, a.steps - k,
                             ["--resume", ckpt / f"step-{k}"])
    bad, wl, wp = compare(f"{name} resume fsdp->dp_tp", losses, want_losses[k:], out, want_params)
    failures += bad
    print(f"{name:5} resume fsdp({k}) -> dp_tp({a.steps - k}): loss err {wl:.2g}, param rel err {wp:.2g}"
          f"{'' if not bad else '  MISMATCH'}", flush=True)


def mutation_check(a, d, lay, failures):
    """One changed hyper-parameter on the spmdc side must make the comparison fail."""
    schema, mesh, workers = lay["dp"]
    steps = min(a.steps, 5)
    for name, (key, value) in MUTATIONS.items():
        hp = OPTIMIZERS[name]
        want_losses, want_params = torch_reference(name, hp, steps)
        prog = compile_prog(a, d, f"{name}_mut", schema, mesh, dict(hp, **{key: value}))
        losses, out = spmd_steps(a, d, f"{name}_mut", prog, workers, steps)
        bad, wl, wp = compare(f"{name} mutated", losses, want_losses, out, want_params)
        print(f"{name:5} with {key}={value} on the spmdc side only: loss err {wl:.2g}, param rel err "
              f"{wp:.2g}: {'detected' if bad else 'NOT DETECTED'}", flush=True)
        if not bad:
            failures.append(f"{name}: {key}={value} on the spmdc side went unnoticed: the comparison cannot fail")


def parse_override(text):
    key, _, value = text.partition("=")
    vals = [float(v) for v in value.split(",")]
    return key, tuple(vals) if len(vals) > 1 else vals[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    ap.add_argument("--layouts", default="dp,fsdp,hsdp,tp,dp_tp")
    ap.add_argument("--spmdc-override", action="append", default=[], metavar="KEY=VALUE",
                    help="change a hyper-parameter on the spmdc side only, e.g. momentum=0.8 or betas=0.9,0.95")
    ap.add_argument("--no-mutation-check", action="store_true")
    a = ap.parse_args()
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"optim_vs_torch: FAIL: {e} (run scripts/setup.sh; the reference is PyTorch itself)")
        return 1
    t0 = time.time()
    failures = []
    overrides = dict(parse_override(o) for o in a.spmdc_override)
    with tempfile.TemporaryDirectory(prefix="spmdc-optim-") as tmp:
        d = Path(tmp)
        lay = layouts(d)
        try:
            for name in a.optimizers.split(","):
                hp = OPTIMIZERS[name]
                spmdc_hp = dict(hp, **{k: v for k, v in overrides.items() if k in hp})
                check_optimizer(a, d, name, hp, spmdc_hp, lay, failures)
            if not a.no_mutation_check and not overrides:
                mutation_check(a, d, lay, failures)
        except RuntimeError as e:
            failures.append(str(e))
    for f in failures[:20]:
        print("FAIL:", f)
    print(f"optim_vs_torch: {len(failures)} failures, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
