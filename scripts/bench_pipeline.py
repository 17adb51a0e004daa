#!/usr/bin/env python3
"""Pipeline step time and bubble: spmd-run against torch.distributed.pipelining.

Usage:
    .venv/bin/python scripts/bench_pipeline.py [--spmdc build/tools/spmdc/spmdc]
        [--spmd-run build/tools/spmd-run/spmd-run] [--model llama_pipe_train]
        [--pp 2 4] [--microbatches 8] [--steps 6] [--schedules gpipe 1f1b zero-bubble]

The model (testdata/pipeline/llama_pipe_train: 8 Llama layers, hidden 32,
at batch 8 x 64; testdata/pt2/llama_deep_train: 32 layers at batch 2 x 16;
or llama_pipe_wide: 8 layers, hidden 256, ffn 1024 at batch 8 x 64, where a
microbatch's compute outweighs the per-op and per-send overheads, exported
on first use to build/bench/llama_pipe_wide) is trained with AdamW, in the
same run:

  * by spmd-run: compiled with a "pipeline" schema (the layers split evenly
    over pp stages, `--microbatches` microbatches, GPipe, 1F1B and
    zero-bubble) and run
    with `-n pp`; and on one rank without pipeline (the baseline);
  * by PyTorch: the same stages as modules (PipelineStage, ScheduleGPipe /
    Schedule1F1B / ScheduleInterleavedZeroBubble over one stage per rank)
    on pp Gloo processes, each with torch.optim.AdamW; and
    eager on one process (the baseline).

Every process runs one thread (OMP_NUM_THREADS=1). Step time: the median
over the steps after the first. Measured bubble fraction: 1 - T1 / (pp T),
with T1 the same framework's one-process step time: the share of the pp
processes' time not spent on the one-process work (idle in the schedule's
bubble, sending, and per-microbatch overhead), against the schedule's ideal
(pp - 1) / (m + pp - 1) (1F1B's; zero-bubble aims below it). Prints one
row per (pp, schedule).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "llama_pipe_train": (ROOT / "testdata" / "pipeline" / "llama_pipe_train",
                         dict(layers=8, d=32, heads=4, ffn=64, max_seq=64)),
    "llama_deep_train": (ROOT / "testdata" / "pt2" / "llama_deep_train",
                         dict(layers=32, d=32, heads=4, ffn=64)),
    "llama_pipe_wide": (ROOT / "build" / "bench" / "llama_pipe_wide",
                        dict(layers=8, d=256, heads=4, ffn=1024, max_seq=64)),
}
BATCH = (8, 64)  # llama_pipe_wide's tokens, as llama_pipe_train's
LR = 1e-3


def median_ms(seconds):
    rest = seconds[1:] if len(seconds) > 1 else seconds
    return 1e3 * statistics.median(rest)


def spmd_step_ms(a, model_dir, schema, nproc, d, tag):
    prog, log = d / f"{tag}.spmd", d / f"{tag}.jsonl"
    schema_args = ["--schema", "dp", "--mesh", "1"] if schema is None else ["--schema", schema]
    subprocess.run([a.spmdc, "compile", model_dir / "model.pt2", *schema_args, "-o", prog, "--optimizer",
                    "adamw", "--lr", str(LR), "-q"], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([a.spmd_run, "-n", str(nproc), prog, "--inputs", model_dir / "inputs.safetensors",
                    "--steps", str(a.steps), "--loss-log", log, "-q"], check=True, env=env)
    return median_ms([json.loads(line)["step_ms"] / 1e3 for line in log.read_text().splitlines()])


def ensure_exported(model):
    """Exports llama_pipe_wide's train step (seed 0) unless it exists."""
    model_dir, config = MODELS[model]
    if (model_dir / "model.pt2").exists():
        return
    import torch
    sys.path.insert(0, str(ROOT / "python"))
    sys.path.insert(0, str(ROOT / "testdata"))
    import spmdc_export
    from export_models import LlamaLoss
    torch.manual_seed(0)
    m = LlamaLoss(**config)
    tokens, labels = torch.randint(0, 256, BATCH), torch.randint(0, 256, BATCH)
    spmdc_export.export_train_step(m, [tokens, labels], str(model_dir), note="bench_pipeline's wide Llama")


def load(model):
    import torch
    sys.path.insert(0, str(ROOT / "testdata"))
    from export_models import LlamaLoss
    from safetensors.torch import load_file
    model_dir, config = MODELS[model]
    m = LlamaLoss(**config)
    m.load_state_dict(torch.export.load(str(model_dir / "model.pt2")).state_dict)
    inputs = load_file(str(model_dir / "inputs.safetensors"))
    return m, inputs["input.0"], inputs["input.1"]


def stage_module(m, stage, stages):
    """Stage `stage` of LlamaLoss: the embedding before layer 0, the layers
    split evenly (as spmdc's "stages": pp), the norm and head after the last."""
    import torch.nn as nn
    layers = m.model.layers
    per = len(layers) // stages

    class Stage(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(layers[stage * per:(stage + 1) * per])
            self.tok = m.model.tok if stage == 0 else None
            self.norm, self.out = (m.model.norm, m.model.out) if stage == stages - 1 else (None, None)
            self.register_buffer("cos", m.model.cos)
            self.register_buffer("sin", m.model.sin)

        def forward(self, x):
            if self.tok is not None:
                x = self.tok(x)
            S = x.shape[1]
            for layer in self.layers:
                x = layer(x, self.cos[:S], self.sin[:S])
            return self.out(self.norm(x)) if self.out is not None else x

    return Stage()


def loss_fn(logits, labels):
    import torch.nn.functional as F
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def torch_worker(rank, model, pp, schedule, m, steps, store, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleavedZeroBubble)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=pp)
    full, tokens, labels = load(model)
    mods = [stage_module(full, s, pp) for s in range(pp)]
    mb = tokens.shape[0] // m
    example = tokens[:mb]
    with torch.no_grad():
        for s in range(rank):
            example = mods[s](example)
    stage = PipelineStage(mods[rank], rank, pp, torch.device("cpu"), input_args=(example,))
    if schedule == "zero-bubble":
        sched = ScheduleInterleavedZeroBubble([stage], n_microbatches=m, loss_fn=loss_fn)
    else:
        cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
        sched = cls(stage, n_microbatches=m, loss_fn=loss_fn)
    opt = torch.optim.AdamW(mods[rank].parameters(), lr=LR)
    seconds = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        if rank == 0:
            sched.step(tokens)
        elif rank == pp - 1:
            sched.step(target=labels)
        else:
            sched.step()
        opt.step()
        dist.barrier()
        seconds.append(time.perf_counter() - t0)
    if rank == 0:
        Path(out).write_text(json.dumps(seconds))
    dist.destroy_process_group()


def torch_step_ms(model, pp, schedule, m, steps, d):
    import torch.multiprocessing as mp
    store, out = d / f"store_{pp}_{schedule}", d / f"torch_{pp}_{schedule}.json"
    mp.spawn(torch_worker, args=(model, pp, schedule, m, steps, str(store), str(out)), nprocs=pp, join=True)
    return median_ms(json.loads(out.read_text()))


def eager_step_ms(model, steps):
    import torch
    torch.set_num_threads(1)
    m, tokens, labels = load(model)
    opt = torch.optim.AdamW(m.parameters(), lr=LR)
    seconds = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        m(tokens, labels).backward()
        opt.step()
        seconds.append(time.perf_counter() - t0)
    return median_ms(seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spmdc", default=str(ROOT / "build" / "tools" / "spmdc" / "spmdc"))
    ap.add_argument("--spmd-run", dest="spmd_run", default=str(ROOT / "build" / "tools" / "spmd-run" / "spmd-run"))
    ap.add_argument("--model", choices=sorted(MODELS), default="llama_pipe_train")
    ap.add_argument("--pp", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b", "zero-bubble"],
                    choices=["gpipe", "1f1b", "zero-bubble"])
    a = ap.parse_args()
    ensure_exported(a.model)
    model_dir = MODELS[a.model][0]
    m = a.microbatches
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        s1 = spmd_step_ms(a, model_dir, None, 1, d, "one")
        t1 = eager_step_ms(a.model, a.steps)
        print(f"{a.model}, {m} microbatches, {a.steps} AdamW steps, 1 thread per process")
        print(f"one process: spmd-run {s1:.1f} ms, eager PyTorch {t1:.1f} ms")
        print("| pp | schedule | spmd-run ms | torch.pipelining ms | spmd/torch | bubble spmd | bubble torch "
              "| (p-1)/(m+p-1) |")
        for pp in a.pp:
            for schedule in a.schedules:
                schema = d / f"pp{pp}_{schedule}.json"
                schema.write_text(json.dumps({
                    "version": 1, "mesh": {"shape": [pp], "axes": ["pp"]},
                    "pipeline": {"axis": "pp", "stages": pp, "schedule": schedule, "microbatches": m}}))
                s = spmd_step_ms(a, model_dir, schema, pp, d, f"pp{pp}_{schedule}")
                t = torch_step_ms(a.model, pp, schedule, m, a.steps, d)
                ideal = (pp - 1) / (m + pp - 1)
                print(f"| {pp} | {schedule} | {s:.1f} | {t:.1f} | {s / t:.2f} | {1 - s1 / (pp * s):.2f} "
                      f"| {1 - t1 / (pp * t):.2f} | {ideal:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
