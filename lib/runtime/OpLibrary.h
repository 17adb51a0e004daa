// Custom-op libraries: shared objects that register ops with the
// dispatcher (TORCH_LIBRARY), loaded before a program that calls them runs.
//
//   spmd-run --load-library libmyops.so -n 2 model.spmd ...   (every worker loads it)
#pragma once

#include <string>

#include "support/Status.h"

namespace spmd::runtime {

/// Loads the shared library at `path` into this process (its static
/// initializers register its ops); the error names the file and dlerror().
Status loadOpLibrary(const std::string& path);

}  // namespace spmd::runtime
