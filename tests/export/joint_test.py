"""The one-pass joint trace (python/spmdc_export/joint.py) writes the
program torch.export's route writes.

Each train step is exported twice, by export_train_step(fast=True) and
fast=False (torch.export + _export_forward_backward); both archives are
loaded back with torch.export.load and must agree: the same input specs
(kind, target, persistence, user input names) and output specs (kind,
target), and the same loss and gradients when their graphs run (FX
Interpreter), each also equal to the eager step the export wrote. Models: a
32-token llama (RoPE buffers, causal mask), causal sdpa attention with a
loss_fn and targets, *args inputs, a frozen parameter and a non-persistent
buffer, an untied embedding/head, a Hugging Face llama and a timm ViT; the
llama's ops, backward included, keep the model's source lines. Steps
the one pass cannot trace as torch would (a BatchNorm's running-statistics
update, a tensor constant) must take torch's route and say why.

    python tests/export/joint_test.py
"""
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.export.graph_signature import InputKind, OutputKind

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "testdata"), HERE]
import export_models as em  # noqa: E402
import spmdc_export  # noqa: E402
from spmdc_export import hf  # noqa: E402
from test_export import Attention, BatchNormNet, TiedLM, VarArgs  # noqa: E402


class Frozen(nn.Module):
    """A frozen parameter and a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 8)
        self.b.weight.requires_grad_(False)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16), persistent=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * self.scale)


class Constant(nn.Module):
    """A tensor made in forward from a Python list: a lifted constant."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        return self.a(x) * torch.tensor([1.0, 2.0, 3.0, 4.0])


def cases():
    """(name, module, inputs, loss_fn, targets, untie, route)."""
    torch.manual_seed(0)
    x16 = torch.randn(8, 16)
    yield "llama", em.LlamaLoss(layers=2, d=32, heads=4, ffn=64), (em.tokens(2, 16), em.tokens(2, 16)), \
        None, (), False, "make_fx"
    yield "sdpa", Attention(), (torch.randn(4, 8, 32),), F.mse_loss, (torch.randn(4, 8, 32),), False, "make_fx"
    yield "varargs", VarArgs(), (torch.randn(8, 32), torch.randn(8, 8)), F.mse_loss, (torch.randn(8, 16),), False, \
        "make_fx"
    yield "frozen", Frozen(), (x16,), F.mse_loss, (torch.randn(8, 8),), False, "make_fx"
    yield "tied", TiedLM(), (torch.randint(0, 32, (4, 6)),), \
        lambda y, t: F.cross_entropy(y.flatten(0, 1), t.flatten()), (torch.randint(0, 32, (4, 6)),), True, \
        "make_fx"
    m = hf.build("llama", layers=2, hidden=64, train=True)
    yield "hf_llama", m.module, m.inputs, m.loss_fn, m.targets, True, "make_fx"
    import timm
    vit = timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, num_classes=10, depth=2)
    yield "timm_vit", vit, (torch.randn(2, 3, 32, 32),), F.cross_entropy, (torch.tensor([1, 7]),), False, \
        "make_fx"
    yield "batchnorm", BatchNormNet(), (torch.randn(8, 32),), F.mse_loss, (torch.randn(8, 16),), False, "torch.export"
    yield "constant", Constant(), (torch.randn(3, 4),), F.mse_loss, (torch.randn(3, 4),), False, "torch.export"


def run_joint(ep, inputs):
    """{"loss"|"grad.<fqn>"|"buffer.<fqn>": tensor} from running ep's graph."""
    args, user = [], iter(inputs)
    for s in ep.graph_signature.input_specs:
        if s.kind == InputKind.USER_INPUT:
            args.append(next(user))
        else:
            args.append(ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target])
    with torch.no_grad():
        outs = torch.fx.Interpreter(ep.graph_module).run(*args)
    keys = {OutputKind.LOSS_OUTPUT: lambda s: "loss", OutputKind.GRADIENT_TO_PARAMETER: lambda s: f"grad.{s.target}",
            OutputKind.BUFFER_MUTATION: lambda s: f"buffer.{s.target}"}
    return {keys[s.kind](s): o for s, o in zip(ep.graph_signature.output_specs, outs)}


def specs(ep):
    ins = [(s.kind.name, s.target if s.kind != InputKind.USER_INPUT else s.arg.name, getattr(s, "persistent", None))
           for s in ep.graph_signature.input_specs]
    return ins, [(s.kind.name, s.target) for s in ep.graph_signature.output_specs]


def close(a, b, what, rtol=1e-5, atol=1e-6):
    if a.shape != b.shape or a.dtype != b.dtype:
        raise AssertionError(f"{what}: {a.dtype}{list(a.shape)} against {b.dtype}{list(b.shape)}")
    if not torch.allclose(a, b, rtol=rtol, atol=atol):
        raise AssertionError(f"{what}: max abs diff {(a - b).abs().max().item():.3g}")


def check(name, module, inputs, loss_fn, targets, untie, route, work):
    progs = {}
    for fast in (True, False):
        d = os.path.join(work, f"{name}_{fast}")
        spmdc_export.export_train_step(module, inputs, d, loss_fn=loss_fn, targets=targets, untie=untie, fast=fast)
        meta = json.load(open(os.path.join(d, "meta.json")))
        progs[fast] = (torch.export.load(os.path.join(d, "model.pt2")), meta)
    got_route = progs[True][1]["joint_route"]
    if got_route != route:
        raise AssertionError(f"{name}: route {got_route}, expected {route} (notes: {progs[True][1]['notes']})")
    if route == "torch.export" and not any("joint traced by torch.export" in n for n in progs[True][1]["notes"]):
        raise AssertionError(f"{name}: torch's route taken without a note saying why")
    if progs[False][1]["joint_route"] != "torch.export":
        raise AssertionError(f"{name}: fast=False took {progs[False][1]['joint_route']}")
    (fast_ep, _), (torch_ep, _) = progs[True], progs[False]
    if specs(fast_ep) != specs(torch_ep):
        raise AssertionError(f"{name}: signatures differ:\n{specs(fast_ep)}\n{specs(torch_ep)}")
    flat = tuple(inputs) + tuple(targets)
    a, b = run_joint(fast_ep, flat), run_joint(torch_ep, flat)
    expected = load_file(os.path.join(work, f"{name}_True", "expected.safetensors"))
    if sorted(a) != sorted(b):
        raise AssertionError(f"{name}: outputs {sorted(a)} against {sorted(b)}")
    for k in a:
        close(a[k], b[k], f"{name} {k}: one pass against torch.export")
        if k in expected:
            close(a[k], expected[k], f"{name} {k}: one pass against eager", rtol=1e-4, atol=1e-5)
    n = sum(1 for nd in fast_ep.graph.nodes if nd.op == "call_function")
    if name == "llama":  # source lines for the backward too (each op gets its forward op's)
        sourced = sum(1 for nd in fast_ep.graph.nodes if nd.op == "call_function" and "export_models.py" in
                      (nd.meta.get("stack_trace") or ""))
        if sourced < 0.95 * n:
            raise AssertionError(f"llama: {sourced} of {n} ops have a stack trace through export_models.py")
    print(f"ok {name}: route {got_route}, {n} ops, {len(a)} outputs equal")


def main():
    with tempfile.TemporaryDirectory() as work:
        for case in cases():
            check(*case, work)
    print("joint_test: ok")


if __name__ == "__main__":
    main()
