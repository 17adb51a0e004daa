// allocatorName: asks mimalloc whether a fresh malloc'd block lies in its
// heap, so a build that links mimalloc but still calls another malloc (the
// library listed after libc, dropped by --as-needed, or an LD_PRELOAD) says so.
//
//   spmdc --version  ->  "... allocator: mimalloc 2.0.9"
#include "Allocator.h"

#include <cstdlib>

#ifdef SPMD_MIMALLOC
#include <mimalloc.h>
#endif

namespace spmdc {

std::string allocatorName() {
#ifdef SPMD_MIMALLOC
  void* p = std::malloc(64);
  bool served = mi_is_in_heap_region(p);
  std::free(p);
  int v = mi_version();  // 209 for 2.0.9
  std::string version =
      std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
  if (!served)
    return "not mimalloc (mimalloc " + version + " is linked, but another malloc serves the process)";
  return "mimalloc " + version;
#else
  return "glibc malloc";
#endif
}

}  // namespace spmdc
