// makeNcclGroup (see CommNccl.h).
#include "runtime/CommNccl.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace spmd::runtime {

c10::intrusive_ptr<c10d::Backend> makeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                int size, std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}

}  // namespace spmd::runtime
