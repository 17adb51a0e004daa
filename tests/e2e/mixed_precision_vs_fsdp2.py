#!/usr/bin/env python3
"""Mixed-precision train steps against PyTorch FSDP2's MixedPrecisionPolicy.

Usage:
    mixed_precision_vs_fsdp2.py SPMDC SPMD_RUN [--steps 3]

A transformers LlamaForCausalLM (LAYERS = 4 layers, hidden 64, random weights, seed
0, batch 4 x 16 tokens) is exported as one train step with
`python -m spmdc_export --hf llama --train --mixed-precision bf16`
(reduce_dtype float32). The reference is PyTorch FSDP2 itself on the CPU
with Gloo, 2 processes: fully_shard per decoder layer and on the root with
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), each rank
on its half of the batch, the same weights (the archive's) and inputs, and
torch.optim.AdamW on the sharded float32 masters. spmdc compiles the step
under dp, fsdp and Megatron TP at 2 ranks and hsdp at 2x2 (4 workers).
Checked:
1. one step (no optimizer): the loss within 5e-3 (relative) of FSDP2's
   mean loss over ranks, and every gradient (float32) within 2e-2 of
   FSDP2's (norm of the difference over the norm of FSDP2's);
2. --steps AdamW steps (--optimizer adamw): every step's loss within 5e-3
   of FSDP2's, and the float32 parameters after the last step agree with
   FSDP2's to within 10% of how far the update moved them (all parameters
   together; 25% for each one: the update's size is lr per element, and
   bf16 noise flips the sign of a few tiny gradients, which Adam turns
   into a full-size step: one flip in a 64-element norm weight is ~8%);
3. from `spmdc dump` and `--report`: every aten.mm (the linear layers,
   forward and backward) computes in bf16; under fsdp and hsdp every
   all-gather moves bf16 and every reduce-scatter f32; under dp every
   all-reduce is f32; the report gives each collective's dtype. At this
   size the numbers alone do not tell bf16 from float32 compute (eager
   float32 is within 1.2e-2 of the bf16 step's gradients), so these
   checks are what shows the step runs in bf16;
4. fsdp with --bucket-mb 0 prefetches each bf16 gather one ahead (not all
   at the step's start) and computes the same step as with buckets;
   fsdp gathers each decoder layer's parameters again for the backward
   (FSDP2's reshard_after_forward=True): the report lists those bf16
   all-gathers; with "reshard_after_forward": false in the schema the
   step is bit-identical, with fewer all-gathers and a higher measured
   peak per rank (spmd-run --profile) and estimate (check_reshard);
5. the schema field (schemas/examples/fsdp_bf16.json: "mixed_precision":
   {"param_dtype": "bfloat16", "reduce_dtype": "float32"}) compiles to the
   same program as the flag;
6. bad input, each one line on stderr, exit 2 and no program written:
   --mixed-precision bf16 on a float32 export (testdata's llama_train),
   --reduce-dtype bf16 against the archive's float32, a flag that
   differs from the schema's field; spmdc_export's --mixed-precision
   without --train, and with a dtype it does not know.
Exit 1 on any failure (77, a skip, without transformers or FSDP2:
scripts/test.sh turns it into a failure under CI).
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_llama_sp_lp import TP_RULES  # noqa: E402  (the same Megatron split of the same model)

BATCH, LR, WD = 4, 1e-3, 0.01
LOSS_TOL, GRAD_TOL, UPDATE_TOL, PARAM_UPDATE_TOL = 5e-3, 2e-2, 0.1, 0.25
LAYOUTS = {"dp": ("dp", 2), "fsdp": ("fsdp", 2), "tp": ("tp", 2), "hsdp": ("hsdp", "2x2")}


# Deep enough that gathering each layer again for the backward (one layer
# ahead) keeps less than keeping every layer (check_reshard).
LAYERS = 4


def run(cmd, ok=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"mixed_precision_vs_fsdp2: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def fsdp2_model(rank, world, d, ckpt, batch):
    """The hf.Model FSDP2 trains, wrapped by fully_shard per decoder layer
    and on the root with MixedPrecisionPolicy(bf16, float32). Without
    `ckpt`: the random --hf llama model with the archive's weights. With a
    checkpoint folder: built on the meta device (torchtitan's way: no rank
    holds the whole model), sharded, then each rank copies its shard of
    every parameter from the folder's safetensors files, in float32."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from spmdc_export import hf, hfref
    torch.manual_seed(0)
    if ckpt is None:
        m = hf.build("llama", layers=LAYERS, hidden=64, batch=batch, seq=16, train=True)
        state = torch.export.load(str(d / "model.pt2")).state_dict
        m.module.load_state_dict({k: v for k, v in state.items()}, strict=False)
    else:
        m = hfref.build(str(ckpt), dtype="float32", batch=batch, train=True)  # parameters on meta
    m.module.train()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in m.module.model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(m.module, mp_policy=policy)
    if ckpt is not None:
        load_shards(m.module, Path(ckpt))
    return m


def load_shards(module, ckpt):
    """Materializes a meta-initialized FSDP2 module: each rank's shard of
    every parameter from the checkpoint (safetensors, names as stored),
    the buffers (rotary inv_freq, computed at build) kept."""
    import torch
    from safetensors import safe_open
    from torch.distributed.tensor import distribute_tensor
    buffers = {k: b.clone() for k, b in module.named_buffers()}
    module.to_empty(device="cpu")
    with torch.no_grad():
        for k, b in module.named_buffers():
            b.copy_(buffers[k])
        index = ckpt / "model.safetensors.index.json"
        where = json.loads(index.read_text())["weight_map"] if index.exists() else None
        for k, p in module.named_parameters():
            with safe_open(str(ckpt / (where[k] if where else "model.safetensors")), "pt") as f:
                full = f.get_tensor(k).to(p.dtype)
            p.to_local().copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local())


def fsdp2_worker(rank, world, port, d, steps, ckpt=None, batch=BATCH):
    """One FSDP2 rank: the step's loss and gradients, then `steps` AdamW
    steps (steps=0: the one step, no optimizer). Each rank saves its local
    shards (torch.save, so that no rank holds whole tensors):
    fsdp2.grads.<rank>.pt {"loss", "grad.<fqn>"} after the first step and
    fsdp2.params.<rank>.pt {"param.<fqn>"} after the last, rank 0 also
    fsdp2.losses.pt; ReferenceShards reads them back."""
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    m = fsdp2_model(rank, world, d, ckpt, batch)
    inputs = load_file(str(d / "inputs.safetensors"))
    rows = slice(rank * batch // world, (rank + 1) * batch // world)
    ids, labels = inputs["input.0"][rows], inputs["input.1"][rows]
    opt = torch.optim.AdamW(m.module.parameters(), lr=LR, weight_decay=WD) if steps else None
    losses = []
    for step in range(max(steps, 1)):
        if opt is not None:
            opt.zero_grad()
        loss = m.loss_fn(m.module(ids), labels)
        loss.backward()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / world)
        if step == 0:
            grads = {f"grad.{k}": p.grad.to_local() for k, p in m.module.named_parameters()}
            torch.save({"loss": mean / world, **grads}, str(d / f"fsdp2.grads.{rank}.pt"))
            del grads
        if opt is not None:
            opt.step()
    if opt is not None:
        torch.save({f"param.{k}": p.detach().to_local() for k, p in m.module.named_parameters()},
                   str(d / f"fsdp2.params.{rank}.pt"))
    if rank == 0:
        torch.save(torch.tensor(losses, dtype=torch.float64), str(d / "fsdp2.losses.pt"))
    dist.destroy_process_group()


class ReferenceShards:
    """FSDP2's results as one mapping: "loss", "losses", "grad.<fqn>" and
    "param.<fqn>" (the ranks' dim-0 shards concatenated on access; the
    files are memory-mapped, so a billion-parameter reference is never all
    in memory)."""

    def __init__(self, d, world):
        import torch
        self.parts = [torch.load(str(d / f"fsdp2.grads.{r}.pt"), mmap=True) for r in range(world)]
        if (d / "fsdp2.params.0.pt").exists():
            for r in range(world):
                self.parts[r].update(torch.load(str(d / f"fsdp2.params.{r}.pt"), mmap=True))
        self.losses = torch.load(str(d / "fsdp2.losses.pt"))

    def keys(self):
        return ["losses", *self.parts[0]]

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, k):
        import torch
        if k == "losses":
            return self.losses
        if k == "loss":
            return self.parts[0][k]
        return torch.cat([p[k] for p in self.parts])

    def items(self):
        return ((k, self[k]) for k in self.keys())


def fsdp2_reference(d, steps, ckpt=None, batch=BATCH, world=2):
    """Runs FSDP2 on `world` Gloo processes over d's inputs; its ReferenceShards.
    The ranks' glibc maps every buffer of 1 MiB or more on its own
    (MALLOC_MMAP_THRESHOLD_): the heap otherwise keeps the checkpoint's
    freed load buffers (0.82x the peak RSS on the 91M model)."""
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "1048576"  # read by each spawned rank's glibc at start-up
    try:
        mp.spawn(fsdp2_worker, args=(world, port, d, steps, ckpt, batch), nprocs=world)
    finally:
        if before is None:
            os.environ.pop("MALLOC_MMAP_THRESHOLD_")
        else:
            os.environ["MALLOC_MMAP_THRESHOLD_"] = before
    return ReferenceShards(d, world)


def schema_file(d, layout):
    kind, world = LAYOUTS[layout]
    s = {"version": 1}
    if kind == "tp":
        s.update({"mesh": {"shape": [world], "axes": ["tp"]}, "params": TP_RULES, "outputs": "replicate"})
    else:
        s["preset"] = kind
    f = d / f"{layout}.json"
    f.write_text(json.dumps(s))
    return f


def rel(a, b):
    return float((a.double() - b.double()).norm()) / max(1e-12, float(b.double().norm()))


def compare_step(got, ref, layout, failures):
    """One step's loss and float32 gradients (`got`: a mapping, or a
    safetensors safe_open) against FSDP2's; returns (loss error, worst
    gradient error, {grad.<fqn>: error} of those over GRAD_TOL)."""
    loss, want = float(got["loss"] if isinstance(got, dict) else got.get_tensor("loss")), float(ref["loss"])
    err = abs(loss - want) / abs(want)
    if err > LOSS_TOL:
        failures.append(f"{layout}: loss {loss:.6f} vs FSDP2 {want:.6f}")
    worst, dtypes, over = (0.0, ""), set(), {}
    for k in ref.keys():
        if k.startswith("grad."):
            g, w = got[k] if isinstance(got, dict) else got.get_tensor(k), ref[k]
            e = rel(g, w)
            worst = max(worst, (e, k))
            dtypes.add((g.dtype, w.dtype))
            if e > GRAD_TOL:
                over[k] = e
    print(f"{layout}: loss {loss:.6f} (FSDP2 {want:.6f}), worst gradient {worst[1]} at {worst[0]:.2e}")
    if worst[0] > GRAD_TOL:
        failures.append(f"{layout}: {worst[1]} differs from FSDP2's by {worst[0]:.3g} (tolerance {GRAD_TOL}; "
                        f"{len(over)} gradients over it)")
    if any(g != w for g, w in dtypes):
        failures.append(f"{layout}: gradients are not float32")
    return err, worst[0], over


def compile_and_run(a, d, layout, failures, ref, initial):
    """Compiles `layout` twice (one step; --optimizer adamw) and compares each run with FSDP2."""
    from safetensors.torch import load_file
    world = LAYOUTS[layout][1]
    n = 4 if world == "2x2" else 2
    sfile = schema_file(d, layout)
    common = ["compile", d / "model.pt2", "--schema", sfile, "--mesh", world, "--mixed-precision", "bf16", "-q"]
    run([a.spmdc, *common, "-o", d / f"{layout}.spmd", "--report", d / f"{layout}.report.json"])
    run([a.spmd_run, "-n", n, d / f"{layout}.spmd", "--inputs", d / "inputs.safetensors", "--output",
         d / f"{layout}.st", "-q"])
    compare_step(load_file(str(d / f"{layout}.st")), ref, layout, failures)
    opt = d / f"{layout}_adamw.spmd"
    run([a.spmdc, *common, "-o", opt, "--optimizer", "adamw", "--lr", LR, "--weight-decay", WD])
    log = d / f"{layout}.losses.jsonl"
    run([a.spmd_run, "-n", n, opt, "--inputs", d / "inputs.safetensors", "--steps", a.steps, "--loss-log", log,
         "--output", d / f"{layout}_adamw.st", "-q"])
    losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    want = ref["losses"].tolist()
    if len(losses) != len(want) or any(abs(x - y) > LOSS_TOL * abs(y) for x, y in zip(losses, want)):
        failures.append(f"{layout}: AdamW losses {losses} vs FSDP2 {want}")
    after = load_file(str(d / f"{layout}_adamw.st"))
    diff2 = moved2 = 0.0
    worst = (0.0, "")
    for k, w in ref.items():
        if not k.startswith("param."):
            continue
        g = after.get(f"parameter.{k[6:]}")
        if g is None or g.dtype != w.dtype:
            failures.append(f"{layout}: no float32 parameter.{k[6:]} after the AdamW steps")
            return
        diff = float((g.double() - w.double()).norm())
        moved = float((w.double() - initial[k[6:]].double()).norm())
        diff2, moved2 = diff2 + diff * diff, moved2 + moved * moved
        worst = max(worst, (diff / max(moved, 1e-30), k[6:]))
    total = (diff2 / max(moved2, 1e-30)) ** 0.5
    print(f"{layout}: after {a.steps} AdamW steps the parameters differ from FSDP2's by {total:.1%} of the "
          f"update (worst {worst[1]}: {worst[0]:.1%})")
    if total > UPDATE_TOL or worst[0] > PARAM_UPDATE_TOL:
        failures.append(f"{layout}: after {a.steps} AdamW steps the parameters differ from FSDP2's by {total:.1%} "
                        f"of the update, {worst[1]} by {worst[0]:.1%} (tolerances {UPDATE_TOL:.0%}, "
                        f"{PARAM_UPDATE_TOL:.0%})")


def check_dtypes(a, d, failures):
    """The collectives' dtypes from spmdc dump and the report."""
    for layout in a.layouts:
        text = run([a.spmdc, "dump", d / f"{layout}.spmd"]).stdout
        kinds = {}
        for m in re.finditer(r"^%\S+: (\w+)\[[^\]]*\] = spmd\.(all_gather|reduce_scatter|all_reduce)\(", text, re.M):
            kinds.setdefault(m.group(2), set()).add(m.group(1))
        mms = set(re.findall(r"^%\S+: (\w+)\[[^\]]*\] = aten\.mm\.default\(", text, re.M))
        if mms != {"bf16"}:  # the linear layers, forward and backward
            failures.append(f"{layout}: spmdc dump's aten.mm results are {sorted(mms)}, want bf16 only")
        report = json.loads((d / f"{layout}.report.json").read_text())
        dtypes = {c["dtype"] for c in report["collectives"]}
        print(f"{layout}: collectives by dtype {report['collective_bytes_by_dtype']}")
        want = {"all_gather": {"bf16"}, "reduce_scatter": {"f32"}} if layout in ("fsdp", "hsdp") else {}
        if layout == "dp":
            want = {"all_reduce": {"f32"}}
        for kind, dt in want.items():
            if kinds.get(kind) != dt:
                failures.append(f"{layout}: spmdc dump's {kind}s move {sorted(kinds.get(kind, []))}, want {sorted(dt)}")
        if not dtypes or "?" in dtypes:
            failures.append(f"{layout}: the report does not give every collective's dtype: {sorted(dtypes)}")


def check_unbucketed(a, d, failures):
    """fsdp with --bucket-mb 0: each bf16 gather (and its cast) is prefetched
    one ahead, not all at the start, and the step equals the bucketed one."""
    from safetensors.torch import load_file
    prog = d / "fsdp_nobucket.spmd"
    run([a.spmdc, "compile", d / "model.pt2", "--schema", "fsdp", "--mesh", 2, "--mixed-precision", "bf16",
         "--bucket-mb", 0, "-o", prog, "-q"])
    lines = run([a.spmdc, "dump", prog]).stdout.splitlines()
    gathers = [i for i, x in enumerate(lines) if "= spmd.all_gather(" in x]
    first_mm = next((i for i, x in enumerate(lines) if "= aten.mm.default(" in x), len(lines))
    if not gathers or gathers[-1] < first_mm:
        failures.append("fsdp --bucket-mb 0: every all-gather is issued before the first matmul, not one ahead")
    run([a.spmd_run, "-n", 2, prog, "--inputs", d / "inputs.safetensors", "--output", d / "nobucket.st", "-q"])
    got, want = load_file(str(d / "nobucket.st")), load_file(str(d / "fsdp.st"))
    if any(not got[k].equal(v) for k, v in want.items()):
        failures.append("fsdp --bucket-mb 0: the step differs from the bucketed one")


PEAK_RUNS = 4  # runs whose per-rank floor is the measured peak (check_reshard)


def check_reshard(a, d, failures):
    """fsdp gathers each decoder layer's parameters again for the backward
    (FSDP2's reshard_after_forward=True, the reshard-after-forward pass):
    the report lists those all-gathers ("backward of ...") in bf16 and
    notes them; with the schema's "reshard_after_forward": false the
    program has fewer all-gathers, computes the same step bit for bit, and
    its ranks' measured peak of live tensors (spmd-run --profile) and the
    compiler's estimate are higher."""
    from safetensors.torch import load_file
    report = json.loads((d / "fsdp.report.json").read_text())
    again = [c for c in report["collectives"] if c["reason"].startswith("needed by backward of ")]
    if not again or {c["dtype"] for c in again} != {"bf16"} or {c["kind"] for c in again} != {"all_gather"}:
        failures.append(f"fsdp: the report lists {len(again)} backward all-gathers "
                        f"({sorted({c['dtype'] for c in again})}), want some, all bf16")
    notes = " ".join(report.get("notes", []))
    if "reshard-after-forward:" not in notes:
        failures.append("fsdp: --report has no reshard-after-forward note")
    kept = d / "fsdp_kept.json"
    kept.write_text(json.dumps({"version": 1, "preset": "fsdp", "reshard_after_forward": False}))
    peaks, gathers, estimates = {}, {}, {}
    for name, sfile in (("reshard", "fsdp"), ("kept", kept)):
        prog, prof = d / f"fsdp_{name}.spmd", d / f"fsdp_{name}.prof.json"
        run([a.spmdc, "compile", d / "model.pt2", "--schema", sfile, "--mesh", 2, "--mixed-precision", "bf16",
             "-o", prog, "-q", "--report", d / f"fsdp_{name}.report.json"])
        estimates[name] = json.loads((d / f"fsdp_{name}.report.json").read_text())["per_rank"]["peak_bytes_estimate"]
        gathers[name] = run([a.spmdc, "dump", prog]).stdout.count("= spmd.all_gather(")
        # A Gloo worker thread frees a collective's buffers a moment after
        # the wait returns, so one run's peak can hold up to ~135 KB more
        # (seen on CI); the floor of a few runs is the program's own peak.
        runs = []
        for _ in range(PEAK_RUNS):
            run([a.spmd_run, "-n", 2, prog, "--inputs", d / "inputs.safetensors", "--output", d / f"{name}.st", "-q",
                 "--profile", prof])
            runs.append([r["peak_bytes"] for r in json.loads(prof.read_text())["ranks"]])
        peaks[name] = max(min(rank) for rank in zip(*runs))
    print(f"fsdp reshard_after_forward true / false: {gathers['reshard']} / {gathers['kept']} all-gathers, "
          f"measured peak {peaks['reshard']:,} / {peaks['kept']:,} B per rank, estimate "
          f"{estimates['reshard']:,} / {estimates['kept']:,} B")
    if not gathers["reshard"] > gathers["kept"]:
        failures.append(f"fsdp: {gathers['reshard']} all-gathers with resharding, {gathers['kept']} without")
    if not (peaks["reshard"] < peaks["kept"] and estimates["reshard"] < estimates["kept"]):
        failures.append(f"fsdp: resharding after forward does not lower the peak (measured {peaks['reshard']:,} vs "
                        f"{peaks['kept']:,} B, estimated {estimates['reshard']:,} vs {estimates['kept']:,} B)")
    got, want = load_file(str(d / "reshard.st")), load_file(str(d / "kept.st"))
    if got.keys() != want.keys() or any(not got[k].equal(v) for k, v in want.items()):
        failures.append("fsdp: the step with reshard_after_forward false differs from the default's")


def check_field_and_refusals(a, d, failures):
    field = ROOT / "schemas" / "examples" / "fsdp_bf16.json"  # "mixed_precision": {"param_dtype": "bfloat16", ...}
    run([a.spmdc, "compile", d / "model.pt2", "--schema", field, "--mesh", 2, "-o", d / "field.spmd", "-q"])
    def dump(prog):  # the provenance line names the schema file
        return [x for x in run([a.spmdc, "dump", prog]).stdout.splitlines() if not x.startswith("provenance")]
    if dump(d / "field.spmd") != dump(d / "fsdp.spmd"):
        failures.append("the schema's mixed_precision field compiles to another program than --mixed-precision")
    fp32 = ROOT / "testdata" / "pt2" / "llama_train" / "model.pt2"
    cases = [("a float32 export", [fp32, "--schema", "fsdp", "--mixed-precision", "bf16"], "not exported with it"),
             ("another reduce dtype", [d / "model.pt2", "--schema", "fsdp", "--mixed-precision", "bf16",
                                       "--reduce-dtype", "bf16"], "differs from the policy the step was exported"),
             ("flag against field", [d / "model.pt2", "--schema", field, "--mixed-precision", "fp16"],
              "differs from the schema's mixed_precision")]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    for what, args, text in (("export without --train", ["--mixed-precision", "bf16"], "are for --train"),
                             ("export to fp8", ["--train", "--mixed-precision", "fp8"], "--mixed-precision fp8")):
        r = subprocess.run([sys.executable, "-m", "spmdc_export", "--hf", "llama", "-o", str(d / "bad"), *args],
                           capture_output=True, text=True, env=env)
        err = r.stderr.strip()
        if r.returncode != 2 or text not in err or len(err.splitlines()) != 1 or (d / "bad").exists():
            failures.append(f"{what}: exit {r.returncode}, stderr {err!r} (want exit 2, one line with {text!r})")
    for what, args, text in cases:
        out = d / "bad.spmd"
        r = run([a.spmdc, "compile", *args, "--mesh", 2, "-o", out], ok=False)
        err = r.stderr.strip()
        if r.returncode != 2 or text not in err or len(err.splitlines()) != 1 or out.exists():
            failures.append(f"{what}: exit {r.returncode}, stderr {err!r} (want exit 2, one line with {text!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="a comma-separated subset (fsdp is always run)")
    a = ap.parse_args()
    a.layouts = sorted(set(a.layouts.split(",")) | {"fsdp"}, key=list(LAYOUTS).index)
    if not set(a.layouts) <= set(LAYOUTS):
        ap.error(f"--layouts: choose from {', '.join(LAYOUTS)}")
    try:
        import torch
        import transformers  # noqa: F401
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: F401
    except ImportError as e:
        print(f"mixed_precision_vs_fsdp2: skipped: {e}")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        r = subprocess.run([sys.executable, "-m", "spmdc_export", "--hf", "llama", "--layers", str(LAYERS), "--hidden", "64",
                            "--batch", str(BATCH), "--train", "--mixed-precision", "bf16", "-o", str(d)],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"mixed_precision_vs_fsdp2: the export failed:\n{r.stdout}{r.stderr}")
        if json.loads((d / "meta.json").read_text()).get("mixed_precision") != {"param_dtype": "bfloat16",
                                                                                 "reduce_dtype": "float32"}:
            failures.append("meta.json does not record the policy")
        initial = {k: v.detach().clone() for k, v in torch.export.load(str(d / "model.pt2")).state_dict.items()}
        ref = fsdp2_reference(d, a.steps)
        for layout in a.layouts:
            compile_and_run(a, d, layout, failures, ref, initial)
        check_dtypes(a, d, failures)
        check_unbucketed(a, d, failures)
        check_reshard(a, d, failures)
        check_field_and_refusals(a, d, failures)
    for f in failures:
        print(f"FAIL {f}")
    print("mixed_precision_vs_fsdp2: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
