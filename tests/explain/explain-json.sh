#!/usr/bin/env bash
# explain-json.sh SPMDC MODEL SCHEMA MESH OPTIMIZER [SCHEMA_B MESH_B]: compiles
# MODEL (twice for a comparison), runs `spmdc explain` on the result and
# prints the JSON the page embeds, indented (the golden tests' input).
set -euo pipefail
spmdc=$1 model=$2 schema=$3 mesh=$4 optimizer=$5
schema_b=${6:-} mesh_b=${7:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
opt=()
[ "$optimizer" != "-" ] && opt=(--optimizer "$optimizer")
"$spmdc" compile "$model" --schema "$schema" --mesh "$mesh" "${opt[@]}" -o "$dir/a.spmd" -q
programs=("$dir/a.spmd")
if [ -n "$schema_b" ]; then
  "$spmdc" compile "$model" --schema "$schema_b" --mesh "$mesh_b" "${opt[@]}" -o "$dir/b.spmd" -q
  programs+=("$dir/b.spmd")
fi
"$spmdc" explain "${programs[@]}" -o "$dir/page.html"
# The data tag's text, indented one space per level, key order kept.
python3 - "$dir/page.html" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<script id="spmd-data" type="application/json">(.*?)</script>', html, re.S)
if not m:
    sys.exit("explain-json.sh: no spmd-data tag in the page")
print(json.dumps(json.loads(m.group(1)), indent=1, ensure_ascii=False))
PY
