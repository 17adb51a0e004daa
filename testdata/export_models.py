"""Exports spmdc's test models with the installed torch (2.6 to 2.14) into
torch.export archives plus eager PyTorch references, the layout of
testdata/pt2/<name>/:

    model.pt2            torch.export.save of the exported (or joint) program
    inputs.safetensors   input.0, input.1, ...
    expected.safetensors eager outputs (output.<i>), or loss and grad.<fqn>
    meta.json            torch version, node count, op histogram

Usage:
    python testdata/export_models.py testdata/pt2 [--only mlp,llama]  # regenerate
    python testdata/export_models.py --check [testdata/pt2] [--only ...]  # report only
    python testdata/export_models.py --list

Both print what changed against the copies already in the folder (report(),
at the end). Fresh exports from another torch differ in node names and in
which ops stay undecomposed: the fresh-export test checks spmdc against them.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------- models


class MLP(nn.Module):
    def __init__(self, d=64, h=256):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MLPCast(nn.Module):
    """The MLP behind dtype casts: training-IR exports keep aten.to.dtype
    and guard each cast with aten._assert_tensor_metadata."""

    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x):
        return self.mlp(x.to(torch.float32)).to(torch.float64)


class TiedLM(nn.Module):
    """An embedding whose table is also the output projection (GPT-2's
    wte / lm_head): one tensor under two FQNs."""

    def __init__(self, vocab=64, d=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        return self.lm_head(torch.tanh(self.wte(tokens)))


class CustomOpModel(nn.Module):
    """A Linear feeding a custom op, spmdtest::scaled_add(x, y) = x + 2 * y,
    defined here for export and in C++ by tests/runtime/TestOps.cpp for
    spmd-run --load-library."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x):
        return torch.ops.spmdtest.scaled_add(self.l(x), x)


def define_test_ops():
    if hasattr(torch.ops.spmdtest, "scaled_add"):
        return

    @torch.library.custom_op("spmdtest::scaled_add", mutates_args=())
    def scaled_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + 2 * y

    @scaled_add.register_fake
    def _(x, y):
        return torch.empty_like(x)


class MLPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x, target):
        return F.mse_loss(self.mlp(x), target)


class Attention(nn.Module):
    def __init__(self, d=64, heads=8, causal=True, sdpa=False):
        super().__init__()
        self.hd = d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.causal = causal
        self.sdpa = sdpa

    def forward(self, x):
        B, S, _ = x.shape
        q = self.q(x).view(B, S, -1, self.hd).transpose(1, 2)
        k = self.k(x).view(B, S, -1, self.hd).transpose(1, 2)
        v = self.v(x).view(B, S, -1, self.hd).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            if self.causal:
                mask = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~mask, float("-inf"))
            y = att.softmax(-1) @ v
        y = y.transpose(1, 2).reshape(B, S, -1)
        return self.o(y)


class FusedAttention(nn.Module):
    """GPT-2-style attention: one [3*d, d] projection for q, k and v, split after."""

    def __init__(self, d=64, heads=8):
        super().__init__()
        self.hd = d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        B, S, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, S, -1, self.hd).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(B, S, D))


class GPTBlock(nn.Module):
    def __init__(self, d=64, heads=8, sdpa=False, fused=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = FusedAttention(d, heads) if fused else Attention(d, heads, sdpa=sdpa)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 4 * d)  # the feed-forward block

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class LlamaLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.hd = d // heads
        self.attn_norm = RMSNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, S, -1, self.hd)
        k = self.wk(h).view(B, S, -1, self.hd)
        v = self.wv(h).view(B, S, -1, self.hd)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.full((S, S), float("-inf"), device=x.device, dtype=x.dtype).triu(1)
        y = (att + mask).softmax(-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(B, S, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab=256, d=64, heads=8, ffn=128, layers=2, max_seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaLayer(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(max_seq).float(), inv)
        self.register_buffer("cos", ang.cos()[:, None, :], persistent=True)
        self.register_buffer("sin", ang.sin()[:, None, :], persistent=True)

    def forward(self, tokens):
        S = tokens.shape[1]
        x = self.tok(tokens)
        cos, sin = self.cos[:S], self.sin[:S]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.out(self.norm(x))


class LlamaLoss(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.model = Llama(**kw)

    def forward(self, tokens, labels):
        logits = self.model(tokens)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


class MoE(nn.Module):
    """Top-2 routed mixture of 4 expert MLPs, dense dispatch by masking."""

    def __init__(self, d=64, h=128, experts=4, k=2):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, h) * 0.05)
        self.w2 = nn.Parameter(torch.randn(experts, h, d) * 0.05)
        self.k = k

    def forward(self, x):
        T = x.reshape(-1, x.shape[-1])
        probs = self.router(T).softmax(-1)
        topv, topi = probs.topk(self.k, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, topi, topv)
        h = torch.einsum("td,edh->eth", T, self.w1)
        y = torch.einsum("eth,ehd->etd", F.silu(h), self.w2)
        out = torch.einsum("te,etd->td", gates, y)
        return out.reshape(x.shape)


class CNNLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = CNN()

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class Affine(nn.Module):
    """ResMLP's per-channel affine norm: beta + alpha * x (an addcmul)."""

    def __init__(self, d):
        super().__init__()
        self.alpha = nn.Parameter(1 + 0.1 * torch.randn(1, 1, d))
        self.beta = nn.Parameter(0.1 * torch.randn(1, 1, d))

    def forward(self, x):
        return torch.addcmul(self.beta, self.alpha, x)


class ResMLP(nn.Module):
    """timm's ResMLP (MlpMixer with ResBlock + Affine), 2 blocks: the token
    mixing Linear runs on a transposed activation, so elementwise ops keep a
    permuted layout and views read strides the shards need not have."""

    def __init__(self, d=32, tokens=16, layers=2, classes=10):
        super().__init__()
        self.stem = nn.Linear(12, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            b = nn.Module()
            b.norm1, b.norm2 = Affine(d), Affine(d)
            b.linear_tokens = nn.Linear(tokens, tokens)
            b.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            b.ls1 = nn.Parameter(0.1 * torch.ones(d))
            b.ls2 = nn.Parameter(0.1 * torch.ones(d))
            self.blocks.append(b)
        self.norm = Affine(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = x + b.ls1 * b.linear_tokens(b.norm1(x).transpose(1, 2)).transpose(1, 2)
            x = x + b.ls2 * b.mlp(b.norm2(x))
        return self.head(self.norm(x).mean(1))


class ResMLPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = ResMLP()

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


# ----------------------------------------------------------------- export
#
# The archives are written by the spmdc_export package (python/spmdc_export),
# the export helper users run: the same files, from the same code.

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import spmdc_export  # noqa: E402


def report(name, program):
    nodes = sum(1 for _ in program.graph.nodes)
    print(f"[ok] {name}: {nodes} nodes, torch {torch.__version__}", flush=True)


def export_infer(out, name, mod, inputs, dynamic_shapes=None, decompose=True, note=""):
    report(name, spmdc_export.export(mod, inputs, os.path.join(out, name), dynamic_shapes=dynamic_shapes,
                                     decompose=decompose, note=note))


def export_train(out, name, mod, inputs, note=""):
    """Joint forward+backward graph: outputs the loss, then parameter gradients."""
    report(name, spmdc_export.export_train_step(mod, inputs, os.path.join(out, name), note=note))


def tokens(*shape):
    return torch.randint(0, 256, shape)


# name -> function(out) exporting it; seeded per model so that a subset
# gives the same tensors as the whole set.
CASES = {
    "mlp": lambda o: export_infer(o, "mlp", MLP(), [torch.randn(32, 64)]),
    "mlp_dynamic_batch": lambda o: export_infer(
        o, "mlp_dynamic_batch", MLP(), [torch.randn(32, 64)],
        dynamic_shapes=({0: torch.export.Dim("batch", min=2, max=4096)},)),
    "mlp_training_ir": lambda o: export_infer(o, "mlp_training_ir", MLP(), [torch.randn(32, 64)],
                                              decompose=False),
    "mlp_cast": lambda o: export_infer(o, "mlp_cast", MLPCast(), [torch.randn(32, 64, dtype=torch.float64)],
                                       decompose=False),
    "tied_lm": lambda o: export_infer(o, "tied_lm", TiedLM(), [torch.randint(0, 64, (2, 8))]),
    "custom_op": lambda o: (define_test_ops(),
                            export_infer(o, "custom_op", CustomOpModel(), [torch.randn(8, 16)])),
    "mlp_train": lambda o: export_train(o, "mlp_train", MLPLoss(),
                                       [torch.randn(32, 64), torch.randn(32, 64)]),
    "gpt_block": lambda o: export_infer(o, "gpt_block", GPTBlock(), [torch.randn(4, 16, 64)]),
    "gpt_block_sdpa": lambda o: export_infer(o, "gpt_block_sdpa", GPTBlock(sdpa=True),
                                             [torch.randn(4, 16, 64)]),
    "gpt_block_fused": lambda o: export_infer(o, "gpt_block_fused", GPTBlock(fused=True),
                                              [torch.randn(4, 16, 64)]),
    "llama": lambda o: export_infer(o, "llama", Llama(), [tokens(2, 16)]),
    "llama_train": lambda o: export_train(o, "llama_train", LlamaLoss(), [tokens(2, 16), tokens(2, 16)]),
    "llama_dynamic": lambda o: export_infer(
        o, "llama_dynamic", Llama(), [tokens(2, 16)],
        dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64),
                         1: torch.export.Dim("seq", min=2, max=64)},)),
    "cnn": lambda o: export_infer(o, "cnn", CNN(), [torch.randn(8, 3, 32, 32)]),
    "cnn_train": lambda o: export_train(o, "cnn_train", CNNLoss(),
                                        [torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))]),
    "moe": lambda o: export_infer(o, "moe", MoE(), [torch.randn(4, 8, 64)]),
    "llama_deep": lambda o: export_infer(o, "llama_deep", Llama(layers=32, d=32, heads=4, ffn=64),
                                         [tokens(2, 16)]),
    "llama_deep_train": lambda o: export_train(
        o, "llama_deep_train", LlamaLoss(layers=32, d=32, heads=4, ffn=64), [tokens(2, 16), tokens(2, 16)]),
    "resmlp": lambda o: export_infer(o, "resmlp", ResMLP(), [torch.randn(4, 16, 12)],
                                     note="timm-style ResMLP: token mixing on a transposed activation"),
    "resmlp_train": lambda o: export_train(o, "resmlp_train", ResMLPLoss(),
                                           [torch.randn(4, 16, 12), torch.randint(0, 10, (4,))]),
    # Compute-bound: 8 layers of width 1024 (about 100M parameters), for
    # step-time comparisons on a GPU; not part of testdata.
    "llama_big": lambda o: export_infer(o, "llama_big", Llama(d=1024, heads=16, ffn=2816, layers=8,
                                                              max_seq=256), [tokens(4, 256)]),
}


# ----------------------------------------------------------------- report


def _signature(path):
    """{name: shape} of a safetensors file ({} when absent)."""
    from safetensors import safe_open

    if not os.path.exists(path):
        return {}
    with safe_open(path, "pt") as f:
        return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}


def _max_diff(old_path, new_path):
    """Max |new - old| over the tensors both files hold with the same shape
    (None when none)."""
    from safetensors.torch import load_file

    if not (os.path.exists(old_path) and os.path.exists(new_path)):
        return None
    old, new = load_file(old_path), load_file(new_path)
    diffs = [(new[k].double() - old[k].double()).abs().max().item() if new[k].numel() else 0.0
             for k in new if k in old and old[k].shape == new[k].shape]
    return max(diffs) if diffs else None


def _sig_change(old, new):
    """'same', or the names added, removed and reshaped."""
    parts = [f"+{k}{new[k]}" for k in new if k not in old]
    parts += [f"-{k}" for k in old if k not in new]
    parts += [f"{k} {old[k]}->{new[k]}" for k in new if k in old and old[k] != new[k]]
    if not parts:
        return "same"
    return ", ".join(parts[:3]) + (f" (+{len(parts) - 3} more)" if len(parts) > 3 else "")


def compare_case(old_dir, new_dir):
    """One report row: what changed from the archive in old_dir (the
    committed copy) to the fresh one in new_dir."""
    name = os.path.basename(new_dir)
    if not os.path.exists(os.path.join(old_dir, "meta.json")):
        return [name, "new", "", "", "", "", ""]
    with open(os.path.join(old_dir, "meta.json")) as f:
        old = json.load(f)
    with open(os.path.join(new_dir, "meta.json")) as f:
        new = json.load(f)
    o_ops, n_ops = old.get("ops", {}), new.get("ops", {})
    ops = [f"{'+' if n_ops.get(k, 0) > o_ops.get(k, 0) else '-'}{k.replace('aten.', '')} "
           f"{o_ops.get(k, 0)}->{n_ops.get(k, 0)}" for k in sorted(set(o_ops) | set(n_ops))
           if o_ops.get(k, 0) != n_ops.get(k, 0)]
    ops_text = "same" if not ops else ", ".join(ops[:3]) + (f" (+{len(ops) - 3} more)" if len(ops) > 3 else "")
    files = {k: (os.path.join(old_dir, k + ".safetensors"), os.path.join(new_dir, k + ".safetensors"))
             for k in ("inputs", "expected")}
    d_in, d_out = (_max_diff(*files[k]) for k in ("inputs", "expected"))
    return [name, f"{old.get('num_nodes', '?')}->{new.get('num_nodes', '?')}", ops_text,
            _sig_change(*(_signature(p) for p in files["inputs"])),
            _sig_change(*(_signature(p) for p in files["expected"])),
            "-" if d_in is None else f"{d_in:.1e}", "-" if d_out is None else f"{d_out:.1e}"]


def print_changes(rows, torch_old):
    """Prints the per-archive table of what changed: node count, op
    histogram, input and output names and shapes, and the largest change of
    any input and of any expected output or gradient (values compared where
    names and shapes still match)."""
    head = ["model", "nodes", "ops changed", "inputs", "outputs", "max|d input|", "max|d expected|"]
    w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print(f"\nchanges against the copies made with torch {', '.join(sorted(torch_old)) or '-'} "
          f"(now {torch.__version__}):")
    for r in [head] + rows:
        print("  ".join(str(v).ljust(n) for v, n in zip(r, w)).rstrip())
    same = [r for r in rows if r[2:5] == ["same"] * 3 and r[5:] == ["0.0e+00"] * 2]
    new = [r for r in rows if r[1] == "new"]
    moved = [r for r in rows if r[5] not in ("-", "", "0.0e+00")]
    print(f"{len(rows)} archives: {len(same)} unchanged, {len(new)} new, {len(rows) - len(same) - len(new)} "
          f"changed" + (f" ({len(moved)} with other input values: their expected values are not comparable)"
                        if moved else ""), flush=True)


def _install(new_dir, old_dir):
    """Moves the files of a fresh export over the committed copy (other
    files there, such as graph.txt, stay)."""
    import shutil

    os.makedirs(old_dir, exist_ok=True)
    for f in os.listdir(new_dir):
        shutil.move(os.path.join(new_dir, f), os.path.join(old_dir, f))


def main():
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="the archives' folder (default with --check: testdata/pt2)")
    ap.add_argument("--only", help="comma-separated model names (default: all but llama_big)")
    ap.add_argument("--list", action="store_true", help="print the model names")
    ap.add_argument("--check", action="store_true",
                    help="export into a temporary folder and report the changes; leave OUT untouched")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.check and not a.out:
        a.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pt2")
    if not a.out:
        ap.error("name an output folder")
    names = a.only.split(",") if a.only else [n for n in CASES if n != "llama_big"]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; --list shows them")
    os.makedirs(a.out, exist_ok=True)
    rows, torch_old = [], set()
    with tempfile.TemporaryDirectory(prefix="spmdc-export-") as fresh:
        for n in names:
            torch.manual_seed(1000 + list(CASES).index(n))
            CASES[n](fresh)
            rows.append(compare_case(os.path.join(a.out, n), os.path.join(fresh, n)))
            meta = os.path.join(a.out, n, "meta.json")
            if os.path.exists(meta):
                with open(meta) as f:
                    torch_old.add(json.load(f).get("torch", "?"))
            if not a.check:
                _install(os.path.join(fresh, n), os.path.join(a.out, n))
    print_changes(rows, torch_old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
