// One layout evaluation in a child process (see Isolate.cpp).
#pragma once

#include <functional>

#include "passes/LayoutCost.h"
#include "support/Status.h"

namespace spmd::autoshard {

/// Runs `evaluate` in a forked child (which may change its copy of this
/// process's memory freely) and returns its result; a child that dies on a
/// signal (an internal invariant's abort) gives an error "the compiler
/// stopped on an internal error (Aborted)". Runs `fallback` in this process
/// when fork or pipe fail. The caller must be single-threaded while it runs.
Expected<passes::LayoutCost> runIsolated(const std::function<Expected<passes::LayoutCost>()>& evaluate,
                                         const std::function<Expected<passes::LayoutCost>()>& fallback);

}  // namespace spmd::autoshard
