#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang, ASan + UBSan), seeds their
# corpora from testdata and runs each for a while; prints executions and
# findings per harness. CI (scripts/test.sh with CI=true) runs each for 15 s;
# long runs are by hand.
#
#   scripts/fuzz.sh                       # 60 s per harness
#   scripts/fuzz.sh 600                   # ten minutes each
#   scripts/fuzz.sh 30 schema_fuzz zip_fuzz
#
# Environment: SPMD_FUZZ_BUILD (build folder, default build-fuzz),
# SPMD_FUZZ_JOBS (build jobs, default 2), SPMD_FUZZ_SPMDC (an spmdc that
# compiles the .spmd seeds, default build/tools/spmdc/spmdc if present).
# Corpora grow in $SPMD_FUZZ_BUILD/corpus/<harness>; a crash, leak, timeout or
# out-of-memory input lands in $SPMD_FUZZ_BUILD/findings/<harness>/ (copy it
# to fuzz/regressions/<reader>/ and make it a test). Exit status 1 when a
# harness found something.
set -euo pipefail

seconds=${1:-60}
[[ $# -gt 0 ]] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SPMD_FUZZ_BUILD:-$root/build-fuzz}
jobs=${SPMD_FUZZ_JOBS:-2}
spmdc=${SPMD_FUZZ_SPMDC:-$root/build/tools/spmdc/spmdc}
all=(schema_fuzz safetensors_fuzz zip_fuzz pt2_fuzz pt2_json_fuzz ir_text_fuzz program_fuzz program_json_fuzz
     checkpoint_index_fuzz dcp_metadata_fuzz)
harnesses=("$@")
[[ ${#harnesses[@]} -eq 0 ]] && harnesses=("${all[@]}")

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
echo "fuzz.sh: configuring and building $build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_FUZZ=ON >/dev/null
built=()
for h in "${harnesses[@]}"; do
  if cmake --build "$build" --target help | grep -q "^$h:"; then built+=("$h"); else echo "fuzz.sh: no target $h, skipped"; fi
done
cmake --build "$build" -j"$jobs" --target "${built[@]}" >/dev/null

# Seeds, rebuilt each time from what the repository holds.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{schema,safetensors,zip,pt2,pt2_json,ir_text,program,program_json,checkpoint_index,dcp_metadata}
small_pt2=()
for f in "$root"/testdata/pt2/*/model.pt2; do
  [[ $(stat -c %s "$f") -le 1200000 ]] && small_pt2+=("$f")
done
for f in "${small_pt2[@]}"; do cp "$f" "$seeds/pt2/$(basename "$(dirname "$f")").pt2"; done
python3 - "$seeds/pt2_json" "${small_pt2[@]}" <<'PY'
import sys, zipfile, os
out = sys.argv[1]
for path in sys.argv[2:]:
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if "/models/" in name and name.endswith(".json"):
                model = os.path.basename(os.path.dirname(path))
                open(os.path.join(out, model + ".json"), "wb").write(z.read(name))
PY
# Small zips: a stored and a deflated member, a directory, the two smallest archives.
python3 - "$seeds/zip" <<'PY'
import sys, zipfile, os
out = sys.argv[1]
with zipfile.ZipFile(os.path.join(out, "mixed.zip"), "w") as z:
    z.writestr("m/stored.bin", bytes(range(256)), zipfile.ZIP_STORED)
    z.writestr("m/deflated.txt", b"spmdc " * 200, zipfile.ZIP_DEFLATED)
    z.writestr("m/dir/", b"")
PY
cp "$seeds/pt2/custom_op.pt2" "$seeds/pt2/tied_lm.pt2" "$seeds/zip/" 2>/dev/null || true
cp "$root"/schemas/examples/*.json "$root"/testdata/schemas/*.json "$seeds/schema/"
for f in "$root"/testdata/pt2/{mlp,tied_lm,custom_op,mlp_dynamic_batch}/*.safetensors; do
  [[ -f $f ]] && cp "$f" "$seeds/safetensors/$(basename "$(dirname "$f")")_$(basename "$f")"
done
cp "$root"/fuzz/seeds/checkpoint_index/*.json "$seeds/checkpoint_index/" 2>/dev/null || true
cp "$root"/testdata/dcp/*.metadata "$seeds/dcp_metadata/"
# IR text: the lit tests' hand-written models and the numeric cases.
for f in "$root"/tests/lit/*/*.ir "$root"/tests/lit/rules/samples/*.ir "$root"/tests/numeric/cases/*.ir; do
  if [[ $(stat -c %s "$f") -le 60000 ]]; then cp "$f" "$seeds/ir_text/$(basename "$(dirname "$f")")_$(basename "$f")"; fi
done
if [[ -x $spmdc ]]; then
  for spec in mlp:dp:2 mlp:fsdp:2 tied_lm:dp:2 mlp_train:fsdp:4 gpt_block:fsdp:2; do
    IFS=: read -r model schema mesh <<<"$spec"
    out="$seeds/program/$model.$schema.$mesh.spmd"
    "$spmdc" compile "$root/testdata/pt2/$model/model.pt2" --schema "$schema" --mesh "$mesh" -o "$out" -q \
      2>/dev/null || rm -f "$out"
  done
  python3 - "$seeds/program" "$seeds/program_json" <<'PY'
import sys, os, struct
src, out = sys.argv[1], sys.argv[2]
for name in os.listdir(src):
    data = open(os.path.join(src, name), "rb").read()
    if data[:8] == b"SPMDPROG" and len(data) >= 32:
        (length,) = struct.unpack_from("<Q", data, 16)
        open(os.path.join(out, name[:-5] + ".json"), "wb").write(data[32:32 + length])
PY
else
  echo "fuzz.sh: no spmdc at $spmdc: the program harnesses start from an empty corpus"
fi

# Which seed folder and dictionary each harness uses.
seed_of() { echo "${1%_fuzz}"; }
dict_of() { case $1 in *json*|schema_fuzz|checkpoint_index_fuzz) echo "-dict=$root/fuzz/json.dict" ;; esac; }

status=0
printf '%-22s %12s %8s %9s  %s\n' harness executions exec/s findings corpus
for h in "${built[@]}"; do
  corpus=$build/corpus/$h findings=$build/findings/$h log=$build/logs/$h.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  before=$(ls "$findings" | wc -l)
  # -fork=1 with -ignore_*: a finding is recorded and fuzzing goes on; the
  # rss and time limits make a runaway allocation or loop a finding too.
  "$build/fuzz/$h" "$corpus" "$seeds/$(seed_of "$h")" $(dict_of "$h") -max_total_time="$seconds" \
    -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -timeout=10 -max_len=1200000 -artifact_prefix="$findings/" >"$log" 2>&1 || true
  last=$(grep -E '^#[0-9]+: ' "$log" | tail -1)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  rate=$(grep -oE 'exec/s:? [0-9]+' <<<"$last" | grep -oE '[0-9]+$' || true)
  found=$(( $(ls "$findings" | wc -l) - before ))
  printf '%-22s %12s %8s %9s  %s\n' "$h" "${execs:-?}" "${rate:-?}" "$found" "$(ls "$corpus" | wc -l) inputs"
  if [[ $found -gt 0 ]]; then
    status=1
    grep -m3 -E 'ERROR: (AddressSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" | sed 's/^/    /'
  fi
done
exit $status
