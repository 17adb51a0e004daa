// Loss parallelism's one graph pattern: the row sum of cross-entropy's
// one-hot gradient, as export decomposes log-softmax's backward
// (`spmdc opt testdata/pt2/llama_train/model.pt2`):
//
//   %full_like_1 = aten.full_like.default(%_log_softmax, 0)
//   %scatter = aten.scatter.value(%full_like_1, 1, %where_4, -1.0)   (one index per row)
//   %mul_30 = aten.mul.Tensor(%scatter, %where_5)                    (where_5: f32[32, 1])
//   %sum_3 = aten.sum.dim_IntList(%mul_30, [1], true)                = where_5 * -1.0
//
// Each row holds one written value, so the sum is that value times the
// per-row factor: with the class dim sharded it needs no all-reduce
// (DTensor's loss_parallel backward likewise sends nothing).
#pragma once

#include <optional>

#include "ir/Graph.h"

namespace spmd::sharding::rules {

/// The per-row factor and the written value of a one-hot row sum.
struct OneHotRowSum {
  const ir::Value* factor = nullptr;  ///< shaped like the sum's result
  ir::Argument value;                 ///< the scatter's value (a number)
  int64_t dim = 0;                    ///< the summed dim, normalized
};

/// `node` (aten.sum.dim_IntList) as a one-hot row sum, or nullopt.
std::optional<OneHotRowSum> matchOneHotRowSum(const ir::Node& node);

}  // namespace spmd::sharding::rules
