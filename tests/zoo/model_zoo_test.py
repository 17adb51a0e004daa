"""The model-zoo sweep's own machinery (scripts/model_zoo.py), cheap:

- a generic config that types its layers sliding but leaves no window (the
  zoo's sliding_window=None) gets one, so the family runs eagerly
  (transformers' Cohere2: "Could not find a `sliding_window` argument"), and
  so does one whose strict config refuses None (transformers 5's CWM, Dory),
  and one whose model builds a sliding mask even when every layer is full
  (Ministral: its config's default window is an int);
- a multi-head latent attention family (DeepSeek-V2) runs eagerly from the
  generic config;
- a family with per-language adapters (X-MOD) runs with its first language;
- a config that refuses one of the generic spellings (ProphetNet's
  num_hidden_layers) is built without it;
- --reuse-exports takes an export an earlier run left in --work instead of
  exporting again;
- --json is rewritten after every model, marked partial, and --render names
  a partial sweep in the table's command line;
- --render a.json,b.json merges two sweeps, b's record of a model replacing
  a's (a quick pass, then a rerun of some models at every layout).

Exits 77 (skip) without transformers, timm or torchvision.
Usage: model_zoo_test.py SPMDC SPMD_RUN
"""
import importlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(ROOT, "scripts", "model_zoo.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
SPMDC, SPMD_RUN = sys.argv[1:3] if len(sys.argv) >= 3 else ("spmdc", "spmd-run")

try:
    import torch
    import transformers  # noqa: F401
    import model_zoo as z
except ImportError as e:
    print(f"model_zoo_test: skipped: {e}")
    sys.exit(77)


def zoo(*args):
    return subprocess.run([sys.executable, ZOO, *args, "--spmdc", SPMDC, "--spmd-run", SPMD_RUN],
                          capture_output=True, text=True, timeout=300)


class SlidingWindow(unittest.TestCase):
    def test_generic_config_gets_a_window(self):
        cfg = z.hf_config("Cohere2Config", **dict(z.GENERIC))
        self.assertTrue(any("sliding" in t for t in cfg.layer_types))
        self.assertEqual(cfg.sliding_window, z.WINDOW)

    def test_sliding_family_runs_eagerly(self):
        m, _ = z.hf_build("Cohere2Config", "Cohere2ForCausalLM", **dict(z.GENERIC))
        ids = torch.randint(0, z.VOCAB, (1, 16))
        with torch.no_grad():
            out = m(ids)  # raised "Could not find a `sliding_window` argument in the config"
        self.assertEqual(tuple(out.shape), (1, 16, z.VOCAB))

    def test_strict_config_refusing_no_window_gets_one(self):
        tf = importlib.import_module("transformers")  # the module hf_config imports (a model build may swap it)

        class StrictConfig(tf.PretrainedConfig):  # transformers 5's strict dataclass configs
            def __init__(self, sliding_window=4096, **kw):
                if sliding_window is None:
                    raise ValueError("Validation error for field 'sliding_window': expected int, got None")
                self.sliding_window = sliding_window
                super().__init__(**kw)
        tf.ZooStrictConfig = StrictConfig
        try:
            cfg = z.hf_config("ZooStrictConfig", **dict(z.GENERIC))
        finally:
            del tf.ZooStrictConfig
        self.assertEqual(cfg.sliding_window, z.WINDOW)

    def test_full_layers_of_a_windowed_family_get_a_window(self):
        cfg = z.hf_config("MinistralConfig", **dict(z.GENERIC))
        self.assertEqual(set(cfg.layer_types), {"full_attention"})  # no layer slides: the window goes unused
        self.assertEqual(cfg.sliding_window, z.WINDOW)
        m, _ = z.hf_build("MinistralConfig", "MinistralForCausalLM", **dict(z.GENERIC))
        with torch.no_grad():  # raised "Could not find a `sliding_window` argument in the config"
            out = m(torch.randint(0, z.VOCAB, (1, 16)))
        self.assertEqual(tuple(out.shape), (1, 16, z.VOCAB))

    def test_refused_generic_spelling_is_dropped(self):
        cfg = z.hf_config("ProphetNetConfig", **dict(z.GENERIC))  # raised NotImplementedError
        self.assertEqual((cfg.num_encoder_layers, cfg.num_decoder_layers, cfg.hidden_size), (2, 2, 64))

    def test_latent_attention_family_runs_eagerly(self):
        # DeepSeek-V2's MLA: rope width = head_dim, and every head has its keys
        # (the generic GQA's 2 key heads broke SDPA: "size of tensor a (4) must match ... (8)")
        m, xs = z.MODELS["hf_deepseek_v2"]["build"]()
        self.assertEqual((m.config.qk_rope_head_dim, m.config.num_key_value_heads), (16, 4))
        with torch.no_grad():
            out = m(*xs)
        out = out[0] if isinstance(out, (tuple, list)) else out
        self.assertEqual(tuple(out.shape), (z.BATCH, z.SEQ, z.VOCAB))
        # and only there: MiMo-V2 reads v_head_dim too, and broke on MLA's
        self.assertNotIn("v_head_dim", z.zoo_models.generic("LlamaConfig"))
        self.assertEqual(z.zoo_models.generic("DeepseekV2Config")["v_head_dim"], 16)

    def test_language_adapter_family_runs_eagerly(self):
        # X-MOD: "Input language unknown. Please call set_default_language()" before
        m, xs = z.MODELS["hf_xmod"]["build"]()
        with torch.no_grad():
            out = m(*xs)
        out = out[0] if isinstance(out, (tuple, list)) else out
        self.assertEqual(tuple(out.shape), (z.BATCH, z.SEQ, z.VOCAB))

    def test_explicit_window_kept(self):
        cfg = z.hf_config("Cohere2Config", **dict(z.GENERIC, sliding_window=4))
        self.assertEqual(cfg.sliding_window, 4)


class ReuseAndPartial(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="zoo-test-")
        self.work = self.tmp.name
        self.name = next(n for n in z.MODELS if z.discovered(n))  # a listed, not failed, row when not exported
        os.makedirs(os.path.join(self.work, self.name))
        with open(os.path.join(self.work, self.name, "export.json"), "w") as f:
            json.dump({"name": self.name, "status": "build_failed", "error": "left by an earlier run"}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def test_reuse_exports_and_partial_json(self):
        js, md = os.path.join(self.work, "r.json"), os.path.join(self.work, "r.md")
        r = zoo("--only", self.name, "--quick", "--work", self.work, "--reuse-exports", "--json", js, "--out", md)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(js) as f:
            doc = json.load(f)
        self.assertNotIn("partial", doc)  # the finished sweep's JSON
        self.assertEqual(doc["records"][0]["export"]["error"], "left by an earlier run")  # not exported again
        with open(md) as f:
            self.assertIn("left by an earlier run", f.read())
        # a sweep stopped after one model: its partial JSON renders with the note
        doc["partial"] = "1 of 3 models ran"
        with open(js, "w") as f:
            json.dump(doc, f)
        r = zoo("--render", js, "--out", md)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(md) as f:
            self.assertIn("**Partial: 1 of 3 models ran**", f.read())

    def test_render_merges_sweeps(self):
        cell = lambda mesh, ok: {"layout": "dp", "mesh": mesh, "compiled": True, "matches": ok}  # noqa: E731
        rec = lambda name, *cells: {"name": name, "source": "transformers", "kind": "infer",  # noqa: E731
                                    "export": {"status": "ok", "ir": "training IR"}, "cells": list(cells)}
        first = {"versions": "v", "seconds": 60, "command": "python scripts/model_zoo.py --quick",
                 "records": [rec(self.name, cell("2", False)), rec("hf_other", cell("2", True))]}
        again = {"versions": "v", "seconds": 30, "command": "python scripts/model_zoo.py --reuse-exports",
                 "records": [rec(self.name, cell("2", True), cell("4", True))]}
        paths = [os.path.join(self.work, n) for n in ("a.json", "b.json")]
        for p, doc in zip(paths, (first, again)):
            with open(p, "w") as f:
                json.dump(doc, f)
        doc = z.merge_results(paths)
        self.assertEqual([r["name"] for r in doc["records"]], [self.name, "hf_other"])  # the first file's order
        self.assertEqual(len(doc["records"][0]["cells"]), 2)  # the rerun's record
        self.assertEqual(z.summarize(doc["records"])["cells_matching"], 3)
        self.assertEqual(doc["seconds"], 90)
        self.assertIn("--quick ; python", doc["command"])
        self.assertIsNone(doc["partial"])

    def test_partial_json_after_each_model(self):
        sweep = object.__new__(z.Sweep)  # no binaries needed: only the bookkeeping
        sweep.a = type("A", (), {"json": os.path.join(self.work, "p.json")})()
        sweep.records, sweep.lock, sweep.t0, sweep.meta = [], __import__("threading").Lock(), 0.0, {"versions": "v"}
        sweep.records.append({"name": "b"})
        sweep.save_partial(["a", "b", "c"])
        with open(sweep.a.json) as f:
            doc = json.load(f)
        self.assertEqual(doc["partial"], "1 of 3 models ran")
        self.assertEqual([r["name"] for r in doc["records"]], ["b"])
        self.assertEqual(doc["versions"], "v")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[3:])  # then optional test names
