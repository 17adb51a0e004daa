#!/usr/bin/env bash
# Builds spmdc and spmd-run the way the GPU check does: against a dependency
# bundle (scripts/gpu-bundle.sh) instead of Debian's packages, the torch of a
# given Python, and the NCCL path compiled in. Then checks that nothing came
# from the system's copies of the bundled packages.
#
#   scripts/gpu-build.sh BUNDLE BUILD_DIR [PYTHON]     # PYTHON: python3 by default
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/gpu-build.sh BUNDLE BUILD_DIR [PYTHON]" >&2; exit 2; }
bundle=$(cd "$1" && pwd)
build=$2
python=${3:-python3}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
mkdir -p "$build"
if ! cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSPMD_DEPS_BUNDLE="$bundle" \
  -DSPMD_PYTHON="$python" -DSPMD_WITH_NCCL=ON -DSPMD_BUILD_TESTS=OFF -DSPMD_BUILD_BENCH=OFF \
  >"$build/configure.log" 2>&1; then
  tail -30 "$build/configure.log" >&2
  exit 2
fi
grep '^-- spmdc:' "$build/configure.log"
cmake --build "$build" -j"$(nproc)" --target spmdc spmd-run

# Every header of a bundled package must have come from the bundle.
system='/usr/include/(nlohmann|CLI|valijson|gloo|catch2|spdlog|fmt)/|/usr/include/(simdjson|zip|zipconf)\.h'
if [ -f "$build/.ninja_deps" ]; then
  deps=$(ninja -C "$build" -t deps)
else
  deps=$(find "$build" \( -name '*.d' -o -name compiler_depend.make \) -exec cat {} +)
fi
if leaked=$(grep -oE "$system" <<<"$deps" | sort -u) && [ -n "$leaked" ]; then
  echo "gpu-build: error: the build read system headers the bundle should supply: $leaked" >&2
  exit 1
fi
for tool in "$build/tools/spmdc/spmdc" "$build/tools/spmd-run/spmd-run"; do
  if ldd "$tool" | grep -E 'lib(zip|simdjson)\.so' | grep -vq "$bundle/lib/"; then
    echo "gpu-build: error: $tool loads libzip or libsimdjson from outside the bundle:" >&2
    ldd "$tool" | grep -E 'lib(zip|simdjson)' >&2
    exit 1
  fi
done
"$build/tools/spmd-run/spmd-run" --version
