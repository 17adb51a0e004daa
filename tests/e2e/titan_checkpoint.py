#!/usr/bin/env python3
"""spmd-run resumes a checkpoint written by torchtitan's own CheckpointManager.

Usage:
    titan_checkpoint.py SPMDC SPMD_RUN

torchtitan (0.2.2, python/requirements-titan.txt) trains testdata/pt2/llama_train's
model with FSDP2 (fully_shard per layer and at the root) on 2 Gloo processes.
Its optimizer is torchtitan's OptimizersContainer (torch.optim.AdamW, the
hyper-parameters of dcp_vs_torch.py), its learning rate a constant
LRSchedulersContainer, and its checkpointer torchtitan's CheckpointManager
(checkpoint.enable, interval 2), which writes <dump>/checkpoint/step-2/ as a
torchtitan run does: the model's keys flattened to the top level,
"optimizer.state.<fqn>.<state>" (flattened optimizer state dicts),
"lr_scheduler", "train_state". The run goes on for 2 more steps.

spmd-run then resumes the checkpoint folder (--resume-dcp <dump>/checkpoint,
which picks step-2) on 4 ranks under dp x tp (2x2, Megatron TP) and runs 2
steps: the logged steps must be 2 and 3, and the losses and the final
parameters must match torchtitan's continued run (relative 1e-5), as
dcp_vs_torch.py checks for torch's own dcp.save. Exit 0 when everything
holds, 1 otherwise (also when torchtitan or torch is missing: nothing is
skipped).
"""
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dcp_vs_torch import HP, MODEL, MORE, ROOT, SAVED_AT, check_resume, compile_dp_tp  # noqa: E402


def titan_worker(rank, store, dump, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from safetensors.torch import load_file
    from torchtitan.components.checkpoint import CheckpointManager
    from torchtitan.components.lr_scheduler import LRSchedulersContainer
    from torchtitan.components.optimizer import OptimizersContainer
    from torchtitan.config.job_config import Checkpoint
    sys.path.insert(0, str(ROOT / "testdata"))
    from export_models import LlamaLoss

    class TrainState:  # what torchtitan's Trainer saves as "train_state"
        step = 0

        def state_dict(self):
            return {"step": torch.tensor(self.step)}

        def load_state_dict(self, sd):
            self.step = int(sd["step"])

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    m = LlamaLoss()
    m.load_state_dict(torch.export.load(str(MODEL / "model.pt2")).state_dict)
    for layer in m.model.layers:
        fully_shard(layer)
    fully_shard(m)
    opts = OptimizersContainer([m], torch.optim.AdamW, dict(HP))
    scheds = LRSchedulersContainer(opts, lambda _: 1.0)
    train_state = TrainState()
    ckpt = CheckpointManager(dataloader=None, model_parts=[m], optimizers=opts, lr_schedulers=scheds,
                             states={"train_state": train_state},
                             checkpoint_config=Checkpoint(enable=True, interval=SAVED_AT), sd_adapter=None,
                             base_folder=dump)
    inputs = load_file(str(MODEL / "inputs.safetensors"))  # both ranks: the whole batch (FSDP averages)
    losses = []
    for step in range(1, SAVED_AT + MORE + 1):  # torchtitan counts steps from 1
        train_state.step = step
        opts.zero_grad()
        loss = m(inputs["input.0"], inputs["input.1"])
        loss.backward()
        losses.append(loss.item())
        opts.step()
        scheds.step()
        if step <= SAVED_AT:
            ckpt.save(curr_step=step)
    ckpt.close()
    full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    params = {k: full(v).detach().clone() for k, v in m.state_dict().items()}
    if rank == 0:
        torch.save({"losses": losses, "params": params, "names": [k for k, _ in m.named_parameters()]}, out)
    dist.destroy_process_group()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    try:
        import torch
        import torch.multiprocessing as mp
        import torchtitan.components.checkpoint  # noqa: F401
    except ImportError as e:
        print(f"titan_checkpoint: FAIL: {e} (scripts/setup.sh installs python/requirements-titan.txt)")
        return 1
    t0, failures = time.time(), []
    with tempfile.TemporaryDirectory(prefix="spmdc-titan-") as tmp:
        d = Path(tmp)
        dump, out = d / "outputs", d / "titan.pt"
        mp.spawn(titan_worker, args=(str(d / "store"), str(dump), str(out)), nprocs=2, join=True)
        ref = torch.load(out)
        folder = dump / "checkpoint"
        saved = sorted(p.name for p in folder.iterdir())
        if saved != [f"step-{SAVED_AT}"]:
            failures.append(f"torchtitan wrote {saved}, want [step-{SAVED_AT}]")
        prog = compile_dp_tp(sys.argv[1:], d)
        try:
            check_resume(sys.argv[1:], d, prog, folder, ref, failures, save=False)
        except RuntimeError as e:
            failures.append(str(e))
    for f in failures[:20]:
        print("FAIL:", f)
    print(f"titan_checkpoint: {len(failures)} failures, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
