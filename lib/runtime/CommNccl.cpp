// makeNcclGroup (see CommNccl.h).
#include "runtime/CommNccl.h"

#include <stdlib.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace spmd::runtime {

c10::intrusive_ptr<c10d::Backend> makeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                int size, std::chrono::milliseconds timeout) {
  // On a timeout or a dead peer, c10d's watchdog aborts the communicator
  // (so no kernel hangs) without ending the process (its default): the
  // worker then reports the failed collective itself (MeshComm::failed),
  // as it does on Gloo. A value the user set wins.
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}

}  // namespace spmd::runtime
