// Reductions: reduced dims are reduction factors (sharding one leaves the
// result pending: sum -> P(sum), mean -> P(avg), amax -> P(max)); kept dims
// pass through. Softmax-like ops need their dim whole.
//
//   aten.sum.dim_IntList(x[32, 64], [1]) -> ([i, j]) -> ([i]) {i=32, j=64 reduction(sum)} linear-each(0)
//   aten._softmax.default(x[2, 8, 16, 16], -1) -> ([i, j, k, l]) -> ([i, j, k, l]) {..., l=16 replicated}
#include <algorithm>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// A reduction over `dimArg` (all dims when absent) with `keepdim`.
RuleFn reduce(const char* dimArg, FactorKind reducedKind, ReduceOp op, Linearity lin) {
  return [=](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numOperands() < 1 || b.numResults() < 1)
      return Status::error("reduction rule: expected a tensor operand");
    const auto& in = b.operandShape(0);
    int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> all(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) all[static_cast<size_t>(d)] = d;
    std::vector<int64_t> dims = dimArg ? rules::dimsArg(node, dimArg, rank, all) : all;
    if (dims.empty()) dims = all;  // sum(x, []) reduces everything
    bool keep = rules::boolArg(node, "keepdim", false);
    int64_t out = 0;
    for (int64_t d = 0; d < rank; ++d) {
      bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (in[static_cast<size_t>(d)] == 1) {
        out += (!reduced || keep) ? 1 : 0;
        continue;
      }
      if (reduced) {
        int f = b.factor(in[static_cast<size_t>(d)], reducedKind, op);
        b.operand(0, d, f);
        if (keep) ++out;
        continue;
      }
      int f = b.factor(in[static_cast<size_t>(d)]);
      b.operand(0, d, f);
      for (int r = 0; r < b.numResults(); ++r)
        if (out < static_cast<int64_t>(b.resultShape(r).size())) b.result(r, out, f);
      ++out;
    }
    if (lin != Linearity::None) b.linear(lin, {0});
    return b.replicateRest().build();
  };
}

}  // namespace

void registerReductionRules(RuleRegistry& r) {
  using rules::pointwiseExceptDims;
  r.add("aten._log_softmax.default", pointwiseExceptDims("dim"));
  r.add("aten._log_softmax_backward_data.default", pointwiseExceptDims("dim", Linearity::Each, {0}));
  r.add("aten._softmax.default", pointwiseExceptDims("dim"));
  r.add("aten._softmax_backward_data.default", pointwiseExceptDims("dim", Linearity::Each, {0}));
  r.add("aten.amax.default", reduce("dim", FactorKind::Reduction, ReduceOp::Max, Linearity::None));
  r.add("aten.amin.default", reduce("dim", FactorKind::Reduction, ReduceOp::Min, Linearity::None));
  r.add("aten.any.dim", reduce("dim", FactorKind::NeedReplication, ReduceOp::Max, Linearity::None));
  r.add("aten.cumsum.default", pointwiseExceptDims("dim", Linearity::Each, {0}));
  r.add("aten.mean.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Avg, Linearity::Each));
  r.add("aten.mean.dim", reduce("dim", FactorKind::Reduction, ReduceOp::Avg, Linearity::Each));
  r.add("aten.sum.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Sum, Linearity::Each));
  r.add("aten.sum.dim_IntList", reduce("dim", FactorKind::Reduction, ReduceOp::Sum, Linearity::Each));
}

}  // namespace spmd::sharding
