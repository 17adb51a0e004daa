// Custom-op libraries (see OpLibrary.h).
#include "runtime/OpLibrary.h"

#include <dlfcn.h>

namespace spmd::runtime {

Status loadOpLibrary(const std::string& path) {
  // RTLD_GLOBAL: the library's symbols resolve LibTorch's, and later
  // libraries may use its own. The handle is kept for the process' life.
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) return Status::ok();
  const char* why = dlerror();
  return Status::error(path + ": cannot load the op library: " + (why ? why : "unknown error") +
                       " (it must be a shared library built against this LibTorch)");
}

}  // namespace spmd::runtime
