#include "support/Status.h"

#include <cstdio>

namespace spmd {

void abortWithLocation(const char* file, int line, const char* what) {
  std::fprintf(stderr, "%s:%d: internal error: invariant violated: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace spmd
