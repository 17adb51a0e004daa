// The c10d differences between LibTorch 1.13 (ProcessGroupGloo is a
// ProcessGroup) and 2.x (it is a Backend behind a ProcessGroup), in one place.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef SPMD_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "runtime/Compat.h"

namespace spmd::runtime {

#if SPMD_TORCH_AT_LEAST(2, 0)
/// What collectives are issued on: a c10d Backend in 2.x.
using CommGroup = c10d::Backend;
#else
/// What collectives are issued on: a c10d ProcessGroup in 1.13.
using CommGroup = c10d::ProcessGroup;
#endif

/// A Gloo group (or NCCL when `nccl` and the build has it) of `size` ranks.
inline c10::intrusive_ptr<CommGroup> makeCommGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const c10::intrusive_ptr<c10d::ProcessGroupGloo::Options>& gloo, bool nccl) {
#ifdef SPMD_WITH_NCCL
  if (nccl) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = gloo->timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
  }
#else
  (void)nccl;
#endif
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo);
}

}  // namespace spmd::runtime
