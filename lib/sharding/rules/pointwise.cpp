// Pointwise ops: every result dim is one factor shared by the operands that
// have it (numpy broadcasting; size-1 dims take no part).
//
//   aten.add.Tensor(x[32, 64], b[64]) -> ([i, j], [j]) -> ([i, j]) {i=32, j=64} linear-joint(0, 1)
//   aten.gelu.default(x[32, 256])     -> ([i, j]) -> ([i, j]) {i=32, j=256}
//
// Linear ops let pending sums through: add/sub jointly (P + P -> P), mul
// and div in one operand (P * R -> P); everything else reduces them first.
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {

void registerPointwiseRules(RuleRegistry& r) {
  using rules::pointwise;
  const RuleFn plain = pointwise();
  const RuleFn linearUnary = pointwise(Linearity::Each, {0});
  const RuleFn valueIndependent = pointwise(Linearity::ValueIndependent, {0});
  r.add("aten._to_copy.default", linearUnary);
  r.add("aten.abs.default", plain);
  r.add("aten.add.Scalar", plain);
  r.add("aten.add.Tensor", pointwise(Linearity::Joint, {0, 1}));
  r.add("aten.alias.default", linearUnary);
  r.add("aten.bitwise_and.Scalar", plain);
  r.add("aten.bitwise_and.Tensor", plain);
  r.add("aten.bitwise_not.default", plain);
  r.add("aten.bitwise_or.Scalar", plain);
  r.add("aten.bitwise_or.Tensor", plain);
  r.add("aten.bitwise_xor.Scalar", plain);
  r.add("aten.bitwise_xor.Tensor", plain);
  r.add("aten.clamp.default", plain);
  r.add("aten.clamp_max.default", plain);
  r.add("aten.clamp_min.default", plain);
  r.add("aten.clone.default", linearUnary);
  r.add("aten.cos.default", plain);
  r.add("aten.div.Scalar", linearUnary);
  r.add("aten.div.Tensor", pointwise(Linearity::Each, {0}));
  r.add("aten.empty_like.default", valueIndependent);
  r.add("aten.eq.Scalar", plain);
  r.add("aten.eq.Tensor", plain);
  r.add("aten.erf.default", plain);
  r.add("aten.exp.default", plain);
  r.add("aten.full_like.default", valueIndependent);
  r.add("aten.ge.Scalar", plain);
  r.add("aten.ge.Tensor", plain);
  r.add("aten.gelu.default", plain);
  r.add("aten.gelu_backward.default", pointwise(Linearity::Each, {0}));
  r.add("aten.gt.Scalar", plain);
  r.add("aten.gt.Tensor", plain);
  r.add("aten.le.Scalar", plain);
  r.add("aten.le.Tensor", plain);
  r.add("aten.log.default", plain);
  r.add("aten.logical_and.default", plain);
  r.add("aten.logical_not.default", plain);
  r.add("aten.logical_or.default", plain);
  r.add("aten.lt.Scalar", plain);
  r.add("aten.lt.Tensor", plain);
  r.add("aten.maximum.default", plain);
  r.add("aten.minimum.default", plain);
  r.add("aten.mul.Scalar", linearUnary);
  r.add("aten.mul.Tensor", pointwise(Linearity::Each, {0, 1}));
  r.add("aten.ne.Scalar", plain);
  r.add("aten.ne.Tensor", plain);
  r.add("aten.neg.default", linearUnary);
  r.add("aten.ones_like.default", valueIndependent);
  r.add("aten.pow.Scalar", plain);
  r.add("aten.pow.Tensor_Scalar", plain);
  r.add("aten.pow.Tensor_Tensor", plain);
  r.add("aten.reciprocal.default", plain);
  r.add("aten.relu.default", plain);
  r.add("aten.rsqrt.default", plain);
  r.add("aten.rsub.Scalar", plain);
  r.add("aten.sigmoid.default", plain);
  r.add("aten.sigmoid_backward.default", pointwise(Linearity::Each, {0}));
  r.add("aten.silu.default", plain);
  r.add("aten.sin.default", plain);
  r.add("aten.sqrt.default", plain);
  r.add("aten.sub.Tensor", pointwise(Linearity::Joint, {0, 1}));
  r.add("aten.tanh.default", plain);
  r.add("aten.to.device", linearUnary);
  r.add("aten.to.dtype", linearUnary);
  r.add("aten.to.dtype_layout", linearUnary);
  r.add("aten.threshold_backward.default", pointwise(Linearity::Each, {0}));
  r.add("aten.where.self", pointwise(Linearity::Joint, {1, 2}));
  r.add("aten.zeros_like.default", valueIndependent);
}

}  // namespace spmd::sharding
