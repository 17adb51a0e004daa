#!/usr/bin/env python3
"""Pipelined train steps against PyTorch's own pipeline and against eager.

Usage:
    pipeline_vs_torch.py SPMDC SPMD_RUN [--steps 4]

testdata/pt2/llama_train (a 2-layer llama + cross-entropy, one joint
forward+backward graph) is compiled with a "pipeline" schema (2 stages:
the embedding and layer 0, then layer 1, the norm and the head; 2
microbatches) and `--optimizer adamw`, for GPipe and 1F1B, and run for
--steps steps by `spmd-run -n 2`. The references, on the same weights and
batch:

  * torch.distributed.pipelining: the same two stages as modules
    (PipelineStage, ScheduleGPipe / Schedule1F1B, 2 microbatches, loss
    cross-entropy, scale_grads on), on 2 Gloo processes, each stage with
    torch.optim.AdamW over its parameters;
  * eager PyTorch on one device (whole batch, torch.optim.AdamW).

Every step's loss (torch's: the mean of its microbatches' losses) and every
parameter after the last step must match (|a - b| <= 1e-4 * max(1, |b|); on
parameters ||a - b|| <= 1e-4 ||b|| + 1e-6 sqrt(n)). The run also compares the
point-to-point traffic (printed, not judged): the bytes spmd-run's stages
send each other per step against what PyTorch's stages exchange (the
activation forward and its gradient back, per microbatch). Exit 0 when everything
matches, 1 otherwise (also when torch is missing: nothing is skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "testdata" / "pt2" / "llama_train"
HP = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
MICROBATCHES = 2


def load_model():
    import torch
    sys.path.insert(0, str(ROOT / "testdata"))
    from export_models import LlamaLoss
    ep = torch.export.load(str(MODEL / "model.pt2"))
    m = LlamaLoss()
    m.load_state_dict(ep.state_dict)
    return m


def batch():
    from safetensors.torch import load_file
    inputs = load_file(str(MODEL / "inputs.safetensors"))
    return inputs["input.0"], inputs["input.1"]


def adamw(params):
    import torch
    return torch.optim.AdamW(params, lr=HP["lr"], betas=HP["betas"], eps=HP["eps"],
                             weight_decay=HP["weight_decay"])


def eager(steps):
    """One device, whole batch, torch.optim.AdamW (optim_vs_torch.py's reference)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from optim_vs_torch import torch_reference
    return torch_reference("adamw", HP, steps)


def stage_modules(m):
    """The two stages of LlamaLoss, cut where the spmdc schema cuts it."""
    import torch.nn as nn
    import torch.nn.functional as F

    class First(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Module()
            self.model.tok = m.model.tok
            self.model.layers = nn.ModuleDict({"0": m.model.layers[0]})
            self.register_buffer("cos", m.model.cos)
            self.register_buffer("sin", m.model.sin)

        def forward(self, tokens):
            S = tokens.shape[1]
            return self.model.layers["0"](self.model.tok(tokens), self.cos[:S], self.sin[:S])

    class Last(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Module()
            self.model.layers = nn.ModuleDict({"1": m.model.layers[1]})
            self.model.norm, self.model.out = m.model.norm, m.model.out
            self.register_buffer("cos", m.model.cos)
            self.register_buffer("sin", m.model.sin)

        def forward(self, x):
            S = x.shape[1]
            return self.model.out(self.model.norm(self.model.layers["1"](x, self.cos[:S], self.sin[:S])))

    def loss_fn(logits, labels):
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())

    return First(), Last(), loss_fn


def torch_worker(rank, schedule, steps, store_path, out_path):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    m = load_model()
    first, last, loss_fn = stage_modules(m)
    mod = first if rank == 0 else last
    tokens, labels = batch()
    mb = tokens.shape[0] // MICROBATCHES
    example = tokens[:mb] if rank == 0 else first(tokens[:mb]).detach()
    stage = PipelineStage(mod, rank, 2, torch.device("cpu"), input_args=(example,))
    cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
    sched = cls(stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    opt = adamw(mod.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        if rank == 0:
            sched.step(tokens)
        else:
            mbl = []
            sched.step(target=labels, losses=mbl)
            losses.append(sum(x.item() for x in mbl) / len(mbl))
        opt.step()
    params = {k: p.detach().clone() for k, p in mod.named_parameters()}
    # The stages exchange the activation forward and its gradient back, per microbatch.
    act = first(tokens[:mb]).detach()
    sent = act.numel() * act.element_size() * MICROBATCHES
    torch.save({"losses": losses, "params": params, "sent": sent}, f"{out_path}.{rank}")
    dist.destroy_process_group()


def torch_pipeline(schedule, steps, d):
    import torch
    import torch.multiprocessing as mp
    store, out = d / f"store_{schedule}", d / f"torch_{schedule}"
    mp.spawn(torch_worker, args=(schedule, steps, str(store), str(out)), nprocs=2, join=True)
    r0, r1 = torch.load(f"{out}.0"), torch.load(f"{out}.1")
    return r1["losses"], {**r0["params"], **r1["params"]}, r0["sent"] + r1["sent"]


def spmd_pipeline(a, schedule, steps, d):
    from safetensors.torch import load_file
    schema = d / f"pp_{schedule}.json"
    schema.write_text(json.dumps({"version": 1, "mesh": {"shape": [2], "axes": ["pp"]},
                                  "pipeline": {"axis": "pp", "stages": ["model.layers.1"],
                                               "schedule": schedule, "microbatches": MICROBATCHES}}))
    prog, log, out = d / f"{schedule}.spmd", d / f"{schedule}.log", d / f"{schedule}.out.safetensors"
    b1, b2 = HP["betas"]
    subprocess.run([a.spmdc, "compile", MODEL / "model.pt2", "--schema", schema, "-o", prog, "--optimizer",
                    "adamw", "--lr", str(HP["lr"]), "--betas", str(b1), str(b2), "--eps", str(HP["eps"]),
                    "--weight-decay", str(HP["weight_decay"]), "--report", d / f"{schedule}.report.json"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([a.spmd_run, "-n", "2", prog, "--inputs", MODEL / "inputs.safetensors", "--steps",
                    str(steps), "--loss-log", log, "--output", out, "-q"], check=True)
    losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    outputs = load_file(str(out))
    dump = subprocess.run([a.spmdc, "dump", prog], check=True, capture_output=True, text=True).stdout
    return losses, {k[len("parameter."):]: v for k, v in outputs.items() if k.startswith("parameter.")}, dump


def p2p_bytes_per_step(dump):
    """Bytes spmdc's stages send each other per step: every value read on
    another stage, once per (value, stage) and microbatch."""
    import re
    place, users, size = {}, {}, {}
    dtypes = {"f32": 4, "i64": 8, "bf16": 2, "f16": 2, "i32": 4, "b8": 1}
    for line in dump.splitlines():
        m = re.match(r"%(\w+): (\w+)\[([^\]]*)\].* = \S+\((.*)\)\s+@(\S+)$", line)
        if not m:
            continue
        name, dt, shape, args, at = m.groups()
        n = 1
        for s in shape.split(","):
            n *= int(s) if s.strip() else 1
        place[name], size[name] = at, n * dtypes.get(dt, 4)
        for u in re.findall(r"%(\w+)", args):
            users.setdefault(u, set()).add(at)
    total = 0
    for v, ats in users.items():
        src = place.get(v, "")
        if src[:1] not in ("F", "B"):
            continue
        dests = {at[1:] for at in ats if at[:1] in ("F", "B") and at[1:] != src[1:]}
        total += len(dests) * size[v]
    return total * MICROBATCHES


def close(a, b, tol=1e-4):
    return abs(a - b) <= tol * max(1.0, abs(b))


def compare(what, losses, params, want_losses, want_params):
    import torch
    bad = []
    if len(losses) != len(want_losses) or not all(close(x, y) for x, y in zip(losses, want_losses)):
        bad.append(f"{what}: losses {losses} vs {want_losses}")
    for k, want in want_params.items():
        got = params.get(k)
        if got is None:
            bad.append(f"{what}: no parameter {k}")
            continue
        err = (got.float() - want.float()).norm().item()
        if err > 1e-4 * want.float().norm().item() + 1e-6 * want.numel() ** 0.5:
            bad.append(f"{what}: parameter {k} differs by {err:.3g}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"pipeline_vs_torch: error: {e}", file=sys.stderr)
        return 1
    failures = []
    want_losses, want_params = eager(a.steps)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for schedule in ("gpipe", "1f1b"):
            t_losses, t_params, t_sent = torch_pipeline(schedule, a.steps, d)
            s_losses, s_params, dump = spmd_pipeline(a, schedule, a.steps, d)
            failures += compare(f"{schedule}: torch.distributed.pipelining vs eager", t_losses, t_params,
                                want_losses, want_params)
            failures += compare(f"{schedule}: spmdc vs torch.distributed.pipelining", s_losses, s_params,
                                t_losses, t_params)
            s_sent = p2p_bytes_per_step(dump)
            print(f"{schedule}: losses spmdc {['%.6f' % x for x in s_losses]} torch "
                  f"{['%.6f' % x for x in t_losses]}; point-to-point bytes per step spmdc {s_sent:,} "
                  f"torch {t_sent:,} ({s_sent / max(t_sent, 1):.2f}x)")
    for f in failures:
        print("FAIL", f)
    print("pipeline_vs_torch:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
