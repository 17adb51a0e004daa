// Which allocator serves this process's malloc, for `spmdc --version`.
#pragma once

#include <string>

namespace spmdc {

/// "mimalloc 2.0.9" when mimalloc (linked by cmake/SpmdDeps.cmake) serves
/// malloc, checked on a live allocation; "not mimalloc (...)" when it is
/// linked but another malloc serves; "glibc malloc" for a build without it.
std::string allocatorName();

}  // namespace spmdc
