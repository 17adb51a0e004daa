#!/usr/bin/env python3
"""PyTorch Distributed Checkpoint (DCP) folders both ways between torch and spmd-run.

Usage:
    dcp_vs_torch.py SPMDC SPMD_RUN

torch -> spmd-run: PyTorch trains testdata/pt2/llama_train's model
(export_models.LlamaLoss) with FSDP2 (fully_shard per layer and at the root)
on 2 Gloo processes and AdamW (non-default hyper-parameters) for 2 steps,
saves {"model": ..., "optim": ...} from get_state_dict with dcp.save, and
continues 2 more steps. spmd-run resumes that folder with --resume-dcp on 4
ranks under dp x tp (2x2, Megatron TP: another layout and mesh) and runs 2
steps; its losses and final parameters must match torch's continued run
(relative 1e-5).

The same state saved by torch in DCP's Hugging Face format
(HuggingFaceStorageWriter, save_distributed: one safetensors file per rank,
offsets in its header) resumes the same way.

spmd-run -> torch: the same spmd-run run writes --save-dcp; PyTorch dcp.load's
it into a plain state dict shaped like get_state_dict's ("model.<fqn>",
"optim.state.<fqn>.exp_avg/exp_avg_sq/step"): every parameter must equal
spmd-run's own consolidated output exactly (buffers: torch's), the optimizer states must match
torch's continued run (1e-5) and every step must be 4.

Under a pipeline: the same torch checkpoint resumed by a 2-stage 1F1B
program (2 microbatches) that --save-dcp's after the same steps; torch
dcp.load's that folder equal to the dp x tp run's save (1e-5), and a run
without the pipeline (dp x tp) resumes it and logs the dp x tp save's loss.

Hugging Face format out: the dp x tp run with --save-dcp --dcp-format hf
writes one shard-<rank+1>-model-00001-of-00001.safetensors per writing rank
and nothing else; torch's dcp.load with HuggingFaceStorageReader reads it
equal to the run's own torch-format save, bit for bit.

Periodic saves: --save-dcp with --save-every 1 --keep 1 leaves only the
last step-<N> folder, which torch loads equal to the single save; a
--resume-dcp of the parent folder takes it over a newer unfinished one.

Bad input: a truncated .distcp, a .metadata that is not DCP's, a missing
tensor, a shape and a dtype mismatch must each end spmd-run with exit 2 and
one line naming the file and the tensor, before any worker computes (no
output file, no loss log). Exit 0 when everything holds, 1 otherwise (also
when torch is missing: nothing is skipped).
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "testdata" / "pt2" / "llama_train"
HP = dict(lr=1e-2, betas=(0.85, 0.95), eps=1e-7, weight_decay=0.1)
TOL = 1e-5
SAVED_AT, MORE = 2, 2


def torch_worker(rank, store, ckpt, out):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.fsdp import fully_shard
    from safetensors.torch import load_file
    sys.path.insert(0, str(ROOT / "testdata"))
    from export_models import LlamaLoss

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(0)
    m = LlamaLoss()
    m.load_state_dict(torch.export.load(str(MODEL / "model.pt2")).state_dict)
    for layer in m.model.layers:
        fully_shard(layer)
    fully_shard(m)
    opt = torch.optim.AdamW(m.parameters(), **HP)
    inputs = load_file(str(MODEL / "inputs.safetensors"))  # both ranks: the whole batch (FSDP averages)
    losses = []
    for step in range(SAVED_AT + MORE):
        if step == SAVED_AT:
            msd, osd = get_state_dict(m, opt)
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt)
            # The same state in DCP's Hugging Face format (one safetensors file per rank, tensors only).
            dcp.save({"model": msd, "optim": {"state": osd["state"]}},
                     storage_writer=HuggingFaceStorageWriter(ckpt + "_hf", save_distributed=True))
        opt.zero_grad()
        loss = m(inputs["input.0"], inputs["input.1"])
        loss.backward()
        losses.append(loss.item())
        opt.step()
    msd, osd = get_state_dict(m, opt)
    full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    params = {k: full(v).detach().clone() for k, v in msd.items()}  # and buffers
    names = [k for k, _ in m.named_parameters()]
    states = {k: {n: full(s).detach().clone() for n, s in st.items()} for k, st in osd["state"].items()}
    if rank == 0:
        torch.save({"losses": losses, "params": params, "names": names, "states": states}, out)
    dist.destroy_process_group()


def torch_run(d):
    import torch
    import torch.multiprocessing as mp
    ckpt, out = d / "torch_ckpt", d / "torch.pt"
    mp.spawn(torch_worker, args=(str(d / "store"), str(ckpt), str(out)), nprocs=2, join=True)
    return ckpt, torch.load(out)


def run(cmd, check=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def compile_dp_tp(a, d):
    schema = json.loads((ROOT / "schemas" / "examples" / "llama_dp_tp.json").read_text())
    schema["mesh"]["shape"] = [2, 2]
    (d / "dp_tp.json").write_text(json.dumps(schema))
    prog = d / "dp_tp.spmd"
    run([a[0], "compile", MODEL / "model.pt2", "--schema", d / "dp_tp.json", "--mesh", "2x2", "--optimizer",
         "adamw", "--lr", HP["lr"], "--betas", *HP["betas"], "--eps", HP["eps"], "--weight-decay",
         HP["weight_decay"], "-o", prog, "-q"])
    return prog


def rel_err(got, want):
    return float((got.double() - want.double()).norm()) / max(float(want.double().norm()), 1e-12)


def check_resume(a, d, prog, ckpt, ref, failures, save=True):
    """spmd-run resumes torch's checkpoint, continues, and (save) saves its own."""
    from safetensors.torch import load_file
    log, out = d / f"{ckpt.name}.log", d / f"{ckpt.name}.safetensors"
    run([a[1], "-n", 4, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", MORE, "--resume-dcp", ckpt,
         "--loss-log", log, "--output", out, "-q"] + (["--save-dcp", d / "spmd_ckpt"] if save else []))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    want = ref["losses"][SAVED_AT:]
    if [x["step"] for x in lines] != list(range(SAVED_AT, SAVED_AT + MORE)):
        failures.append(f"resume {ckpt.name}: logged steps {[x['step'] for x in lines]}, want {SAVED_AT}.. (torch's step)")
    for x, w in zip(lines, want):
        if not abs(x["loss"] - w) <= TOL * max(1.0, abs(w)):
            failures.append(f"resume {ckpt.name}: step {x['step']} loss {x['loss']} vs torch {w}")
    got = load_file(str(out))
    worst = 0.0
    for fqn in ref["names"]:
        w, g = ref["params"][fqn], got.get(f"parameter.{fqn}")
        if g is None:
            failures.append(f"resume {ckpt.name}: no parameter.{fqn} in spmd-run's output")
            continue
        worst = max(worst, rel_err(g, w))
        if rel_err(g, w) > TOL:
            failures.append(f"resume {ckpt.name}: parameter {fqn} differs from torch's by {rel_err(g, w):.3g}")
    print(f"torch FSDP2 (2 ranks, {SAVED_AT} steps, {ckpt.name}) -> spmd-run dp x tp (4 ranks, {MORE} steps): losses "
          f"{[round(x['loss'], 6) for x in lines]} vs torch {[round(w, 6) for w in want]}, "
          f"param rel err {worst:.2g}", flush=True)
    return got


def one_step_logs(a, d, prog, sources, tag):
    """The loss log of one step of `prog` on 4 ranks resumed (--resume-dcp) from each of `sources`."""
    logs = []
    for i, src in enumerate(sources):
        log = d / f"{tag}-{i}.log"
        run([a[1], "-n", 4, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", 1, "--resume-dcp", src,
             "--loss-log", log, "-q"])
        logs.append([json.loads(x) for x in log.read_text().splitlines()])
    return logs


def check_save(d, got, ref, failures):
    """PyTorch loads spmd-run's DCP folder into a get_state_dict-shaped state dict."""
    import torch
    import torch.distributed.checkpoint as dcp
    sd = {"model": {k: torch.empty_like(v) for k, v in ref["params"].items()},
          "optim": {"state": {k: {n: torch.empty_like(s) for n, s in st.items()}
                              for k, st in ref["states"].items()}}}
    dcp.load(sd, checkpoint_id=str(d / "spmd_ckpt"))
    for fqn, t in sd["model"].items():
        # Parameters against spmd-run's own output; buffers (rope tables) against torch's.
        mine = got.get(f"parameter.{fqn}", ref["params"][fqn])
        if not torch.equal(t, mine):
            failures.append(f"save: model.{fqn} as torch loads it differs from spmd-run's output")
    worst = 0.0
    for fqn, st in sd["optim"]["state"].items():
        for name, t in st.items():
            want = ref["states"][fqn][name]
            err = rel_err(t, want)
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"save: optim.state.{fqn}.{name} differs from torch's by {err:.3g}")
    print(f"spmd-run --save-dcp -> torch dcp.load: {len(sd['model'])} parameters equal spmd-run's output, "
          f"optimizer states vs torch rel err {worst:.2g}", flush=True)


def compile_pipeline(a, d):
    schema = {"version": 1, "mesh": {"shape": [2], "axes": ["pp"]},
              "pipeline": {"axis": "pp", "stages": ["model.layers.1"], "schedule": "1f1b", "microbatches": 2}}
    (d / "pp.json").write_text(json.dumps(schema))
    prog = d / "pp.spmd"
    run([a[0], "compile", MODEL / "model.pt2", "--schema", d / "pp.json", "--optimizer", "adamw", "--lr",
         HP["lr"], "--betas", *HP["betas"], "--eps", HP["eps"], "--weight-decay", HP["weight_decay"], "-o", prog,
         "-q"])
    return prog


def dcp_state(folder):
    """Every tensor of a DCP folder as torch's dcp.load reads it, by its DCP key."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    md = FileSystemReader(str(folder)).read_metadata()
    sd = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in md.state_dict_metadata.items()
          if hasattr(m, "size")}
    dcp.load(sd, checkpoint_id=str(folder))
    return sd


def check_pipeline(a, d, prog, ckpt, failures):
    """--save-dcp under a pipeline writes what the run without it writes; a run without the pipeline resumes it."""
    pp, saved = compile_pipeline(a, d), d / "pp_ckpt"
    run([a[1], "-n", 2, pp, "--inputs", MODEL / "inputs.safetensors", "--steps", MORE, "--resume-dcp", ckpt,
         "--save-dcp", saved, "-q"])
    got, want = dcp_state(saved), dcp_state(d / "spmd_ckpt")  # the dp x tp run's save after the same steps
    if got.keys() != want.keys():
        failures.append(f"pipeline: {saved} holds {sorted(got.keys() ^ want.keys())} where dp x tp's save differs")
    worst = max((rel_err(got[k], want[k]) for k in want if k in got), default=0.0)
    if worst > TOL:
        failures.append(f"pipeline: {saved} as torch loads it differs from dp x tp's save by {worst:.3g}")
    logs = one_step_logs(a, d, prog, (saved, d / "spmd_ckpt"), "pp-resume")
    if [x["step"] for x in logs[0]] != [SAVED_AT + MORE] or \
            not abs(logs[0][0]["loss"] - logs[1][0]["loss"]) <= TOL * max(1.0, abs(logs[1][0]["loss"])):
        failures.append(f"pipeline: dp x tp resuming {saved} logged {logs[0]}, from dp x tp's save {logs[1]}")
    print(f"spmd-run 2 stages --save-dcp -> torch dcp.load: {len(got)} tensors, rel err {worst:.2g} against the "
          f"dp x tp save; resumed without the pipeline: loss {logs[0][0]['loss']:.6f} vs {logs[1][0]['loss']:.6f}",
          flush=True)


def check_hf_save(a, d, prog, ckpt, failures):
    """--dcp-format hf writes what torch's HuggingFaceStorageWriter(save_distributed=True) writes."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    hf = d / "spmd_hf"
    run([a[1], "-n", 4, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", MORE, "--resume-dcp", ckpt,
         "--save-dcp", hf, "--dcp-format", "hf", "-q"])
    names = sorted(os.listdir(hf))
    if names != [f"shard-0000{r}-model-00001-of-00001.safetensors" for r in (1, 2)]:
        failures.append(f"hf save: {hf} holds {names}, want one shard file for each of ranks 0 and 1 (tp)")
    reader = HuggingFaceStorageReader(str(hf))
    md = reader.read_metadata()
    got = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in md.state_dict_metadata.items()}
    dcp.load(got, storage_reader=HuggingFaceStorageReader(str(hf)))
    want = dcp_state(d / "spmd_ckpt")
    if got.keys() != want.keys():
        failures.append(f"hf save: keys differ from the torch-format save: {sorted(got.keys() ^ want.keys())[:5]}")
    unequal = [k for k in want if k in got and not torch.equal(got[k], want[k])]
    if unequal:
        failures.append(f"hf save: {unequal[:5]} as HuggingFaceStorageReader reads them differ from the "
                        f"torch-format save")
    print(f"spmd-run --save-dcp --dcp-format hf -> torch HuggingFaceStorageReader: {len(got)} tensors, "
          f"{len(unequal)} differ from the torch-format save", flush=True)


def check_periodic(a, d, prog, ckpt, failures):
    """--save-dcp with --save-every writes torchtitan's step-<N> folders, --keep of them; --resume-dcp of the
    parent takes the newest complete one."""
    import torch
    root = d / "periodic"
    run([a[1], "-n", 4, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", MORE, "--resume-dcp", ckpt,
         "--save-dcp", root, "--save-every", 1, "--keep", 1, "-q"])
    last = f"step-{SAVED_AT + MORE}"
    if sorted(os.listdir(root)) != [last]:
        failures.append(f"periodic: {root} holds {sorted(os.listdir(root))}, want only {last} (--keep 1)")
        return

    got, want = dcp_state(root / last), dcp_state(d / "spmd_ckpt")  # the same run's single save at the same step
    if got.keys() != want.keys() or any(not torch.equal(got[k], want[k]) for k in want):
        failures.append(f"periodic: {root / last} as torch loads it differs from --save-dcp's folder")
    (root / "step-9").mkdir()  # a newer save that never finished: no .metadata
    logs = one_step_logs(a, d, prog, (root, d / "spmd_ckpt"), "periodic")
    if logs[0] != [dict(logs[1][0], step_ms=logs[0][0]["step_ms"])] or logs[0][0]["step"] != SAVED_AT + MORE:
        failures.append(f"periodic: --resume-dcp {root} logged {logs[0]}, want step {SAVED_AT + MORE} as from "
                        f"{d / 'spmd_ckpt'}: {logs[1]}")
    print(f"spmd-run --save-dcp --save-every 1 --keep 1: only {last} kept, equal to the single save; "
          f"--resume-dcp of the folder takes it over an unfinished step-9", flush=True)


def bad_inputs(a, d, prog, ckpt, failures):
    """Each damaged checkpoint: exit 2, one line naming file and tensor, nothing computed."""
    import torch

    def damaged(name, edit, src=ckpt):
        bad = d / name
        shutil.copytree(src, bad)
        edit(bad)
        return bad

    def edit_metadata(change):
        def edit(bad):
            md = pickle.loads((bad / ".metadata").read_bytes())
            change(md)
            (bad / ".metadata").write_bytes(pickle.dumps(md))
        return edit

    def truncate(bad):
        f = bad / "__1_0.distcp"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])

    def shape(md):  # a consistent checkpoint whose norm weight is [2, 32], not [64]
        from torch.distributed.checkpoint.metadata import MetadataIndex
        key = "model.model.norm.weight"
        t = md.state_dict_metadata[key]
        t.size = torch.Size([2, 32])
        for c in t.chunks:
            c.offsets, c.sizes = torch.Size([c.offsets[0] // 32, 0]), torch.Size([1, 32])
        md.storage_data = {(MetadataIndex(key, torch.Size([i.offset[0] // 32, 0])) if i.fqn == key else i): v
                           for i, v in md.storage_data.items()}

    def dtype(md):
        md.state_dict_metadata["model.model.norm.weight"].properties.dtype = torch.float64

    cases = [
        ("truncated", damaged("truncated", truncate), ["__1_0.distcp", "tensor '", "truncated"]),
        ("not_dcp", damaged("not_dcp", lambda b: (b / ".metadata").write_bytes(pickle.dumps({"a": 1}))),
         [".metadata", "not a DCP checkpoint"]),
        ("missing", damaged("missing", edit_metadata(
            lambda md: md.state_dict_metadata.pop("optim.state.model.out.weight.exp_avg"))),
         [".metadata", "optim.model.out.weight.exp_avg"]),
        ("shape", damaged("shape", edit_metadata(shape)), [".metadata", "model.model.norm.weight", "[2, 32]"]),
        ("dtype", damaged("dtype", edit_metadata(dtype)), [".metadata", "model.model.norm.weight", "f64"]),
        # DCP's Hugging Face format: one rank's shard file lost.
        ("hf_shard", damaged("hf_shard", lambda b: (b / "shard-00002-model-00001-of-00001.safetensors").unlink(),
                             ckpt.with_name(ckpt.name + "_hf")),
         ["safetensors headers", "tensor 'model.model.tok.weight'", "is a shard file missing?"]),
    ]
    for name, bad, words in cases:
        log, out = d / f"{name}.log", d / f"{name}.safetensors"
        r = run([a[1], "-n", 4, prog, "--inputs", MODEL / "inputs.safetensors", "--steps", 1, "--resume-dcp", bad,
                 "--loss-log", log, "--output", out, "-q"], check=False)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        ok = (r.returncode == 2 and len(lines) == 1 and all(w in lines[0] for w in words)
              and str(bad) in lines[0] and not out.exists() and not log.exists())
        print(f"bad input {name:9}: exit {r.returncode}: {lines[0] if lines else '(nothing)'}", flush=True)
        if not ok:
            failures.append(f"bad input {name}: want exit 2, one line naming {words} and nothing computed; got "
                            f"exit {r.returncode}, stderr {r.stderr!r}, output written {out.exists()}")


def main():
    a = sys.argv[1:3]
    if len(a) != 2:
        print(__doc__)
        return 1
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"dcp_vs_torch: FAIL: {e} (run scripts/setup.sh; the reference is PyTorch itself)")
        return 1
    t0 = time.time()
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-dcp-") as tmp:
        d = Path(tmp)
        try:
            ckpt, ref = torch_run(d)
            prog = compile_dp_tp(a, d)
            got = check_resume(a, d, prog, ckpt, ref, failures)
            check_save(d, got, ref, failures)
            check_resume(a, d, prog, ckpt.with_name(ckpt.name + "_hf"), ref, failures, save=False)
            check_pipeline(a, d, prog, ckpt, failures)
            check_hf_save(a, d, prog, ckpt, failures)
            check_periodic(a, d, prog, ckpt, failures)
            bad_inputs(a, d, prog, ckpt, failures)
        except RuntimeError as e:
            failures.append(str(e))
    for f in failures[:20]:
        print("FAIL:", f)
    print(f"dcp_vs_torch: {len(failures)} failures, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
