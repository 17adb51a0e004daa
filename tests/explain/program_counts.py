#!/usr/bin/env python3
"""program_counts.py PROGRAM.spmd: prints "collectives N modules M" read from
the compiled program itself (its container and JSON, not spmd_explain): N
communicating collective nodes (all_gather, all_reduce, reduce_scatter,
all_to_all), M module paths (every proper prefix of a weight FQN, an
optimizer state counting as its parameter, and every nn_module_stack path;
the root not counted). The browser test compares them with the page's."""
import json
import struct
import sys

COMMUNICATING = {"spmd.all_gather", "spmd.all_reduce", "spmd.reduce_scatter", "spmd.all_to_all"}


def prefixes(path):
    parts = path.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def main(path):
    data = open(path, "rb").read()
    if data[:8] != b"SPMDPROG":
        sys.exit(f"{path}: not an spmd program")
    (length,) = struct.unpack("<Q", data[16:24])
    program = json.loads(data[32:32 + length])
    nodes = program["exported_program"]["graph_module"]["graph"]["nodes"]
    collectives = sum(1 for n in nodes if n["target"] in COMMUNICATING)
    modules = set()
    for w in program["weights"]:
        fqn = w["fqn"]
        if fqn.startswith("optim."):
            fqn = fqn[len("optim."):].rpartition(".")[0]
        owner = fqn.rpartition(".")[0]
        if owner:
            modules |= prefixes(owner)
    for n in nodes:
        stack = (n.get("metadata") or {}).get("nn_module_stack", "")
        for entry in filter(None, stack.split(";")):
            fields = entry.split(",")
            if len(fields) >= 3 and fields[1]:
                modules |= prefixes(",".join(fields[1:-1]))
    print(f"collectives {collectives} modules {len(modules)}")


if __name__ == "__main__":
    main(sys.argv[1])
