// One layout evaluation in a child process (see Isolate.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

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

/// runIsolated for each job, `parallel` children at a time (results in job
/// order); `fallback(j)` runs job j in this process when its fork fails.
std::vector<Expected<passes::LayoutCost>> runIsolatedAll(
    const std::vector<std::function<Expected<passes::LayoutCost>()>>& jobs,
    const std::function<Expected<passes::LayoutCost>(size_t)>& fallback, size_t parallel);

}  // namespace spmd::autoshard
