#!/usr/bin/env bash
# Sets up everything spmdc needs on a fresh Debian 12 or 13 machine (as root,
# or with sudo), then configures and builds into build/. Safe to rerun: it
# installs only what is missing.
#   - Debian packages: compiler, CMake, CLI11, nlohmann_json, spdlog, Catch2
#     (v2 on Debian 12, v3 on 13), simdjson, libzip, valijson, xxHash, gloo's
#     headers, mimalloc, clang-format, clang-tidy;
#   - .venv: pip's torch (LibTorch for the runtime: the CUDA build of
#     2.14.1 by default, so c10d's NCCL path is compiled) and the Python
#     packages the tests use (python/requirements.txt).
#
#   scripts/setup.sh
#   SPMD_TORCH=2.13.0 scripts/setup.sh           # another torch, 2.6 to 2.14 (a CPU build has no NCCL path)
#   BUILD_TYPE=Debug BUILD_DIR=build-debug scripts/setup.sh
#   SPMD_VENV=/opt/spmdc-venv scripts/setup.sh   # the venv elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

torch_version=${SPMD_TORCH:-2.14.1}
venv=${SPMD_VENV:-$PWD/.venv}
build=${BUILD_DIR:-build}
debian=$(cut -d. -f1 /etc/debian_version 2>/dev/null || echo unknown)

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
packages=(
  cmake ninja-build g++ pkg-config ccache git
  libgloo-dev libcli11-dev nlohmann-json3-dev libspdlog-dev catch2
  libzip-dev libvalijson-dev libsimdjson-dev libbenchmark-dev libxxhash-dev
  clang-format clang-tidy
  libmimalloc-dev  # the compiler's allocator (cmake/SpmdDeps.cmake)
  iproute2  # tests/multinode/netns.sh: two nodes as network namespaces
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer and the sanitizers
  chromium  # tests/explain: the headless-browser test of spmdc explain's page
)
# FileCheck for the lit tests (tests/lit): Debian's default LLVM's tools.
case "$debian" in
  12) packages+=(llvm-14-tools) ;;
  13) packages+=(llvm-19-tools) ;;
  *) packages+=("llvm-$(apt-cache depends llvm 2>/dev/null | sed -n 's/.*Depends: llvm-\([0-9]*\)$/\1/p' | head -1)-tools") ;;
esac
# A python3 that can make a venv (pyenv's or Debian's).
python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3 python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: Debian $debian: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv: torch at the asked version plus the test packages.
want_ok() {
  "$venv/bin/python" - "$torch_version" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
import torch, safetensors, numpy, lit  # noqa: F401
want = sys.argv[1]
have = torch.__version__.split("+")[0]
sys.exit(0 if have == want.split("+")[0] else 1)
PY
}
if ! want_ok; then
  echo "setup: making $venv with torch==$torch_version"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # (This machine's pip configuration names index folders that may be
  # absent; pip warns about each, and the warnings are dropped here.)
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version" \
    -r python/requirements.txt 2>&1 | sed '/is ignored: it is neither a file nor a directory/d' >&2
  want_ok || { echo "setup: error: $venv has no working torch==$torch_version" >&2; exit 2; }
fi
# The model zoo's libraries (python/requirements-zoo.txt) and the torchvision
# release built for this torch (2.14.1 -> 0.29.1, 2.13.0 -> 0.28.0): the
# tests need them (model_zoo_quick, export_helper, hf_llama_sp_lp), so a
# failed install stops the set-up.
torchvision_version=$("$venv/bin/python" -c \
  'import torch; v = torch.__version__.split("+")[0].split("."); print(f"0.{int(v[1]) + 15}.{v[2]}")')
zoo_ok() {
  "$venv/bin/python" - "$torchvision_version" python/requirements-zoo.txt <<'PY' 2>/dev/null
import sys, importlib.metadata as md
pins = dict(l.split("==") for l in open(sys.argv[2]).read().split() if "==" in l)
pins["torchvision"] = sys.argv[1]
sys.exit(0 if all(md.version(p).split("+")[0] == v for p, v in pins.items()) else 1)
PY
}
if ! zoo_ok; then
  echo "setup: installing the model zoo's packages (python/requirements-zoo.txt, torchvision==$torchvision_version)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version" \
    "torchvision==$torchvision_version" -r python/requirements-zoo.txt 2>&1 |
    sed '/is ignored: it is neither a file nor a directory/d' >&2 || true
  zoo_ok || {
    echo "setup: error: the model zoo's packages (python/requirements-zoo.txt, torchvision==$torchvision_version)" \
      "did not install into $venv; the tests need them: install them there by hand, or rerun with a registry" >&2
    exit 2
  }
fi
# torchtitan's checkpointer (python/requirements-titan.txt, --no-deps: see there).
titan_ok() {
  "$venv/bin/python" - python/requirements-titan.txt <<'PY' 2>/dev/null
import sys, importlib.metadata as md
pins = dict(l.split("==") for l in open(sys.argv[1]).read().split() if "==" in l)
sys.exit(0 if all(md.version(p) == v for p, v in pins.items()) else 1)
PY
}
if ! titan_ok; then
  echo "setup: installing torchtitan's checkpointer (python/requirements-titan.txt)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r python/requirements-titan.txt 2>&1 |
    sed '/is ignored: it is neither a file nor a directory/d' >&2 || true
  titan_ok || {
    echo "setup: error: python/requirements-titan.txt did not install into $venv; the tests need it" >&2
    exit 2
  }
fi
cuda=$("$venv/bin/python" -c 'import torch; print(torch.version.cuda or "")')
if [ -n "$cuda" ] && ! { command -v nvcc >/dev/null || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; }; then
  echo "setup: error: torch $torch_version is a CUDA $cuda build, and its CMake config needs the CUDA toolkit" \
    "(nvcc, CUDA_HOME): install it, or use a CPU torch (SPMD_TORCH=2.13.0)" >&2
  exit 2
fi

mkdir -p "$build"
# shellcheck disable=SC2086  # SPMD_CMAKE_ARGS: extra -D flags, split on spaces
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DSPMD_PYTHON="$venv/bin/python" \
  ${SPMD_CMAKE_ARGS:-} >"$build/configure.log" 2>&1 || { tail -30 "$build/configure.log" >&2; exit 2; }
grep '^-- spmdc:' "$build/configure.log" || true
cmake --build "$build" -j"$(nproc)"
echo "setup: built into $build/ (Debian $debian)"
