#!/usr/bin/env python3
"""Pipelined AdamW steps on 4 workers against torch.distributed.pipelining
composed with DDP-style all-reduce, FSDP2 and tensor parallelism, on Gloo.

Usage:
    pipeline_mesh_vs_torch.py SPMDC SPMD_RUN [--steps 3] [--all | --only CELL ...]

testdata/pipeline/llama_pipe_train (8 Llama layers, batch 8 x 64) runs
--steps AdamW steps under each cell below, by `spmd-run -n 4`, and in
PyTorch on 4 Gloo processes (one mp.spawn for all cells) with the same
stages as modules (PipelineStage, parameter names as in the model). By
default (ctest's pipeline_mesh_vs_torch) the cells pp4-1f1b,
ppfsdp-interleaved, hf-ppdp-gpipe, hf-ppfsdp-1f1b, hf-pptp-1f1b and
cnn-ppdp-interleaved: every mesh (pp 4, pp x dp, pp x fsdp, pp x tp), every
schedule (GPipe, 1F1B, interleaved 1F1B), all three models; --all runs all
sixteen:

  pp4-1f1b / pp4-gpipe     mesh [4] pp: 4 stages of 2 layers, Schedule1F1B /
                           ScheduleGPipe, 4 microbatches;
  ppdp-1f1b                [2, 2] (pp, dp): 2 stages of 4 layers, Schedule1F1B,
                           2 microbatches per dp rank, each dp rank on its
                           half of the batch, the gradients averaged over
                           the dp sub-group (dist.all_reduce, DDP's sum/2)
                           before torch.optim.AdamW;
  ppdp-interleaved         the same with 4 virtual stages of 2 layers on 2
                           pp ranks, ScheduleInterleaved1F1B;
  ppfsdp-1f1b /            [2, 2] (pp, dp): each stage module fully_shard-ed
  ppfsdp-interleaved       (FSDP2) on the dp sub-mesh of a 2-D DeviceMesh,
                           as torchtitan does; spmdc's "preset": "fsdp";
  pptp-1f1b /              [2, 2] (pp, tp): parallelize_module on the tp
  pptp-interleaved         sub-mesh, wq/wk/wv/w1/w3 ColwiseParallel, wo/w2
                           RowwiseParallel (Megatron); spmdc's rules shard the
                           same weights S(0) / S(1);
  hf-ppdp-1f1b / -gpipe,   testdata/pipeline/hf_llama_pipe_train (a transformers
  hf-ppfsdp-1f1b,          LlamaForCausalLM, 8 decoder layers, batch 4 x 16) on
  hf-pptp-1f1b /           the same meshes: each stage computes the rotary
  -interleaved             tables and causal mask as LlamaModel.forward does;
                           under tp, torch's parallelize_module and spmdc's
                           "tp_plan" both take transformers' base_model_tp_plan
                           (q/k/v/gate/up colwise, o/down rowwise; 1 head of 2
                           per rank);
  cnn-pp4-1f1b /           testdata/pipeline/cnn_pipe_train (pipe_cnn.PipeCNN: 8
  cnn-pp4-gpipe /          conv blocks with nn.GroupNorm, a linear head, cross-
  cnn-ppdp-interleaved     entropy; batch 8 x 3 x 16 x 16) on pp 4, 2 blocks a
                           stage, 4 microbatches, Schedule1F1B / ScheduleGPipe,
                           and on pp 2 x dp 2 as 4 virtual stages
                           (ScheduleInterleaved1F1B): the batch shards over dp
                           and the microbatches (native_group_norm's N is each
                           shard's count).

Per cell, every step's loss (torch's: the mean of the last stage's
microbatch losses, averaged over dp) and, after the last step, every
gradient (torch's p.grad, full_tensor() of a DTensor; spmdc's grad.<fqn>)
and every updated weight must match torch.distributed.pipelining's
(losses 1e-5, gradients and weights 1e-4), and single-device eager PyTorch
(whole batch, torch.optim.AdamW; the same tolerances) for both.
The gradients and weights are held to 1e-4, not 1e-5: a gradient summed
over 4 pieces (microbatches x dp ranks) or over tp shards rounds otherwise
than one device's, and Adam amplifies that to up to 2.4e-5 after 3 steps
(e2e_pipeline_rounding shows with SGD that this is rounding only).
`|a - b| <= tol * max(1, |b|)` on losses, `||a - b|| <= tol ||b|| +
1e-6 sqrt(n)` on tensors. The point-to-point traffic must also be
PyTorch's, rank by rank: the sends and bytes each spmdc rank sends per step
(every value read on another stage, per microbatch, from `spmdc dump`'s
places; virtual stage c on pipeline rank c mod pp, each of its copies on the
other axis sending the same) equal every dist.isend of that torch process
in its last step (a pp x dp schema without "preset": "dp" replicates the
batch over dp and fails here: twice the bytes).

Exit 0 when everything matches, 1 otherwise (also when torch is missing:
nothing is skipped).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline_vs_torch as pvt  # noqa: E402

WORLD = 4
LAYERS = 8
TP_PLAN = {"wq": "col", "wk": "col", "wv": "col", "w1": "col", "w3": "col", "wo": "row", "w2": "row"}
TP_RULES = [{"match": "*layers.*.w[qkv13].weight", "placements": {"tp": "S(0)"}},
            {"match": "*layers.*.w[o2].weight", "placements": {"tp": "S(1)"}}]
# The HF Llama's: transformers' own base_model_tp_plan (lm_head replicated on both sides).
HF_TP_PLAN = {"self_attn.q_proj": "col", "self_attn.k_proj": "col", "self_attn.v_proj": "col",
              "self_attn.o_proj": "row", "mlp.gate_proj": "col", "mlp.up_proj": "col", "mlp.down_proj": "row"}

HF_MODEL = pvt.ROOT / "testdata" / "pipeline" / "hf_llama_pipe_train"
HF_CONFIG = dict(layers=8, hidden=32, heads=2, vocab=256, batch=4, seq=16)  # testdata/pipeline/export.py
CNN_MODEL = pvt.ROOT / "testdata" / "pipeline" / "cnn_pipe_train"

# cell: (pp, inner axis or None, schedule, microbatches[, "hf": hf_llama_pipe_train, "cnn": cnn_pipe_train])
CELLS = {
    "pp4-1f1b": (4, None, "1f1b", 4),
    "pp4-gpipe": (4, None, "gpipe", 4),
    "ppdp-1f1b": (2, "dp", "1f1b", 2),
    "ppdp-interleaved": (2, "dp", "interleaved-1f1b", 2),
    "ppfsdp-1f1b": (2, "fsdp", "1f1b", 2),
    "ppfsdp-interleaved": (2, "fsdp", "interleaved-1f1b", 2),
    "pptp-1f1b": (2, "tp", "1f1b", 2),
    "pptp-interleaved": (2, "tp", "interleaved-1f1b", 2),
    "hf-ppdp-1f1b": (2, "dp", "1f1b", 2, "hf"),
    "hf-ppdp-gpipe": (2, "dp", "gpipe", 2, "hf"),
    "hf-ppfsdp-1f1b": (2, "fsdp", "1f1b", 2, "hf"),
    "hf-pptp-1f1b": (2, "tp", "1f1b", 2, "hf"),
    "hf-pptp-interleaved": (2, "tp", "interleaved-1f1b", 2, "hf"),
    "cnn-pp4-1f1b": (4, None, "1f1b", 4, "cnn"),
    "cnn-pp4-gpipe": (4, None, "gpipe", 4, "cnn"),
    "cnn-ppdp-interleaved": (2, "dp", "interleaved-1f1b", 2, "cnn"),
}
# Cells whose dp gradient buckets are checked (check_buckets).
BUCKET_CELLS = ["hf-ppdp-gpipe", "hf-ppdp-1f1b", "ppdp-1f1b", "ppdp-interleaved"]
DEFAULT_CELLS = ["pp4-1f1b", "ppfsdp-interleaved", "hf-ppdp-gpipe", "hf-ppfsdp-1f1b", "hf-pptp-1f1b",
                 "cnn-ppdp-interleaved"]


def n_stages(pp, schedule):
    return pp * (2 if schedule == "interleaved-1f1b" else 1)


def spmd_schema(pp, inner, schedule, microbatches, kind="llama"):
    pipe = {"axis": "pp", "stages": pp, "schedule": schedule, "microbatches": microbatches}
    if schedule == "interleaved-1f1b":  # the layers split evenly over pp x 2 stages
        pipe["virtual_stages"] = 2
    if inner is None:
        return {"version": 1, "mesh": {"shape": [WORLD], "axes": ["pp"]}, "pipeline": pipe}
    axis = "tp" if inner == "tp" else "dp"
    schema = {"version": 1, "mesh": {"shape": [2, 2], "axes": ["pp", axis]}, "pipeline": pipe}
    if inner in ("dp", "fsdp"):  # without a preset, the dp axis would replicate the batch
        schema["preset"] = inner
    if inner == "tp" and kind == "hf":  # transformers' plan, as the model's config gives it
        plan = json.loads((HF_MODEL / "tp_plan.json").read_text())["base_model_tp_plan"]
        schema["tp_plan"] = plan
    elif inner == "tp":
        schema["params"] = TP_RULES
    return schema


# Each export's state_dict (torch.export.load takes seconds): read once by
# the main process, handed to the workers.
STATES = {}


def state_of(model_dir):
    if model_dir.name not in STATES:
        STATES[model_dir.name] = read_weights(model_dir / "model.pt2")
    return STATES[model_dir.name]


def read_weights(pt2):
    """The exported program's state_dict, read from the archive's weight
    files (torch.export.load would also rebuild the graph: 10 s for the HF
    Llama under load); torch.export.load's when a weight is pickled or not
    a dense, contiguous tensor."""
    import zipfile
    import torch
    dtypes = {5: torch.int64, 6: torch.float16, 7: torch.float32, 12: torch.bool, 13: torch.bfloat16}  # serde's
    with zipfile.ZipFile(pt2) as z:
        names = {n.split("/data/weights/", 1)[1]: n for n in z.namelist() if "/data/weights/" in n}
        config = json.loads(z.read(names["model_weights_config.json"]))["config"]
        state = {}
        for fqn, w in config.items():
            meta = w["tensor_meta"]
            sizes, strides = ([d.get("as_int") for d in meta[k]] for k in ("sizes", "strides"))
            if w["use_pickle"] or meta["dtype"] not in dtypes or meta["storage_offset"].get("as_int") != 0 or \
                    None in sizes or strides != list(torch.empty(sizes).stride()):
                return torch.export.load(str(pt2)).state_dict
            data = bytearray(z.read(names[w["path_name"]]))
            dtype = dtypes[meta["dtype"]]
            t = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
            state[fqn] = t[:torch.Size(sizes).numel()].reshape(sizes)
    return state


def load_hf():
    """The transformers LlamaForCausalLM of hf_llama_pipe_train (logits
    out), its weights read from the export."""
    sys.path.insert(0, str(pvt.ROOT / "python"))
    from spmdc_export import hf
    m = hf.build("llama", train=True, **HF_CONFIG).module
    m.load_state_dict(state_of(HF_MODEL))
    return m


def hf_chunk(m, layers, first, last):
    """Decoder layers `layers` of LlamaForCausalLM `m` as one stage (the
    embedding on the first, the norm and lm_head on the last), each stage
    computing the rotary tables and causal mask as LlamaModel.forward does."""
    import torch
    import torch.nn as nn
    from transformers.masking_utils import create_causal_mask

    class Chunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Module()
            if first:
                self.model.embed_tokens = m.model.embed_tokens
            self.model.layers = nn.ModuleDict({str(i): m.model.layers[i] for i in layers})
            self.model.rotary_emb = m.model.rotary_emb
            if last:
                self.model.norm, self.lm_head = m.model.norm, m.lm_head

        def forward(self, x):
            if first:
                x = self.model.embed_tokens(x)
            pos = torch.arange(x.shape[1])
            mask = create_causal_mask(config=m.config, input_embeds=x, attention_mask=None, cache_position=pos,
                                      past_key_values=None, position_ids=pos[None])
            rope = self.model.rotary_emb(x, pos[None])
            for layer in self.model.layers.values():
                x = layer(x, attention_mask=mask, position_ids=pos[None], position_embeddings=rope)
            return self.lm_head(self.model.norm(x)) if last else x

    return Chunk()


def load_cnn():
    """pipe_cnn.PipeCNN with cnn_pipe_train's exported weights."""
    sys.path.insert(0, str(CNN_MODEL.parent))
    import pipe_cnn
    m = pipe_cnn.PipeCNN()
    m.load_state_dict(state_of(CNN_MODEL))
    return m


def cnn_chunk(m, layers, first, last):
    """Blocks `layers` of PipeCNN `m` as one stage (the head on the last:
    logits out), parameters named as in `m`."""
    import torch.nn as nn

    class Chunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleDict({str(i): m.layers[i] for i in layers})
            if last:
                self.head = m.head

        def forward(self, x):
            for layer in self.layers.values():
                x = layer(x)
            return self.head(x.flatten(1)) if last else x

    return Chunk()


def model_kind(cell):
    return CELLS[cell][4] if len(CELLS[cell]) > 4 else "llama"


def model_of_dir(cell):
    return {"hf": HF_MODEL, "cnn": CNN_MODEL, "llama": pvt.PIPE_MODEL}[model_kind(cell)]


def model_of(cell):
    """(module, chunk builder, (inputs, labels), export dir) of `cell`'s model."""
    from safetensors.torch import load_file
    kind, d = model_kind(cell), model_of_dir(cell)
    if kind == "llama":
        return pvt.load_pipe_model(state_of(d)), pvt.llama_chunk, pvt.pipe_batch(), d
    inputs = load_file(str(d / "inputs.safetensors"))
    m, chunk = (load_hf(), hf_chunk) if kind == "hf" else (load_cnn(), cnn_chunk)
    return m, chunk, (inputs["input.0"], inputs["input.1"]), d


def apply_tp(chunk, tp_mesh, kind):
    """Megatron TP of each layer of `chunk` on `tp_mesh` (parallelize_module;
    the HF layers' attention views its heads as -1, so it runs on the local
    heads as transformers' own tp_plan does)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for name, layer in chunk.model.layers.items():
        styles = HF_TP_PLAN if kind == "hf" else TP_PLAN
        plan = {k: ColwiseParallel() if v == "col" else RowwiseParallel() for k, v in styles.items()}
        parallelize_module(layer, tp_mesh, plan)


def full(t):
    """A plain tensor of `t` (a DTensor's full_tensor())."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def run_cell(cell, rank, steps):
    """One cell on this process: returns {"losses", "params", "grads",
    "sent"} (losses on the last stage's ranks only)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)
    pp, inner, schedule, microbatches = CELLS[cell][:4]
    if inner is None:
        pp_group, pp_rank, inner_rank, inner_mesh = None, rank, 0, None
    else:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "inner"))
        pp_group, inner_mesh = mesh["pp"].get_group(), mesh["inner"]
        pp_rank, inner_rank = mesh.get_coordinate()
    m, chunk, (tokens, labels), _ = model_of(cell)
    n = n_stages(pp, schedule)
    per = LAYERS // n
    chunks = [chunk(m, range(per * c, per * c + per), c == 0, c == n - 1) for c in range(n)]
    if inner in ("dp", "fsdp"):  # each dp rank its contiguous half of the batch
        half = tokens.shape[0] // 2
        tokens, labels = tokens[inner_rank * half:][:half], labels[inner_rank * half:][:half]
    mb = tokens.shape[0] // microbatches
    mine = list(range(pp_rank, n, pp))
    examples = [tokens[:mb]]  # each stage's input: the stages before it on one microbatch
    with torch.no_grad():
        for c in range(n - 1):
            examples.append(chunks[c](examples[-1]))
    stages, mods = [], []
    for c in mine:
        example = examples[c]
        mod = chunks[c]
        if inner == "tp":
            apply_tp(mod, inner_mesh, model_kind(cell))
        if inner == "fsdp":
            from torch.distributed.fsdp import fully_shard
            mod = fully_shard(mod, mesh=inner_mesh, reshard_after_forward=False)
        stages.append(PipelineStage(mod, c, n, torch.device("cpu"), input_args=(example,), group=pp_group))
        mods.append(mod)

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    if schedule == "interleaved-1f1b":
        sched = ScheduleInterleaved1F1B(stages, n_microbatches=microbatches, loss_fn=loss_fn)
    else:
        cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
        sched = cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    params = [p for mod in mods for p in mod.parameters()]
    opt = pvt.adamw(params)
    sent, losses, last = pvt.count_sends(), [], n - 1 in mine
    for _ in range(steps):
        sent[:] = [0, 0]
        opt.zero_grad()
        mbl = []
        if 0 in mine and last:
            sched.step(tokens, target=labels, losses=mbl)
        elif 0 in mine:
            sched.step(tokens)
        elif last:
            sched.step(target=labels, losses=mbl)
        else:
            sched.step()
        if inner == "dp":  # DDP's all-reduce of the gradients, averaged
            for p in params:
                dist.all_reduce(p.grad, group=inner_mesh.get_group())
                p.grad /= 2
        if last:
            losses.append(sum(x.item() for x in mbl) / len(mbl))
        opt.step()
    named = [(k, p) for mod in mods for k, p in mod.named_parameters()]
    return {"losses": losses, "params": {k: full(p.detach()).clone() for k, p in named},
            "grads": {k: full(p.grad).clone() for k, p in named}, "sent": list(sent), "last": last,
            "inner_rank": inner_rank}


def torch_worker(rank, cells, steps, store_path, out_path, states):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    STATES.update(states)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    results = {}
    for cell in cells:
        try:
            results[cell] = run_cell(cell, rank, steps)
        except Exception as e:  # reported per cell, the others still run
            results[cell] = {"error": f"{type(e).__name__}: {e}"}
        dist.barrier()
    torch.save(results, f"{out_path}.{rank}")
    dist.destroy_process_group()


def torch_cells(cells, steps, d):
    """Every cell on 4 Gloo processes: {cell: (losses, params, grads, sent)} or {cell: error}."""
    import torch
    import torch.multiprocessing as mp
    store, out = d / "store_mesh", d / "torch_mesh"
    states = {m.name: state_of(m) for m in {model_of_dir(c) for c in cells}}
    mp.spawn(torch_worker, args=(cells, steps, str(store), str(out), states), nprocs=WORLD, join=True)
    ranks = [torch.load(f"{out}.{r}") for r in range(WORLD)]
    merged = {}
    for cell in cells:
        rs = [r[cell] for r in ranks]
        errors = [r["error"] for r in rs if "error" in r]
        if errors:
            merged[cell] = errors[0]
            continue
        lasts = [r["losses"] for r in rs if r["last"] and r["losses"]]
        losses = [sum(x) / len(x) for x in zip(*lasts)] if CELLS[cell][1] in ("dp", "fsdp") else lasts[0]
        params, grads = {}, {}
        for r in rs:
            if r["inner_rank"] == 0:
                params.update(r["params"])
                grads.update(r["grads"])
        merged[cell] = (losses, params, grads, [r["sent"] for r in rs])  # sends and bytes per rank
    return merged


def eager_reference(cell, steps):
    """One device, whole batch: losses, the last step's gradients, weights."""
    import torch.nn.functional as F
    m, _, (tokens, labels), _ = model_of(cell)
    opt, losses = pvt.adamw(m.parameters()), []
    for _ in range(steps):
        opt.zero_grad()
        if model_kind(cell) == "hf":  # logits out
            loss = F.cross_entropy(m(tokens).flatten(0, 1).float(), labels.flatten())
        else:
            loss = m(tokens, labels)
        loss.backward()
        losses.append(loss.item())
        grads = {k: p.grad.detach().clone() for k, p in m.named_parameters()}
        opt.step()
    return losses, {k: p.detach().clone() for k, p in m.named_parameters()}, grads


def spmd_cell(a, cell, steps, d):
    """spmdc's run of `cell`: (losses, params, grads, sends per step)."""
    from safetensors.torch import load_file
    pp, inner, schedule, microbatches = CELLS[cell][:4]
    losses, params, dump = pvt.spmd_run(a, model_of(cell)[3],
                                        spmd_schema(pp, inner, schedule, microbatches, model_kind(cell)), cell,
                                        steps, WORLD, d)
    outputs = load_file(str(d / f"{cell}.out.safetensors"))
    grads = {k[len("grad."):]: v for k, v in outputs.items() if k.startswith("grad.")}
    return losses, params, grads, sends_per_rank(dump, pp, microbatches), dump


def sends_per_rank(dump, pp, microbatches):
    """[sends, bytes] each of spmdc's world ranks sends per step, from the
    program: virtual stage c runs on pipeline rank c mod pp, world rank =
    pipeline rank x (ranks of the other axis) + rank among them, and each of
    a stage's ranks sends what the program's places say."""
    by_stage = pvt.p2p_by_stage(dump, microbatches)
    inner = WORLD // pp
    per_pp = [[0, 0] for _ in range(pp)]
    for stage, (count, size) in by_stage.items():
        per_pp[stage % pp][0] += count
        per_pp[stage % pp][1] += size
    return [list(per_pp[r // inner]) for r in range(WORLD)]


def step_reductions(dump, axis="dp"):
    """{kind: count} of the collectives over `axis` in the optimizer steps
    (placed @S<stage>), and of those elsewhere (key "other")."""
    import re
    counts = {}
    for m in re.finditer(r"= spmd\.(\w+)\(.*axis=\"" + axis + r"\".*@(\S+)", dump):
        key = m.group(1) if m.group(2).startswith("S") else "other"
        counts[key] = counts.get(key, 0) + 1
    return counts


def check_buckets(a, cell, spmd, d):
    """A pp x dp program reduces its gradients over dp as DDP does under
    torch.distributed.pipelining: accumulated over the microbatches first,
    then all-reduced once per step in buckets (one per stage here: the
    default 25 MiB holds a stage's gradients), no all-gather or reduce-
    scatter; with --bucket-mb 0, one all-reduce per parameter, and the
    same losses, gradients and weights, bit for bit."""
    pp, inner, schedule, microbatches = CELLS[cell][:4]
    model, failures = model_of_dir(cell), []
    schema = spmd_schema(pp, inner, schedule, microbatches, model_kind(cell))
    bucketed = step_reductions(spmd[4])
    plain_prog = pvt.spmd_compile(a, model, schema, cell + "-nobucket", d, ("--bucket-mb", "0"))
    plain_dump = subprocess.run([a.spmdc, "dump", plain_prog], check=True, capture_output=True,
                                text=True).stdout
    plain = step_reductions(plain_dump)
    params = sum(1 for line in plain_dump.splitlines() if line.startswith("input ") and " parameter " in line)
    stages = n_stages(pp, schedule)
    if set(bucketed) - {"all_reduce", "other"} or bucketed.get("all_reduce") != stages + 1:
        failures.append(f"{cell}: the steps reduce over dp with {bucketed}; want {stages} buckets (one per "
                        f"stage) and the loss's all-reduce, no all-gather or reduce-scatter")
    if plain.get("all_reduce", 0) <= bucketed.get("all_reduce", 0) + 2 * params // 3:
        failures.append(f"{cell}: --bucket-mb 0 reduces over dp with {plain}, bucketed {bucketed}: want one "
                        f"all-reduce per parameter ({params}) against a few")
    report = d / f"{cell}.report.json"
    pvt.spmd_compile(a, model, schema, cell + "-report", d, ("--report", report))
    reasons = [c.get("reason", "") for c in json.loads(report.read_text())["collectives"]]
    if sum("bucket of" in r for r in reasons) != stages:  # the report names each bucket
        failures.append(f"{cell}: --report lists {sum('bucket of' in r for r in reasons)} buckets, want {stages}")
    log, out = d / f"{cell}-nobucket.log", d / f"{cell}-nobucket.out.safetensors"
    subprocess.run([a.spmd_run, "-n", str(WORLD), plain_prog, "--inputs", model / "inputs.safetensors",
                    "--steps", "3", "--loss-log", log, "--output", out, "-q"], check=True)
    from safetensors.torch import load_file
    losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    mine, theirs = load_file(str(d / f"{cell}.out.safetensors")), load_file(str(out))
    differ = [k for k in mine if k not in theirs or not mine[k].equal(theirs[k])]
    if losses != spmd[0] or differ or set(theirs) != set(mine):
        failures.append(f"{cell}: buckets change the results: losses {spmd[0]} vs {losses}, outputs {differ[:3]}")
    print(f"{cell}: dp reductions per step bucketed {bucketed}, --bucket-mb 0 {plain}")
    return failures


def check_cell(cell, spmd, torch_result, want):
    losses, params, grads = want
    failures = []
    if isinstance(torch_result, str):
        failures.append(f"{cell}: torch.distributed.pipelining failed on Gloo: {torch_result}")
    else:
        t_losses, t_params, t_grads, _ = torch_result
        failures += pvt.compare(f"{cell}: torch.distributed.pipelining vs eager", t_losses, t_params, losses,
                                params, 1e-5, 1e-4)
        failures += pvt.compare(f"{cell}: torch gradients vs eager", t_losses, t_grads, losses, grads, 1e-5, 1e-4)
        failures += pvt.compare(f"{cell}: spmdc vs torch.distributed.pipelining", spmd[0], spmd[1], t_losses,
                                t_params, 1e-5, 1e-4)
        failures += pvt.compare(f"{cell}: spmdc gradients vs torch", spmd[0], spmd[2], t_losses, t_grads, 1e-5,
                                1e-4)
    failures += pvt.compare(f"{cell}: spmdc vs eager", spmd[0], spmd[1], losses, params, 1e-5, 1e-4)
    failures += pvt.compare(f"{cell}: spmdc gradients vs eager", spmd[0], spmd[2], losses, grads, 1e-5, 1e-4)
    return failures


def fmt_sent(per_rank):
    return " ".join(f"{c}/{b:,}B" for c, b in per_rank)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", action="append", choices=sorted(CELLS))
    ap.add_argument("--all", action="store_true", help="every cell")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"pipeline_mesh_vs_torch: error: {e}", file=sys.stderr)
        return 1
    cells = list(CELLS) if a.all else a.only or DEFAULT_CELLS
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        torch_results = torch_cells(cells, a.steps, d)
        for cell in cells:
            spmd = spmd_cell(a, cell, a.steps, d)
            t = torch_results[cell]
            failures += check_cell(cell, spmd, t, eager_reference(cell, a.steps))
            if cell in BUCKET_CELLS:
                failures += check_buckets(a, cell, spmd, d)
            t_sent = None if isinstance(t, str) else t[3]
            if t_sent is not None and (spmd[3] != t_sent or sum(c for c, _ in t_sent) == 0):
                failures.append(f"{cell}: spmdc's ranks send (tensors, bytes) {fmt_sent(spmd[3])} per step; "
                                f"torch.distributed.pipelining's {fmt_sent(t_sent)}")
            print(f"{cell}: losses spmdc {['%.6f' % x for x in spmd[0]]} torch "
                  f"{t if isinstance(t, str) else ['%.6f' % x for x in t[0]]}; sends per step and rank spmdc "
                  f"{fmt_sent(spmd[3])} torch {t_sent and fmt_sent(t_sent)}")
    for f in failures:
        print("FAIL", f)
    print("pipeline_mesh_vs_torch:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
