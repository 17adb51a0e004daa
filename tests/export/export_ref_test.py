"""`python -m spmdc_export --hf PATH`: a local Hugging Face checkpoint folder
exported by reference (python/spmdc_export/hfref.py), the weights never read.

A tiny llama (2 layers, hidden 64, vocab 256) saved by save_pretrained in
bfloat16 three ways: one model.safetensors, sharded (an index and 12
files), and with tied embeddings (no lm_head.weight stored); and a bare
Qwen2Model, whose names lack the "model." prefix the causal LM's have
(mapped as transformers maps them on load). Each is
exported by the CLI; then: the manifest (<top>/extra/spmdc_weights.json)
lists every parameter of the program, on meta, with a file of the folder
and a tensor of that file's header of the same shape (lm_head.weight of
the tied one points at model.embed_tokens.weight); the archive holds no
weight bytes; the rotary inv_freq buffer is real and equals
from_pretrained's; the program, given the checkpoint's tensors by the
manifest, computes from_pretrained's logits; --expected writes them. The
tied one's --train --expected: a joint program whose loss and gradients,
with the weights by the manifest, match the eager step. Errors, one line
and exit 2: a folder without config.json, an index missing a tensor, a
header with another shape.

    python tests/export/export_ref_test.py          # exit 77 without transformers
    python tests/export/export_ref_test.py --big    # also an 8B-shaped Llama (sparse files): time, peak RSS
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MANIFEST = "spmdc_weights.json"


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH")
                                                                       else []))
    return e


def cli(args, timeout=300):
    return subprocess.run([sys.executable, "-m", "spmdc_export"] + args, capture_output=True, text=True,
                          timeout=timeout, env=env())


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


# ----------------------------------------------------------------- checkpoints


def tiny(tie, config="LlamaConfig", model="LlamaForCausalLM", seed=0):
    import torch
    import transformers
    cfg = getattr(transformers, config)(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        tie_word_embeddings=tie, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    return getattr(transformers, model)(cfg).to(torch.bfloat16)


def make_checkpoints(work):
    """{variant: folder} of the tiny llama saved three ways, and a bare
    Qwen2Model (its names lack the "model." prefix; tied embeddings)."""
    untied, tied = tiny(False), tiny(True, seed=1)
    dirs = {v: os.path.join(work, v) for v in ("single", "sharded", "tied", "qwen2_base")}
    untied.save_pretrained(dirs["single"], safe_serialization=True)
    untied.save_pretrained(dirs["sharded"], safe_serialization=True, max_shard_size="20KB")
    tied.save_pretrained(dirs["tied"], safe_serialization=True)
    tiny(True, "Qwen2Config", "Qwen2Model", seed=2).save_pretrained(dirs["qwen2_base"], safe_serialization=True)
    check(os.path.isfile(os.path.join(dirs["sharded"], "model.safetensors.index.json")), "no index when sharded")
    return dirs


def read_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), n


def rewrite_header(path, edit):
    """Rewrites a safetensors file with edit(header) as its header (the data kept)."""
    header, n = read_header(path)
    with open(path, "rb") as f:
        f.seek(8 + n)
        data = f.read()
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def write_sparse(path, tensors):
    """A safetensors file with `tensors` ({name: (dtype, shape)}) in its
    header and its data a hole (a sparse file: no disk)."""
    sizes = {"BF16": 2, "F16": 2, "F32": 4}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + offset)


# ----------------------------------------------------------------- reading an export


def manifest(pt2):
    with zipfile.ZipFile(pt2) as z:
        names = [n for n in z.namelist() if n.endswith(f"/extra/{MANIFEST}")]
        check(len(names) == 1, f"{pt2}: no extra/{MANIFEST} ({z.namelist()})")
        weights = [i for i in z.infolist() if "/data/weights/" in i.filename and not i.filename.endswith(".json")]
        sizes = [(i.filename, i.file_size) for i in weights]
        check(all(n == 0 for _, n in sizes), f"{pt2}: weight payloads {sizes}")
        return json.loads(z.read(names[0]))


def load_by_manifest(ep, m):
    """Gives the ExportedProgram the checkpoint's tensors the manifest names."""
    import torch
    from safetensors import safe_open
    for fqn, entry in m["tensors"].items():
        with safe_open(os.path.join(m["root"], entry["file"]), framework="pt") as f:
            value = f.get_tensor(entry["tensor"])
        old = ep.state_dict[fqn]
        check(old.device.type == "meta" and old.shape == value.shape, f"{fqn}: {old.device} {old.shape}")
        ep.state_dict[fqn] = torch.nn.Parameter(value, requires_grad=old.requires_grad) \
            if isinstance(old, torch.nn.Parameter) else value


def check_manifest(d, out, ep):
    from safetensors import safe_open
    m = manifest(os.path.join(out, "model.pt2"))
    check(m["format"] == 1 and m["root"] == os.path.abspath(d), f"manifest root {m['root']}")
    on_meta = {k for k, t in {**ep.state_dict, **ep.constants}.items() if t.device.type == "meta"}
    params = {s.target for s in ep.graph_signature.input_specs if s.kind.name == "PARAMETER"}
    check(set(m["tensors"]) == on_meta and params <= on_meta, f"manifest {sorted(m['tensors'])} vs meta {on_meta}")
    for fqn, entry in m["tensors"].items():
        path = os.path.join(d, entry["file"])
        check(os.path.isfile(path), f"{fqn}: no file {path}")
        with safe_open(path, framework="pt") as f:
            check(entry["tensor"] in f.keys(), f"{fqn}: {entry['tensor']} not in {entry['file']}")
            shape = list(f.get_slice(entry["tensor"]).get_shape())
        check(shape == list(ep.state_dict[fqn].shape), f"{fqn}: shape {shape}")
    return m


def eager(d, ids):
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        return model, model(input_ids=ids).logits


def close(a, b, what, tol=2e-2):
    err = (a.float() - b.float()).abs().max().item()
    check(err <= tol * max(1.0, b.float().abs().max().item()), f"{what}: max error {err}")
    return err


# ----------------------------------------------------------------- cases


def case_inference(d, out, expected):
    import torch
    from safetensors.torch import load_file
    check(not os.path.exists(os.path.join(out, "expected.safetensors")) or expected, "expected.safetensors written")
    for f in ("model.pt2", "inputs.safetensors", "meta.json", "tp_plan.json"):
        check(os.path.isfile(os.path.join(out, f)), f"no {f}")
    ep = torch.export.load(os.path.join(out, "model.pt2"))
    m = check_manifest(d, out, ep)
    ids = load_file(os.path.join(out, "inputs.safetensors"))["input.0"]
    model, logits = eager(d, ids)
    for k, b in model.named_buffers():
        got = ep.constants.get(k, ep.state_dict.get(k))
        check(got is not None and got.device.type == "cpu" and torch.equal(got, b), f"buffer {k}: {got}")
    if os.path.basename(d) == "qwen2_base":
        check(m["tensors"]["model.layers.0.self_attn.q_proj.bias"]["tensor"] == "layers.0.self_attn.q_proj.bias" and
              m["tensors"]["lm_head.weight"]["tensor"] == "embed_tokens.weight", f"prefix mapping: {m['tensors']}")
    load_by_manifest(ep, m)
    with torch.no_grad():
        err = close(ep.module()(ids), logits, f"{os.path.basename(d)} logits")
    if expected:
        close(load_file(os.path.join(out, "expected.safetensors"))["output.0"], logits, "--expected", 0)
    return m, f"{len(m['tensors'])} tensors by reference, logits within {err:.2g} of from_pretrained"


def run_joint(ep, inputs):
    """(loss, {fqn: grad}) of a joint program run on its state and inputs."""
    import torch
    state = {**ep.state_dict, **ep.constants}
    args = [state[s.target] if s.target is not None else inputs.pop(0) for s in ep.graph_signature.input_specs]
    with torch.no_grad():
        outs = ep.graph_module(*args)
    specs = ep.graph_signature.output_specs
    return outs[0], {s.target: o for s, o in zip(specs[1:], outs[1:])}


def case_train(d, out):
    import torch
    from safetensors.torch import load_file
    ep = torch.export.load(os.path.join(out, "model.pt2"))
    m = check_manifest(d, out, ep)
    check(m["tensors"]["lm_head.weight"]["tensor"] == "model.embed_tokens.weight", f"lm_head: {m['tensors']}")
    load_by_manifest(ep, m)
    ins = load_file(os.path.join(out, "inputs.safetensors"))
    loss, grads = run_joint(ep, [ins["input.0"], ins["input.1"]])
    expected = load_file(os.path.join(out, "expected.safetensors"))
    close(loss, expected["loss"], "train loss", 1e-2)
    check(sorted(f"grad.{k}" for k in grads) == sorted(k for k in expected if k != "loss"), f"grads {sorted(grads)}")
    for k, g in grads.items():
        close(g, expected[f"grad.{k}"], f"grad.{k}", 5e-2)
    return f"loss {loss.item():.4f} and {len(grads)} gradients match the eager step (lm_head tied by the manifest)"


def broken(work, dirs):
    """{case: (folder, text the error must hold)}: a folder without
    config.json, an index missing a tensor, a header with another shape."""
    no_config = shutil.copytree(dirs["single"], os.path.join(work, "no_config"))
    os.remove(os.path.join(no_config, "config.json"))
    missing = shutil.copytree(dirs["sharded"], os.path.join(work, "missing"))
    index = os.path.join(missing, "model.safetensors.index.json")
    with open(index) as f:
        idx = json.load(f)
    del idx["weight_map"]["model.layers.1.mlp.down_proj.weight"]
    with open(index, "w") as f:
        json.dump(idx, f)
    shape = shutil.copytree(dirs["single"], os.path.join(work, "shape"))
    rewrite_header(os.path.join(shape, "model.safetensors"),
                   lambda h: h["model.norm.weight"].update(shape=[2, 32]))
    return {"no config.json": (no_config, "has no config.json"),
            "missing tensor": (missing, "model.layers.1.mlp.down_proj.weight"),
            "shape mismatch": (shape, "model.norm.weight")}


def case_error(r, needle):
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("spmdc_export: error:") and needle in lines[0],
          f"exit {r.returncode}, stderr {r.stderr.strip()[-1500:]}")
    return lines[0]


# ----------------------------------------------------------------- the 8B-shaped checkpoint


def llama_8b(folder, shards=4):
    """An 8B-shaped Llama checkpoint folder (config.json, an index and sparse
    bf16 shards: real headers, data holes)."""
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                                   num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                   max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False,
                                   bos_token_id=128000, eos_token_id=128001, rms_norm_eps=1e-5)
    cfg.dtype = "bfloat16"
    cfg.save_pretrained(folder)
    h, f, v, kv = 4096, 14336, 128256, 1024
    layer = {"self_attn.q_proj.weight": (h, h), "self_attn.k_proj.weight": (kv, h), "self_attn.v_proj.weight": (kv, h),
             "self_attn.o_proj.weight": (h, h), "mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h),
             "mlp.down_proj.weight": (h, f), "input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,)}
    names = {"model.embed_tokens.weight": (v, h)}
    names.update({f"model.layers.{i}.{k}": s for i in range(32) for k, s in layer.items()})
    names.update({"model.norm.weight": (h,), "lm_head.weight": (v, h)})
    keys = list(names)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = keys[s * len(keys) // shards:(s + 1) * len(keys) // shards]
        write_sparse(os.path.join(folder, file), {k: ("BF16", names[k]) for k in part})
        weight_map.update({k: file for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, fh)
    return len(keys)


def big(work):
    folder = os.path.join(work, "llama8b")
    os.makedirs(folder)
    n = llama_8b(folder)
    out = os.path.join(work, "llama8b_out")
    t0 = time.perf_counter()
    r = cli(["--hf", folder, "-o", out], timeout=1200)
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    check(r.returncode == 0, f"8B export: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    m = manifest(os.path.join(out, "model.pt2"))
    check(len(m["tensors"]) == n, f"8B manifest: {len(m['tensors'])} tensors, expected {n}")
    size = os.path.getsize(os.path.join(out, "model.pt2"))
    print(f"ok   8B-shaped llama by reference: {elapsed:.1f} s, peak RSS {rss:.0f} MiB, model.pt2 "
          f"{size / 2**20:.1f} MiB, {n} tensors in the manifest", flush=True)
    check(rss < 2048, f"8B export peak RSS {rss:.0f} MiB, not under 2 GiB")


# ----------------------------------------------------------------- main


def exports(dirs, work, errors):
    """Runs every CLI export (two at a time); {name: CompletedProcess}."""
    jobs = {v: ["--hf", d, "-o", os.path.join(work, f"{v}_out")] for v, d in dirs.items()}
    jobs["single"].append("--expected")
    jobs["train"] = ["--hf", dirs["tied"], "--train", "--expected", "-o", os.path.join(work, "train_out")]
    for k, (d, _) in errors.items():
        jobs[k] = ["--hf", d, "-o", os.path.join(work, f"{os.path.basename(d)}_out")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(cli, args) for k, args in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


def run_cases(dirs, work, errors, results):
    failures = []
    cases = [(v, lambda v=v: case_inference(dirs[v], os.path.join(work, f"{v}_out"), v == "single")[1]) for v in dirs]
    cases.append(("train", lambda: case_train(dirs["tied"], os.path.join(work, "train_out"))))
    cases += [(k, lambda k=k, n=needle: case_error(results[k], n)) for k, (_, needle) in errors.items()]
    for name, case in cases:
        r = results[name]
        try:
            if name not in errors and r.returncode != 0:
                raise AssertionError(f"exit {r.returncode}: {r.stderr.strip()[-2000:]}")
            print(f"ok   {name}: {case()}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            failures.append(name)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also export an 8B-shaped Llama (sparse files): not in CI")
    a = ap.parse_args()
    if importlib.util.find_spec("transformers") is None:
        print("not run: transformers is not installed (scripts/setup.sh installs it)", flush=True)
        return 77
    t0 = time.perf_counter()
    failures = []
    with tempfile.TemporaryDirectory(prefix="spmdc-export-ref-") as work:
        if a.big:  # first: the peak RSS of this process's children is then the 8B export's
            try:
                big(work)
            except Exception as e:  # noqa: BLE001
                print(f"FAIL big: {type(e).__name__}: {e}", flush=True)
                failures.append("big")
        dirs = make_checkpoints(work)
        errors = broken(work, dirs)
        failures += run_cases(dirs, work, errors, exports(dirs, work, errors))
    print(f"{'FAILED' if failures else 'passed'} in {time.perf_counter() - t0:.1f} s"
          + (f": {', '.join(failures)}" if failures else ""), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
