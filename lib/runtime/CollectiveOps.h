// The spmd.* ops of compiled programs as executor kernels. They run on the
// thread's MeshComm (CollectiveScope); see ir/Collectives.h for their
// meaning and Comm.h for the groups.
#pragma once

#include <ATen/core/Tensor.h>

#include <string_view>

#include "runtime/Comm.h"
#include "runtime/LocalOps.h"

namespace spmd::runtime {

/// The kernel of an spmd.* target ("spmd.all_reduce", ...), or null.
const LocalOp* findCollective(std::string_view target);

/// `x` reduced with `op` over the ranks of `axis`, synchronously, through
/// the same code as spmd.all_reduce; not counted in the statistics.
at::Tensor allReduceNow(MeshComm& comm, int64_t axis, const at::Tensor& x, sharding::ReduceOp op);

/// `x` gathered along `dim` (strided by `splitFactor`) over the ranks of
/// `axis`, synchronously, through the same code as spmd.all_gather; not
/// counted in the statistics. `size` >= 0: the gathered dim's whole size,
/// split unevenly (torch.chunk) over the ranks: pieces are padded to the
/// chunk for the exchange and unpadded after.
at::Tensor allGatherNow(MeshComm& comm, int64_t axis, const at::Tensor& x, int64_t dim, int64_t splitFactor,
                        int64_t size = -1);

}  // namespace spmd::runtime
