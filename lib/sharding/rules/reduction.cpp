// Reductions: reduced dims are reduction factors (sharding one leaves the
// result pending: sum -> P(sum), mean -> P(avg), amax -> P(max)); kept dims
// pass through. Softmax-like ops, scans and transforms (cumsum, fft) need
// their dims whole, and so do reductions with no pending form: arg-max
// (indices), prod, var, any, max.dim (values with indices).
//
// Log-softmax and its backward are the exception (loss parallelism): their
// dim may be sharded, the class dim of vocab-parallel logits. The expansion
// (passes/ExpandLossParallel.cpp) then computes it on the shards with a max
// and a sum all-reduce of [N, 1] instead of gathering [N, V]; to the
// propagation the dim is pass-through.
//
//   aten._log_softmax.default(x[32, 256], 1, false) -> ([i, j]) -> ([i, j]) {i=32, j=256}
//
//   aten.sum.dim_IntList(x[32, 64], [1]) -> ([i, j]) -> ([i]) {i=32, j=64 reduction(sum)} linear-each(0)
//   aten._softmax.default(x[2, 8, 16, 16], -1) -> ([i, j, k, l]) -> ([i, j, k, l]) {..., l=16 replicated}
//   aten.max.dim(x[8, 6], 1) -> ([i, j]) -> ([i], [i]) {i=8, j=6 replicated}
//
// Losses over a batch: the classes stay whole; samples pass through
// (reduction "none") or are a summed factor ("sum"); "mean" divides by the
// total weight of the whole batch, so samples stay whole there.
//
//   aten.nll_loss_forward.default(x[8, 5], t[8], None, 2, -100)
//     -> ([i, j], [i]) -> ([], []) {i=8 reduction(sum), j=5 replicated}
#include <algorithm>

#include "sharding/rules/Helpers.h"
#include "sharding/rules/LossPattern.h"

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

// reduction argument of the losses: 0 none, 1 mean, 2 sum.
FactorKind sampleKind(const ir::Node& node) {
  int64_t reduction = rules::intArg(node, "reduction", 1);
  return reduction == 0   ? FactorKind::PassThrough
         : reduction == 2 ? FactorKind::Reduction
                          : FactorKind::NeedReplication;
}

// nll_loss_forward(self[N, C] | [C], target[N] | [], weight[C]?, reduction,
// ignore_index) -> (output, total_weight), and cross_entropy_loss(self[N, C,
// d...] | [C], target[N, d...] | [N, C, d...], weight?, ...) -> output.
Expected<OpShardingRule> lossRule(const ir::Node& node) {
  RuleBuilder b(node);
  int target = rules::operandIndex(node, "target"), weight = rules::operandIndex(node, "weight");
  if (b.numOperands() < 2 || target != 1 || b.numResults() < 1)
    return Status::error("loss rule: expected self, target");
  const auto& self = b.operandShape(0);
  const auto& tgt = b.operandShape(target);
  bool batched = self.size() >= 2;
  bool probabilities = tgt.size() == self.size();  // class probabilities, not indices
  int64_t cdim = batched ? 1 : 0;
  int c = b.factor(self[static_cast<size_t>(cdim)], FactorKind::NeedReplication);
  b.operand(0, cdim, c);
  if (probabilities) b.operand(target, cdim, c);
  if (weight >= 0) b.operand(weight, 0, c);
  FactorKind samples = sampleKind(node);
  int64_t td = 0;  // next dim of the target's indices
  for (int64_t d = 0; batched && d < static_cast<int64_t>(self.size()); ++d) {
    if (d == cdim) {
      td += probabilities ? 1 : 0;
      continue;
    }
    int64_t n = self[static_cast<size_t>(d)];
    if (n == 1 || static_cast<int64_t>(tgt.size()) <= td || tgt[static_cast<size_t>(td)] != n)
      return b.replicateRest().build();
    int f = b.factor(n, samples);
    b.operand(0, d, f).operand(target, td, f);
    // reduction none: output [N, d...]
    int64_t od = d < cdim ? d : d - 1;
    if (samples == FactorKind::PassThrough && od < static_cast<int64_t>(b.resultShape(0).size()))
      b.result(0, od, f);
    ++td;
  }
  return b.replicateRest().build();
}

// nll_loss_backward(grad_output, self, target, weight?, reduction,
// ignore_index, total_weight) -> grad_input shaped like self: each sample
// alone (total_weight is the whole batch's), classes whole.
Expected<OpShardingRule> nllLossBackwardRule(const ir::Node& node) {
  RuleBuilder b(node);
  int self = rules::operandIndex(node, "self"), target = rules::operandIndex(node, "target");
  int weight = rules::operandIndex(node, "weight");
  if (self != 1 || target != 2 || b.numResults() != 1)
    return Status::error("nll_loss_backward rule: expected grad_output, self, target");
  const auto& x = b.operandShape(self);
  bool batched = x.size() == 2;
  int64_t cdim = batched ? 1 : 0;
  int c = b.factor(x[static_cast<size_t>(cdim)], FactorKind::NeedReplication);
  b.operand(self, cdim, c).result(0, cdim, c);
  if (weight >= 0) b.operand(weight, 0, c);
  if (batched && x[0] != 1 && b.operandShape(target).size() == 1) {
    int f = b.addFactor({-1, 0, 0}, {0}, x[0]);
    if (b.operandShape(0).size() == 1) b.operand(0, 0, f);  // reduction none
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// sum.dim_IntList: a reduction, except cross-entropy's one-hot row sum
// (rules/LossPattern.h), whose summed dim is pass-through: the expansion
// computes it from the per-row factor, with no all-reduce.
Expected<OpShardingRule> sumDimRule(const ir::Node& node) {
  static const RuleFn kSum = reduce("dim", FactorKind::Reduction, ReduceOp::Sum, Linearity::Each);
  SPMD_ASSIGN_OR_RETURN(OpShardingRule rule, kSum(node));
  auto m = rules::matchOneHotRowSum(node);
  if (m && !rule.operands.empty() && static_cast<size_t>(m->dim) < rule.operands[0].size())
    for (int f : rule.operands[0][static_cast<size_t>(m->dim)])
      rule.factors[static_cast<size_t>(f)].kind = FactorKind::PassThrough;
  return rule;
}

// _log_softmax(self, dim, half_to_float): every dim pass-through (the
// sharded-dim form is ExpandLossParallel's), but a half input computed in
// float keeps its dim whole.
Expected<OpShardingRule> logSoftmaxRule(const ir::Node& node) {
  if (rules::boolArg(node, "half_to_float", false)) return rules::pointwiseExceptDims("dim")(node);
  return rules::pointwise()(node);
}

// histc(self, bins, min, max): a histogram of every element. With a fixed
// range (min < max) the counts of the shards add up, so every dim is a
// summed reduction factor; with the data's own range (min == max) each
// shard would bin by its own range, so everything stays whole.
//   aten.histc.default(x[8, 6], 4, -1.0, 1.0) -> ([i, j]) -> ([k]) {i=8 reduction(sum), j=6 reduction(sum),
//   k=4 replicated}
Expected<OpShardingRule> histcRule(const ir::Node& node) {
  bool fixedRange = rules::scalarArg(node, "min", 0) < rules::scalarArg(node, "max", 0);
  return reduce(nullptr, fixedRange ? FactorKind::Reduction : FactorKind::NeedReplication, ReduceOp::Sum,
                Linearity::None)(node);
}

}  // namespace

void registerReductionRules(RuleRegistry& r) {
  using rules::pointwiseExceptDims;
  const RuleFn whole = reduce("dim", FactorKind::NeedReplication, ReduceOp::Sum, Linearity::None);
  const RuleFn wholeAll = reduce(nullptr, FactorKind::NeedReplication, ReduceOp::Sum, Linearity::None);
  // Fourier transforms are linear; their dims stay whole.
  r.add({"aten._fft_c2c.default", "aten._fft_c2r.default", "aten._fft_r2c.default"},
        pointwiseExceptDims("dim", Linearity::Each, {0}));
  r.add("aten._log_softmax.default", logSoftmaxRule);
  r.add("aten._log_softmax_backward_data.default", rules::pointwise(Linearity::Each, {0}));
  r.add("aten._softmax.default", pointwiseExceptDims("dim"));
  r.add("aten._softmax_backward_data.default", pointwiseExceptDims("dim", Linearity::Each, {0}));
  r.add("aten.amax.default", reduce("dim", FactorKind::Reduction, ReduceOp::Max, Linearity::None));
  r.add("aten.amin.default", reduce("dim", FactorKind::Reduction, ReduceOp::Min, Linearity::None));
  r.add("aten.any.default", wholeAll);
  r.add("aten.any.dim", whole);
  r.add("aten.any.dims", whole);
  r.add({"aten.argmax.default", "aten.argmin.default"}, whole);
  r.add("aten.cross_entropy_loss.default", lossRule);
  // Scans: values (and indices) along a whole dim.
  r.add({"aten.cummax.default", "aten.cummin.default", "aten.cumprod.default", "aten.logcumsumexp.default"},
        pointwiseExceptDims("dim"));
  r.add("aten.cumsum.default", pointwiseExceptDims("dim", Linearity::Each, {0}));
  // dist(self, other, p): a p-norm of the difference, no pending form.
  r.add("aten.dist.default", wholeAll);
  r.add("aten.histc.default", histcRule);
  // Histograms with bin edges (a density divides by the whole count): whole.
  r.add({"aten._histogramdd_bin_edges.default", "aten._histogramdd_from_bin_cts.default",
         "aten.histogram.bins_tensor"},
        [](const ir::Node& n) { return RuleBuilder(n).replicateRest().build(); });
  // k-th smallest along a dim (default the last): values with indices.
  r.add("aten.kthvalue.default", reduce("dim", FactorKind::NeedReplication, ReduceOp::Sum, Linearity::None));
  r.add("aten.log_softmax.int", pointwiseExceptDims("dim"));
  // A whole-tensor max or min (no dim): a pending max or min, as amax.
  r.add("aten.max.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Max, Linearity::None));
  r.add("aten.max.dim", whole);  // values with indices: no pending form
  r.add("aten.mean.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Avg, Linearity::Each));
  r.add("aten.mean.dim", reduce("dim", FactorKind::Reduction, ReduceOp::Avg, Linearity::Each));
  r.add({"aten.median.dim", "aten.mode.default", "aten.nanmedian.dim"}, whole);
  r.add({"aten.median.default", "aten.nanmedian.default"}, wholeAll);
  r.add("aten.min.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Min, Linearity::None));
  r.add("aten.min.dim", whole);
  r.add("aten.nll_loss_backward.default", nllLossBackwardRule);
  r.add("aten.nll_loss_forward.default", lossRule);
  r.add("aten.prod.default", wholeAll);
  r.add("aten.prod.dim_int", whole);
  r.add("aten.softmax.int", pointwiseExceptDims("dim"));
  r.add("aten.sum.default", reduce(nullptr, FactorKind::Reduction, ReduceOp::Sum, Linearity::Each));
  r.add("aten.sum.dim_IntList", sumDimRule);
  r.add({"aten.var.correction", "aten.var.dim", "aten.var_mean.correction"}, whole);
}

}  // namespace spmd::sharding
