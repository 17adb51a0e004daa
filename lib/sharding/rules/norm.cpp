// Normalizations: the dims a statistic is computed over must stay whole;
// the other dims pass through. Gradients of the affine parameters sum over
// the passed-through dims: those are reduction factors of the backward ops,
// so sharding them leaves grad_weight and grad_bias pending.
//
//   aten.native_layer_norm.default(x[4, 16, 64], [64], w[64], b[64]) -> (out, mean[4, 16, 1], rstd)
//     -> ([i, j, k], [k], [k]) -> ([i, j, k], [i, j, 1], [i, j, 1]) {i=4, j=16, k=64 replicated}
//   aten._native_batch_norm_legit_no_training.default(x[8, 16, 32, 32], w, b, rm, rv, 0.1, 1e-5)
//     -> ([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [m], [n]) {i=8, j=16, k=32, l=32,
//        m=0 replicated, n=0 replicated}
//   aten._native_batch_norm_legit_functional.default(x[8, 16, 32, 32], ..., true, 0.1, 1e-5)
//     -> ([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j], [j], [j])
//        {i=8 replicated, j=16, k=32 replicated, l=32 replicated}
//
// Training-mode batch norm computes batch statistics: batch and spatial dims
// need replication (no cross-rank Welford here); only channels pass through.
// Group norm passes samples through only (native_group_norm's literal N
// becomes each rank's own sample count in the expansion).
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

using rules::operandIndex;
using rules::resultIndex;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Places factor `f` at `dim` of each operand / result index >= 0.
void place(RuleBuilder& b, int f, std::initializer_list<int> operands, std::initializer_list<int> results,
           int64_t dim) {
  for (int i : operands)
    if (i >= 0) b.operand(i, dim, f);
  for (int i : results)
    if (i >= 0) b.result(i, dim, f);
}

// Checks layer-norm shapes: `lead` >= 0 leading dims, weight and bias
// (operand indices) of the normalized rank, statistics (mean, rstd: operand
// or result indices, `statsAreResults`) of the input's rank; -1 is absent.
Status checkLayerNorm(const RuleBuilder& b, int64_t rank, int64_t lead, std::initializer_list<int> affine,
                      std::initializer_list<int> stats, bool statsAreResults) {
  auto rankOf = [&](int i, bool result) {
    return static_cast<int64_t>((result ? b.resultShape(i) : b.operandShape(i)).size());
  };
  bool ok = lead >= 0;
  for (int i : affine) ok = ok && (i < 0 || rankOf(i, false) == rank - lead);
  for (int i : stats) ok = ok && (i < 0 || rankOf(i, statsAreResults) == rank);
  if (ok) return Status::ok();
  return Status::error("layer_norm rule: expected weight and bias of rank " + std::to_string(rank - lead) +
                       " (normalized_shape) and mean, rstd of the input's rank " + std::to_string(rank));
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd).
Expected<OpShardingRule> layerNormRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() < 1) return Status::error("layer_norm rule: expected an input");
  const auto& in = b.operandShape(0);
  auto rank = static_cast<int64_t>(in.size());
  const ir::Argument* shape = node.input("normalized_shape");
  int64_t lead = rank - (shape ? static_cast<int64_t>(shape->ints.size()) : 1);
  int w = operandIndex(node, "weight"), bias = operandIndex(node, "bias");
  int mean = resultIndex(node, 1), rstd = resultIndex(node, 2);
  SPMD_RETURN_IF_ERROR(checkLayerNorm(b, rank, lead, {w, bias}, {mean, rstd}, true));
  for (int64_t d = 0; d < rank; ++d) {
    if (in[sz(d)] == 1) continue;
    if (d < lead) {
      place(b, b.factor(in[sz(d)]), {0}, {0, mean, rstd}, d);
      continue;
    }
    int f = b.factor(in[sz(d)], FactorKind::NeedReplication);
    place(b, f, {0}, {0}, d);
    place(b, f, {w, bias}, {}, d - lead);
  }
  return b.replicateRest().build();
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
// weight?, bias?, output_mask) -> (grad_input?, grad_weight?, grad_bias?).
Expected<OpShardingRule> layerNormBackwardRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 2) return Status::error("layer_norm backward rule: expected grad_out and input");
  const auto& in = b.operandShape(1);
  auto rank = static_cast<int64_t>(in.size());
  const ir::Argument* shape = node.input("normalized_shape");
  int64_t lead = rank - (shape ? static_cast<int64_t>(shape->ints.size()) : 1);
  int mean = operandIndex(node, "mean"), rstd = operandIndex(node, "rstd");
  int w = operandIndex(node, "weight"), bias = operandIndex(node, "bias");
  int gi = resultIndex(node, 0), gw = resultIndex(node, 1), gb = resultIndex(node, 2);
  SPMD_RETURN_IF_ERROR(checkLayerNorm(b, rank, lead, {w, bias}, {mean, rstd}, false));
  for (int64_t d = 0; d < rank; ++d) {
    if (in[sz(d)] == 1) continue;
    if (d < lead) {  // grad_weight and grad_bias sum over the leading dims
      place(b, b.factor(in[sz(d)], FactorKind::Reduction), {0, 1, mean, rstd}, {gi}, d);
      continue;
    }
    int f = b.factor(in[sz(d)], FactorKind::NeedReplication);
    place(b, f, {0, 1}, {gi}, d);
    place(b, f, {w, bias}, {gw, gb}, d - lead);
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// Batch norm: the `dataOps` / `dataResults` are shaped like the input
// [N, C, ...]; every rank-1 operand or result of C elements (weight, bias,
// running and saved statistics) is per channel. Dims other than C are of
// kind `other`.
Expected<OpShardingRule> batchNorm(RuleBuilder& b, std::initializer_list<int> dataOps,
                                   std::initializer_list<int> dataResults, FactorKind other) {
  const auto& in = b.operandShape(*dataOps.begin());
  bool ok = in.size() >= 2;
  for (int i : dataOps) ok = ok && b.operandShape(i).size() == in.size();
  for (int i : dataResults) ok = ok && (i < 0 || b.resultShape(i).size() == in.size());
  if (!ok) return Status::error("batch_norm rule: expected inputs and outputs [N, C, ...] of one rank >= 2");
  int channel = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (in[sz(d)] == 1) continue;
    int f = b.factor(in[sz(d)], d == 1 ? FactorKind::PassThrough : other);
    place(b, f, dataOps, dataResults, d);
    if (d == 1) channel = f;
  }
  std::vector<int64_t> perChannel{in[1]};
  for (int i = 0; i < b.numOperands() && channel >= 0; ++i)
    if (b.operandShape(i) == perChannel) b.operand(i, 0, channel);
  for (int i = 0; i < b.numResults() && channel >= 0; ++i)
    if (b.resultShape(i) == perChannel) b.result(i, 0, channel);
  return b.replicateRest().build();
}

// Forward batch norm (training mode read from `training` when the op has it).
Expected<OpShardingRule> batchNormRule(const ir::Node& node, bool hasTrainingArg) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() < 1) return Status::error("batch_norm rule: expected an input");
  bool training = hasTrainingArg && rules::boolArg(node, "training", false);
  // Batch statistics need every sample and position.
  return batchNorm(b, {0}, {0}, training ? FactorKind::NeedReplication : FactorKind::PassThrough);
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
// running_var?, save_mean?, save_invstd?, train, eps, output_mask), and
// batch_norm_backward (`update` for train, a trailing reserve tensor).
Expected<OpShardingRule> batchNormBackwardRule(const ir::Node& node, const char* trainArg) {
  RuleBuilder b(node);
  if (b.numOperands() < 2) return Status::error("batch_norm backward rule: expected grad_out and input");
  // In eval mode grad_input is pointwise and grad_weight/grad_bias sum
  // over batch and space; in training mode grad_input needs batch means.
  FactorKind other =
      rules::boolArg(node, trainArg, true) ? FactorKind::NeedReplication : FactorKind::Reduction;
  b.linear(Linearity::Each, {0});
  return batchNorm(b, {0, 1}, {resultIndex(node, 0)}, other);
}

// group_norm(input[N, C, ...], num_groups, weight?, bias?, ...): samples
// pass through; channels (num_groups is global) and space stay whole.
Expected<OpShardingRule> groupNormRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() != 1 || b.operandShape(0).size() < 2)
    return Status::error("group_norm rule: expected an input [N, C, ...]");
  int64_t n = b.operandShape(0)[0];
  if (n != 1) b.addFactor({0}, {0}, n);
  return b.replicateRest().build();
}

// native_group_norm(input[N, C, ...], weight?, bias?, N, C, HxW, group, eps)
//   -> (out[N, C, ...], mean[N, group], rstd[N, group]): samples pass
// through (the expansion rewrites the literal N to the rank's own count,
// Expander::localizeGroupNorm); channels and space stay whole.
Expected<OpShardingRule> nativeGroupNormRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() != 3 || b.operandShape(0).size() < 2 ||
      b.resultShape(1).size() != 2 || b.resultShape(2).size() != 2)
    return Status::error(
        "native_group_norm rule: expected an input [N, C, ...] and results out, mean [N, group], "
        "rstd [N, group]");
  int64_t n = b.operandShape(0)[0];
  if (n != 1) place(b, b.factor(n), {0}, {0, 1, 2}, 0);
  return b.replicateRest().build();
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
// HxW, group, output_mask) -> (grad_input?, grad_weight?, grad_bias?): the
// samples pass through to grad_input; grad_weight and grad_bias sum over
// them (a reduction factor: pending on a batch shard).
Expected<OpShardingRule> nativeGroupNormBackwardRule(const ir::Node& node) {
  RuleBuilder b(node);
  int mean = operandIndex(node, "mean"), rstd = operandIndex(node, "rstd");
  if (b.numOperands() < 2 || mean < 0 || rstd < 0 || b.operandShape(0).size() < 2 ||
      b.operandShape(1) != b.operandShape(0) || b.operandShape(mean).size() != 2 ||
      b.operandShape(rstd).size() != 2)
    return Status::error(
        "native_group_norm backward rule: expected grad_out and input [N, C, ...], mean and "
        "rstd [N, group]");
  int64_t n = b.operandShape(0)[0];
  if (n != 1) place(b, b.factor(n, FactorKind::Reduction), {0, 1, mean, rstd}, {resultIndex(node, 0)}, 0);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

}  // namespace

void registerNormRules(RuleRegistry& r) {
  const RuleFn trainable = [](const ir::Node& n) { return batchNormRule(n, true); };
  // Always in training mode (it updates the running statistics).
  r.add({"aten._batch_norm_with_update.default", "aten._batch_norm_with_update_functional.default"},
        [](const ir::Node& n) -> Expected<OpShardingRule> {
          RuleBuilder b(n);
          if (b.numOperands() < 1 || b.numResults() < 1)
            return Status::error("batch_norm rule: expected an input");
          return batchNorm(b, {0}, {0}, FactorKind::NeedReplication);
        });
  r.add("aten._native_batch_norm_legit.default", trainable);
  r.add("aten._native_batch_norm_legit.no_stats", trainable);
  r.add("aten._native_batch_norm_legit_functional.default", trainable);
  r.add("aten._native_batch_norm_legit_no_training.default",
        [](const ir::Node& n) { return batchNormRule(n, false); });
  r.add("aten.batch_norm.default", trainable);
  r.add("aten.batch_norm_backward.default",
        [](const ir::Node& n) { return batchNormBackwardRule(n, "update"); });
  r.add("aten.group_norm.default", groupNormRule);
  r.add("aten.layer_norm.default", layerNormRule);
  r.add("aten.native_batch_norm.default", trainable);
  r.add("aten.native_batch_norm_backward.default",
        [](const ir::Node& n) { return batchNormBackwardRule(n, "train"); });
  r.add("aten.native_group_norm.default", nativeGroupNormRule);
  r.add("aten.native_group_norm_backward.default", nativeGroupNormBackwardRule);
  r.add("aten.native_layer_norm.default", layerNormRule);
  r.add("aten.native_layer_norm_backward.default", layerNormBackwardRule);
}

}  // namespace spmd::sharding
