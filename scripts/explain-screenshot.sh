#!/usr/bin/env bash
# Regenerates docs/explain.png, the README's picture of an `spmdc explain`
# page: llama_train under Megatron tensor parallelism on 4 ranks with AdamW,
# its memory view, shot by headless Chromium (apt-get install chromium).
#   scripts/explain-screenshot.sh [BUILD_DIR] [VIEW]   (default: build, memory)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
view=${2:-memory}
spmdc=$build/tools/spmdc/spmdc
chromium=$(command -v chromium || command -v chromium-browser) || {
  echo "explain-screenshot.sh: chromium not found (apt-get install chromium)" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$spmdc" explain testdata/pt2/llama_train/model.pt2 --schema schemas/examples/llama_tp.json --mesh 4 \
  --optimizer adamw -o "$work/llama_train.html"
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1280,900 --screenshot="$work/explain.png" \
  "file://$work/llama_train.html#$view" >/dev/null 2>&1
cp "$work/explain.png" docs/explain.png
echo "wrote docs/explain.png"
