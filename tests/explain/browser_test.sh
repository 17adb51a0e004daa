#!/usr/bin/env bash
# browser_test.sh SPMDC OUTDIR: opens `spmdc explain` pages in headless
# Chromium (Debian's chromium package) and checks, per page:
#   - no console message (an error or an uncaught exception) while rendering;
#   - the page's test hook (#spmd-test-hook) says it rendered, with as many
#     collectives and modules as the program has (program_counts.py reads
#     them from the .spmd itself);
#   - it rendered within 3 s (its own performance.now() at the end);
# and takes a screenshot of each into OUTDIR. Pages: llama_train under fsdp
# and under Megatron TP with AdamW, the 9,178-node llama_deep_train, and
# fsdp against Megatron on one page (the counts are program A's).
# Exit 77 (skipped) when chromium is not installed.
set -euo pipefail
spmdc=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIP: chromium not found (apt-get install chromium; scripts/setup.sh installs it)"
  exit 77
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
max_ms=3000

run_chromium() {  # run_chromium URL ARGS...: headless, private profile, no sandbox (root in CI)
  local url=$1
  shift
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" "$@" "$url"
}

check_page() {  # check_page NAME MODEL SCHEMA MESH [SCHEMA_B MESH_B]: B makes a comparison page
  local name=$1 model=$2 schema=$3 mesh=$4 schema_b=${5:-} mesh_b=${6:-}
  local prog=$work/$name.spmd page=$work/$name.html
  local programs=("$prog")
  "$spmdc" compile "$root/testdata/pt2/$model/model.pt2" --schema "$schema" --mesh "$mesh" \
    --optimizer adamw -o "$prog" -q
  if [ -n "$schema_b" ]; then
    "$spmdc" compile "$root/testdata/pt2/$model/model.pt2" --schema "$schema_b" --mesh "$mesh_b" \
      --optimizer adamw -o "$work/$name.b.spmd" -q
    programs+=("$work/$name.b.spmd")
  fi
  "$spmdc" explain "${programs[@]}" -o "$page"
  read -r _ want_colls _ want_mods < <(python3 "$here/program_counts.py" "$prog")
  run_chromium "file://$page" --enable-logging=stderr --v=0 --dump-dom >"$work/$name.dom" 2>"$work/$name.log"
  if grep -E 'CONSOLE|Uncaught' "$work/$name.log"; then
    echo "FAIL $name: the page logged to the console (above)"
    return 1
  fi
  local hook
  hook=$(grep -o '<div id="spmd-test-hook"[^>]*>' "$work/$name.dom" || true)
  attr() { sed -n "s/.* $1=\"\\([^\"]*\\)\".*/\\1/p" <<<"$hook"; }
  local status colls mods ms
  status=$(attr data-status) colls=$(attr data-collectives) mods=$(attr data-modules) ms=$(attr data-render-ms)
  echo "$name: status=$status collectives=$colls/$want_colls modules=$mods/$want_mods render=${ms}ms"
  [ "$status" = ok ] || { echo "FAIL $name: the page did not render: ${hook:-no test hook}"; return 1; }
  [ "$colls" = "$want_colls" ] || { echo "FAIL $name: $colls collectives drawn, the program has $want_colls"; return 1; }
  [ "$mods" = "$want_mods" ] || { echo "FAIL $name: $mods modules listed, the program has $want_mods"; return 1; }
  [ "$ms" -le "$max_ms" ] || { echo "FAIL $name: rendered in $ms ms (limit $max_ms)"; return 1; }
  local views=(timeline memory)
  [ -n "$schema_b" ] && views=(compare)
  for view in "${views[@]}"; do
    run_chromium "file://$page#$view" --window-size=1400,1000 --screenshot="$out/explain-$name-$view.png" \
      >/dev/null 2>&1
    [ -s "$out/explain-$name-$view.png" ] || { echo "FAIL $name: no screenshot of $view"; return 1; }
  done
}

check_page llama_train.fsdp llama_train fsdp 2
check_page llama_train.megatron llama_train "$root/schemas/examples/llama_tp.json" 4
check_page llama_deep_train.fsdp llama_deep_train fsdp 2
check_page llama_train.fsdp-vs-megatron llama_train fsdp 2 "$root/schemas/examples/llama_tp.json" 2
echo "screenshots in $out"
