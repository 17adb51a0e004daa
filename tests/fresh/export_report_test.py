"""testdata/export_models.py reports what a regeneration changed, and
--check leaves the folder untouched (ctest export_report).

    python tests/fresh/export_report_test.py
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "testdata", "export_models.py")


def export(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"export_models.py {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r.stdout


def row(out, name):
    """The report's row of `name`, split on runs of two or more spaces."""
    import re

    for line in out.splitlines():
        if line.startswith(name + " "):
            return re.split(r"\s{2,}", line.strip())
    raise AssertionError(f"no report row for {name} in:\n{out}")


def digests(folder):
    return {f: hashlib.sha256(open(os.path.join(folder, f), "rb").read()).hexdigest()
            for f in sorted(os.listdir(folder))}


def main():
    with tempfile.TemporaryDirectory(prefix="export-report-") as out:
        first = export(out, "--only", "mlp")
        assert row(first, "mlp")[1] == "new", first
        second = export(out, "--only", "mlp")
        assert row(second, "mlp")[1:] == ["11->11", "same", "same", "same", "0.0e+00", "0.0e+00"], second
        assert "1 archives: 1 unchanged" in second, second
        print("ok   regenerating twice: new, then unchanged")

        # The committed copy drifts: other expected values, an op and an output name.
        case = os.path.join(out, "mlp")
        expected = load_file(os.path.join(case, "expected.safetensors"))
        expected = {"output.0": expected["output.0"] + 0.5, "output.1": torch.zeros(3)}
        save_file(expected, os.path.join(case, "expected.safetensors"))
        with open(os.path.join(case, "meta.json")) as f:
            meta = json.load(f)
        meta["ops"]["aten.relu.default"] = 2
        with open(os.path.join(case, "meta.json"), "w") as f:
            json.dump(meta, f)
        before = digests(case)
        check = export("--check", out, "--only", "mlp")
        r = row(check, "mlp")
        assert r[2] == "-relu.default 2->0", r
        assert r[4] == "-output.1", r
        assert r[5:] == ["0.0e+00", "5.0e-01"], r
        assert digests(case) == before, "--check changed the folder"
        print("ok   --check reports ops, output names and values, leaves the folder as it was")

    committed = os.path.join(ROOT, "testdata", "pt2", "mlp")
    before = digests(committed)
    check = export("--check", "--only", "mlp")
    assert row(check, "mlp")[1].startswith("11->"), check
    assert digests(committed) == before, "--check changed testdata/pt2/mlp"
    print("ok   --check against testdata/pt2 leaves it untouched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
