#!/usr/bin/env bash
# Gathers what a build needs beyond torch, CMake and a compiler (headers and
# libraries of Debian's packages) into one folder, for a machine without a
# package registry (the GPU machine):
#
#   scripts/gpu-bundle.sh              # -> .deps/gpu-bundle (ignored by git)
#   scripts/gpu-bundle.sh /tmp/bundle
#
#   <bundle>/include/   nlohmann/ CLI/ valijson/ gloo/ catch2/ simdjson.h zip.h zipconf.h xxhash.h
#   <bundle>/spdlog/include/   spdlog/ fmt/ (header-only; apart, for support/Log.cpp
#                       alone: LibTorch brings another fmt the runtime reads)
#   <bundle>/lib/       libsimdjson, libzip and the libraries libzip loads
#   <bundle>/MANIFEST   the Debian packages and versions it came from
#
# Build with it: cmake -DSPMD_DEPS_BUNDLE=<bundle> (scripts/gpu-build.sh).
# Needs the packages installed (scripts/setup.sh does); fails if the
# bundle would exceed 64 MiB (what travels with the GPU check).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.deps/gpu-bundle}
header_packages=(nlohmann-json3-dev libcli11-dev libvalijson-dev libsimdjson-dev libzip-dev libgloo-dev catch2 libxxhash-dev)
spdlog_packages=(libspdlog-dev libfmt-dev)
rm -rf "$out"
mkdir -p "$out/include" "$out/spdlog/include" "$out/lib"
: >"$out/MANIFEST"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# copy_headers DEST PKG...: each package's headers into DEST, recorded in MANIFEST.
copy_headers() {
  local dest=$1 pkg version f rel
  shift
  for pkg in "$@"; do
    version=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) ||
      { echo "gpu-bundle: error: Debian package $pkg is not installed (run scripts/setup.sh)" >&2; exit 2; }
    echo "$pkg $version" >>"$out/MANIFEST"
    # Headers keep their path below /usr/include (a multiarch folder dropped).
    while IFS= read -r f; do
      [ -f "$f" ] || continue
      rel=${f#/usr/include/}
      rel=${rel#"$multiarch"/}
      mkdir -p "$dest/$(dirname "$rel")"
      cp "$f" "$dest/$rel"
    done < <(dpkg -L "$pkg" | grep '^/usr/include/')
  done
}
copy_headers "$out/include" "${header_packages[@]}"
copy_headers "$out/spdlog/include" "${spdlog_packages[@]}"

# Shared libraries: the linker names with their soname chains, then what
# libzip needs at run time beyond the C and C++ runtimes.
for name in simdjson zip; do
  so=/usr/lib/$multiarch/lib$name.so
  [ -e "$so" ] || { echo "gpu-bundle: error: $so missing" >&2; exit 2; }
  cp -a "$so"* "$out/lib/"
done
ldd "/usr/lib/$multiarch/libzip.so" | awk '/=> \//{print $3}' |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' | while read -r dep; do
  cp -L "$dep" "$out/lib/$(basename "$dep")"
done

size=$(du -sm "$out" | cut -f1)
if [ "$size" -gt 64 ]; then
  echo "gpu-bundle: error: $out is $size MiB, over the 64 MiB that travel with the GPU check" >&2
  exit 1
fi
echo "gpu-bundle: $out ($size MiB): $(find "$out/include" "$out/spdlog/include" -type f | wc -l) headers, $(ls "$out/lib" | wc -l) library files"
