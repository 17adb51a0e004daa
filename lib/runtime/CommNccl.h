// NCCL process groups, in a file of their own: c10d's NCCL header pulls in
// the CUDA toolkit's headers, which nothing else in spmd_runtime needs.
// Compiled only with SPMD_WITH_NCCL (a CUDA torch).
//
//   auto g = makeNcclGroup(prefixedStore, /*rank=*/1, /*size=*/4, 60s);
//   g->allreduce(tensors)->wait();   // on NCCL's own stream; the caller's
//                                    // stream waits on it, the host does not
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace spmd::runtime {

/// An NCCL group of `size` ranks on the current CUDA device; collectives
/// that do not finish within `timeout` are aborted by c10d's watchdog, and
/// show as failed works (the process is not torn down).
c10::intrusive_ptr<c10d::Backend> makeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                int size, std::chrono::milliseconds timeout);

}  // namespace spmd::runtime
