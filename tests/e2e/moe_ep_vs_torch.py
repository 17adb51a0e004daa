#!/usr/bin/env python3
"""Expert parallelism: a MoE train step under ep against eager PyTorch.

Usage:
    moe_ep_vs_torch.py SPMDC SPMD_RUN [--steps 3] [--cases ep4,ep2,...] [--routers balanced,one_expert,...]

The model is a torchtitan-style MoE layer (a linear in, a softmax router with
top-2 over 8 experts whose FFNs are stacked w1/w2/w3 [E, ...], a linear out,
a residual) and an MSE loss. The reference is that module in eager PyTorch,
its experts a plain loop over experts (`MoeRef.experts`), with autograd and
torch.optim.AdamW. The exported copy computes the experts with
spmdc_export.experts (the spmdc::moe_experts op pair). For each router

    balanced      random routing
    one_expert    every token's first choice is expert 0
    empty_ranks   every token goes to experts 0 and 1: under ep 2 and ep 4
                  the other ranks receive no token at all

and each layout on 4 workers

    ep4     mesh 4 (ep): tokens and experts split over ep
    ep2     mesh 2x2 (dp, ep): tokens over both, experts over ep
    ep_fsdp mesh 2x2 (fsdp, ep): as ep2, every parameter also stored sharded
            over fsdp (experts on their other dim) and gathered before use
    ep_tp   mesh 2x2 (ep, tp): tokens over ep, replicated over tp; the experts
            over ep and their FFN dim over tp (torchtitan's expert TP: w1, w3
            column-wise S(1), w2 row-wise S(2)); the experts' output is a
            pending sum over tp. Its --report's tp collective bytes are set
            beside Megatron's formula (an all-reduce of the tokens' [T, D] in
            the forward and one of their gradient in the backward) and must
            equal it plus the routing weights' gradient's all-reduce ([T, 2]).
            --hidden-uneven H also runs ep_tp with an FFN dim H that
            does not divide over tp (torch.chunk shards; loss and gradients)

the compiled step (no optimizer) must give eager's loss and gradients, and
spmd-run's tokens per expert (its summary) eager's routing counts, its
torchtitan all-to-all figure torchtitan's formula over eager's routing
(torchtitan_bytes), and
the compiled AdamW step must give eager's loss at every one of --steps steps
and eager's parameters after the last (|a - b| <= 1e-5 * max(1, |b|)
for losses; ||a - b|| <= 1e-5 * ||b|| + 1e-6 * sqrt(n) for tensors).
Bad input: 6 experts stacked on an ep axis of 4 must be refused by spmdc
compile in one line with exit 2. The program must hold spmd.moe_experts
(the exchange) under every layout. Exit 0 when everything matches, 1
otherwise (also when torch is missing: nothing is skipped).
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
sys.path.insert(0, str(ROOT / "python"))
TOL = 1e-5
ATOL = 1e-6
DIM, HIDDEN, EXPERTS, TOP_K, BATCH, SEQ = 16, 24, 8, 2, 4, 8
ADAMW = dict(lr=1e-2, betas=(0.85, 0.95), eps=1e-7, weight_decay=0.1)


def make_models(router, experts=EXPERTS, hidden=HIDDEN):
    import torch
    import torch.nn.functional as F
    from torch import nn
    from spmdc_export.experts import experts as spmdc_experts

    class MoeRef(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(DIM, DIM)
            self.router = nn.Linear(DIM, experts)
            self.w1 = nn.Parameter(torch.randn(experts, hidden, DIM) * 0.2)
            self.w2 = nn.Parameter(torch.randn(experts, DIM, hidden) * 0.2)
            self.w3 = nn.Parameter(torch.randn(experts, hidden, DIM) * 0.2)
            self.out = nn.Linear(DIM, DIM)

        def experts(self, t, idx, w):
            out = torch.zeros_like(t)
            for e in range(self.w1.shape[0]):
                tok, k = torch.nonzero(idx == e, as_tuple=True)
                h = F.silu(t[tok] @ self.w1[e].t()) * (t[tok] @ self.w3[e].t())
                out = out.index_add(0, tok, (h @ self.w2[e].t()) * w[tok, k, None])
            return out

        def forward(self, x):
            t = self.inp(x).reshape(-1, DIM)
            scores = F.softmax(self.router(t), dim=-1)
            w, idx = torch.topk(scores, TOP_K, dim=-1)
            return self.out(self.experts(t, idx, w).reshape(x.shape)) + x

    class MoeSpmd(MoeRef):
        def experts(self, t, idx, w):
            return spmdc_experts(t, idx, w, self.w1, self.w2, self.w3)

    torch.manual_seed(0)
    ref = MoeRef()
    with torch.no_grad():
        if router == "one_expert":
            ref.router.bias[0] += 30.0
        elif router == "empty_ranks":
            ref.router.bias[:2] += 30.0
    spmd = MoeSpmd()
    spmd.load_state_dict(ref.state_dict())
    x = torch.randn(BATCH, SEQ, DIM)
    y = torch.randn(BATCH, SEQ, DIM)
    return ref, spmd, x, y


def schema(d, name):
    """The placement schema of layout `name` (see the module's doc)."""
    experts = {"match": "w[123]", "placements": {"ep": "S(0)"}}
    if name == "ep4":
        mesh, batch, params = {"shape": [4], "axes": ["ep"]}, {"ep": "S(0)"}, [experts]
    elif name == "ep_tp":
        mesh, batch = {"shape": [2, 2], "axes": ["ep", "tp"]}, {"ep": "S(0)"}
        params = [{"match": "w[13]", "placements": {"ep": "S(0)", "tp": "S(1)"}},
                  {"match": "w2", "placements": {"ep": "S(0)", "tp": "S(2)"}}]
    else:
        axis = "fsdp" if name == "ep_fsdp" else "dp"
        mesh, batch, params = {"shape": [2, 2], "axes": [axis, "ep"]}, {axis: "S(0)", "ep": "S(0)"}, [experts]
        if name == "ep_fsdp":
            params = [{"match": "w[123]", "placements": {"ep": "S(0)", "fsdp": "S(1)"}, "gather": ["fsdp"]},
                      {"match": "*.weight", "placements": {"fsdp": "S(0)"}, "gather": True},
                      {"match": "*.bias", "placements": {"fsdp": "S(0)"}, "gather": True}]
    s = {"version": 1, "mesh": mesh, "params": params, "inputs": [{"match": "*", "placements": batch}],
         "outputs": "replicate"}
    path = d / f"{name}.json"
    path.write_text(json.dumps(s))
    return path


def run(cmd, ok=(0,)):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode not in ok:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def export(d, router, experts=EXPERTS, hidden=HIDDEN):
    """Exports the step of the spmdc copy; returns (reference module, x, y, case folder)."""
    import torch.nn.functional as F
    import spmdc_export
    ref, spmd, x, y = make_models(router, experts, hidden)
    out = d / f"moe_{router}_{experts}_{hidden}"
    spmdc_export.export_train_step(spmd, (x,), str(out), loss_fn=F.mse_loss, targets=(y,))
    return ref, x, y, out


def eager(ref, x, y, steps):
    """Eager loss and gradients of the first step; losses of `steps` AdamW
    steps and the parameters after them (the module is copied)."""
    import copy
    import torch
    import torch.nn.functional as F
    m = copy.deepcopy(ref)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), **ADAMW)
    losses, grads = [], None
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        if grads is None:
            grads = {k: p.grad.detach().clone() for k, p in m.named_parameters()}
        losses.append(loss.item())
        opt.step()
    return losses, grads, {k: p.detach().clone() for k, p in m.named_parameters()}


def close(what, got, want, bad):
    import torch
    if got is None:
        bad.append(f"{what}: missing from the outputs")
        return 0.0
    got, want = got.double(), want.double()
    diff = float((got - want).norm())
    bound = TOL * float(want.norm()) + ATOL * math.sqrt(want.numel())
    if not diff <= bound or not bool(torch.isfinite(got).all()):
        bad.append(f"{what}: differs from eager by {diff:.3g} (bound {bound:.3g})")
    return diff / max(float(want.norm()), 1e-30)


def torchtitan_bytes(idx, case):
    """torchtitan's expert-parallel all-to-all bytes per step, the most any
    rank sends, from eager's routing `idx` [tokens, top-k]: each rank
    dispatches the (token, choice) rows whose expert lives on another ep
    rank and sends back the results of the rows it received; the backward
    sends their gradients the same ways: 2 x (out + in) x DIM x 4 bytes."""
    ep = 4 if case == "ep4" else 2
    # The ep groups, each a list of its ranks' batch rows by ep coordinate:
    # dp x ep splits the batch over dp, then ep (row b at ep coordinate
    # b % ep); ep x tp over ep alone (BATCH / ep rows each, tp replicas
    # send the same).
    if case == "ep_tp":
        per = BATCH // ep
        groups = [[list(range(c * per, (c + 1) * per)) for c in range(ep)]]
    else:
        groups = [[[b] for b in range(g * ep, (g + 1) * ep)] for g in range(BATCH // ep)]
    owner = (idx // (EXPERTS // ep)).reshape(BATCH, SEQ * TOP_K)  # the ep rank of each choice, by batch row
    sent = []
    for group in groups:
        for c, rows in enumerate(group):
            out = sum(int((owner[b] != c).sum()) for b in rows)
            into = sum(int((owner[b] == c).sum()) for o, other in enumerate(group) if o != c for b in other)
            sent.append(2 * (out + into) * DIM * 4)
    return max(sent)


def check_tokens(tag, summary, ref, x, bad, case):
    """spmd-run's tokens per expert (its summary line) against eager's
    routing, and its torchtitan all-to-all figure against torchtitan_bytes."""
    import torch
    import torch.nn.functional as F
    with torch.no_grad():
        scores = F.softmax(ref.router(ref.inp(x).reshape(-1, DIM)), dim=-1)
        idx = torch.topk(scores, TOP_K, dim=-1).indices
        want = torch.bincount(idx.reshape(-1), minlength=EXPERTS).tolist()
    line = next((ln for ln in summary.splitlines() if "tokens per expert per step" in ln), "")
    got = [int(float(v)) for v in line.partition(": [")[2].rstrip("]").split(",") if v.strip()]
    if got != want:
        bad.append(f"{tag}: spmd-run's tokens per expert {got or line!r}, eager routes {want}")
    traffic = next((ln.strip() for ln in summary.splitlines() if "torchtitan's ep" in ln), None)
    if traffic is None:
        bad.append(f"{tag}: spmd-run's summary has no MoE all-to-all bytes line")
    else:
        titan = torchtitan_bytes(idx, case)
        said = int(traffic.partition("torchtitan's ep ")[2].split(" B")[0].replace(",", "") or -1)
        if said != titan:
            bad.append(f"{tag}: spmd-run's torchtitan all-to-all bytes {said:,}, eager routing gives {titan:,}")
        print(f"{tag}: {traffic} (eager routing, torchtitan's formula: {titan:,} B)")


def megatron_tp_bytes(tokens, tp, layers=1, bytes_per=4):
    """Megatron's tensor-parallel traffic per rank and step for `layers`
    blocks whose row-parallel output is all-reduced ([tokens, DIM] in the
    forward, Megatron's g) and whose input gradient likewise in the backward
    (its f): a ring all-reduce sends 2 (tp - 1) / tp of the tensor."""
    return layers * 2 * (2 * (tp - 1) * tokens * DIM * bytes_per // tp)


def check_tp_bytes(tag, report, bad):
    """--report's collective bytes on the tp axis against megatron_tp_bytes."""
    r = json.loads(Path(report).read_text())
    tp = [c for c in r["collectives"] if c["mesh_axis"] == "tp"]
    got = sum(c["bytes_per_rank"] for c in tp)
    tokens = BATCH * SEQ // 2
    megatron = megatron_tp_bytes(tokens, 2)
    # The experts op weighs each FFN output by its routing weight on the
    # FFN's partial sums: the weights' gradient [tokens, top-k] is a partial
    # sum over tp too, all-reduced once in the backward.
    routing = 2 * (2 - 1) * tokens * TOP_K * 4 // 2
    kinds = ", ".join(f"{c['kind']} {c['shape']} {c['bytes_per_rank']:,} B" for c in tp)
    print(f"{tag}: tp collectives {got:,} B per rank ({kinds}); Megatron's formula {megatron:,} B + the routing "
          f"weights' gradient {routing:,} B = {megatron + routing:,} B", flush=True)
    if got != megatron + routing:
        bad.append(f"{tag}: --report's tp collectives send {got:,} B per rank, Megatron's formula and the routing "
                   f"weights' gradient {megatron + routing:,} B")


def check_uneven(a, d, hidden, bad):
    """ep_tp with an FFN dim of `hidden` that does not divide over tp: loss
    and gradients of one step against eager (torch.chunk shards)."""
    from safetensors.torch import load_file
    import torch
    ref, x, y, prog_dir = export(d, "balanced", hidden=hidden)
    tag = f"uneven_ffn{hidden}_ep_tp"
    prog, out = d / f"{tag}.spmd", d / f"{tag}.safetensors"
    run([a.spmdc, "compile", prog_dir / "model.pt2", "--schema", schema(d, "ep_tp"), "-o", prog, "-q"])
    run([a.spmd_run, "-n", 4, prog, "--inputs", prog_dir / "inputs.safetensors", "--output", out, "-q"])
    got = load_file(str(out))
    losses, grads, _ = eager(ref, x, y, 1)
    worst = close(f"{tag} loss", got.get("loss"), torch.tensor(losses[0]), bad)
    for k, g in grads.items():
        worst = max(worst, close(f"{tag} grad.{k}", got.get(f"grad.{k}"), g, bad))
    print(f"FFN dim {hidden} over tp 2 (uneven): loss and {len(grads)} gradients, worst rel err {worst:.2g}")


def check_case(a, d, case, router, ref, x, y, prog_dir, bad):
    from safetensors.torch import load_file
    path = schema(d, case)
    tag = f"{router}_{case}"
    model, inputs = prog_dir / "model.pt2", prog_dir / "inputs.safetensors"
    want_losses, want_grads, want_params = eager(ref, x, y, a.steps)
    # One step without optimizer: loss and gradients.
    prog, report = d / f"{tag}_grad.spmd", d / f"{tag}_report.json"
    run([a.spmdc, "compile", model, "--schema", path, "-o", prog, "-q", "--report", report])
    if case == "ep_tp":
        check_tp_bytes(tag, report, bad)
    dump = run([a.spmdc, "dump", prog]).stdout
    if "spmd.moe_experts(" not in dump or "spmd.moe_experts_backward(" not in dump:
        bad.append(f"{tag}: the program has no spmd.moe_experts exchange (experts not split over ep)")
    out = d / f"{tag}_grad.safetensors"
    summary = run([a.spmd_run, "-n", 4, prog, "--inputs", inputs, "--output", out]).stdout
    check_tokens(tag, summary, ref, x, bad, case)
    got = load_file(str(out))
    n0 = len(bad)
    worst = close(f"{tag} loss", got.get("loss"), want_grads and __import__("torch").tensor(want_losses[0]), bad)
    for k, g in want_grads.items():
        worst = max(worst, close(f"{tag} grad.{k}", got.get(f"grad.{k}"), g, bad))
    # AdamW steps: every loss, the parameters after the last.
    prog = d / f"{tag}_adamw.spmd"
    run([a.spmdc, "compile", model, "--schema", path, "--optimizer", "adamw", "--lr", ADAMW["lr"],
         "--betas", *ADAMW["betas"], "--eps", ADAMW["eps"], "--weight-decay", ADAMW["weight_decay"],
         "-o", prog, "-q"])
    log, out = d / f"{tag}.log", d / f"{tag}_adamw.safetensors"
    run([a.spmd_run, "-n", 4, prog, "--inputs", inputs, "--steps", a.steps, "--loss-log", log, "--output", out,
         "-q"])
    losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    if len(losses) != len(want_losses):
        bad.append(f"{tag}: {len(losses)} losses logged, eager has {len(want_losses)}")
    for i, (g, w) in enumerate(zip(losses, want_losses)):
        if not abs(g - w) <= TOL * max(1.0, abs(w)):
            bad.append(f"{tag}: AdamW step {i} loss {g} vs eager {w}")
    got = load_file(str(out))
    for k, p in want_params.items():
        worst = max(worst, close(f"{tag} parameter.{k}", got.get(f"parameter.{k}"), p, bad))
    print(f"{router:11} {case:7} loss {losses[0]:.5f} -> {losses[-1]:.5f} (eager {want_losses[-1]:.5f}), "
          f"worst rel err {worst:.2g}{'' if len(bad) == n0 else '  MISMATCH'}", flush=True)


def check_refusal(a, d, bad):
    """6 experts over an ep axis of 4: one line, exit 2."""
    _, _, _, prog_dir = export(d, "balanced", experts=6)
    r = run([a.spmdc, "compile", prog_dir / "model.pt2", "--schema", schema(d, "ep4"), "-o", d / "bad.spmd"],
            ok=(0, 1, 2))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    good = r.returncode == 2 and len(lines) == 1 and "6 experts" in lines[0] and "ep" in lines[0]
    print(f"6 experts on ep=4: exit {r.returncode}: {lines[0] if lines else '(no message)'}")
    if not good:
        bad.append(f"6 experts on ep=4: expected one line and exit 2, got exit {r.returncode}: {r.stderr!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spmdc")
    ap.add_argument("spmd_run")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cases", default="ep4,ep2,ep_fsdp")
    ap.add_argument("--routers", default="balanced,one_expert,empty_ranks")
    ap.add_argument("--hidden-uneven", type=int, default=0,
                    help="also run ep_tp with this FFN dim (odd: uneven over tp 2)")
    ap.add_argument("--no-refusal", action="store_true", help="skip the 6-experts-on-ep-4 refusal check")
    a = ap.parse_args()
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"moe_ep_vs_torch: FAIL: {e} (run scripts/setup.sh; the reference is PyTorch itself)")
        return 1
    t0 = time.time()
    bad = []
    with tempfile.TemporaryDirectory(prefix="spmdc-moe-") as tmp:
        d = Path(tmp)
        try:
            for router in a.routers.split(","):
                ref, x, y, prog_dir = export(d, router)
                for case in a.cases.split(","):
                    check_case(a, d, case, router, ref, x, y, prog_dir, bad)
            if a.hidden_uneven:
                check_uneven(a, d, a.hidden_uneven, bad)
            if not a.no_refusal:
                check_refusal(a, d, bad)
        except RuntimeError as e:
            bad.append(str(e))
    for f in bad[:20]:
        print("FAIL:", f)
    print(f"moe_ep_vs_torch: {len(bad)} failures, {time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
