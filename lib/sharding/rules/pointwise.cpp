// Pointwise ops: every result dim is one factor shared by the operands that
// have it (numpy broadcasting; size-1 dims take no part).
//
//   aten.add.Tensor(x[32, 64], b[64]) -> ([i, j], [j]) -> ([i, j]) {i=32, j=64} linear-joint(0, 1)
//   aten.gelu.default(x[32, 256])     -> ([i, j]) -> ([i, j]) {i=32, j=256}
//
// Linear ops let pending sums through: add/sub jointly (P + P -> P), mul
// and div in one operand (P * R -> P), backward ops in the gradient, casts
// unless they round to integers; everything else reduces them first.
// Random ops (dropout) keep every dim whole: a shard's mask could not match
// the one the unsharded op draws.
//
//   aten.native_dropout.default(x[8, 6], 0.1, true) -> ([i, j]) -> ([i, j], [i, j]) {i=8 replicated, ...}
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// Dropout: random unless p == 0 or not training (then the identity, and
// linear when `linearWhenIdentity`: native_dropout's mask is not).
RuleFn dropout(bool linearWhenIdentity) {
  return [=](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numOperands() < 1 || b.numResults() < 1) return Status::error("dropout rule: expected a tensor");
    bool identity = rules::scalarArg(node, "p", 0) == 0 || !rules::boolArg(node, "train", true);
    if (!identity) return b.replicateRest().build();
    rules::addBroadcastFactors(b);
    if (linearWhenIdentity) b.linear(Linearity::Each, {0});
    return b.replicateRest().build();
  };
}

// Pointwise, linear in `self` only when the Scalar argument `arg` is 0
// (masked_fill(x, m, 0), constant padding with 0).
RuleFn linearWhenZero(const char* arg) {
  return [arg](const ir::Node& node) -> Expected<OpShardingRule> {
    Linearity lin = rules::scalarArg(node, arg, 0) == 0 ? Linearity::Each : Linearity::None;
    return rules::pointwise(lin, {0})(node);
  };
}

// type_as(self, other): self cast to other's dtype; other's values and
// layout do not matter.
Expected<OpShardingRule> typeAsRule(const ir::Node& n) {
  RuleBuilder b(n);
  if (b.numOperands() != 2 || b.numResults() != 1) return Status::error("type_as rule: expected two tensors");
  for (int64_t d = 0; d < static_cast<int64_t>(b.operandShape(0).size()); ++d)
    if (b.operandShape(0)[static_cast<size_t>(d)] != 1)
      b.addFactor({d, -1}, {d}, b.operandShape(0)[static_cast<size_t>(d)]);
  rules::addOwnFactors(b, 1);
  if (rules::castIsLinear(tensorOperands(n)[0]->type().dtype, tensorResults(n)[0]->type().dtype))
    b.linear(Linearity::Each, {0});
  return b.replicateRest().build();
}

}  // namespace

void registerPointwiseRules(RuleRegistry& r) {
  using rules::pointwise;
  // Not linear: math, comparisons, logic, activations, rounding divisions.
  r.add({"aten.abs.default",         "aten.acos.default",        "aten.acosh.default",
         "aten.add.Scalar",          "aten.asin.default",        "aten.asinh.default",
         "aten.atan.default",        "aten.atan2.default",       "aten.atan2.out",
         "aten.atanh.default",       "aten.bitwise_and.Scalar",  "aten.bitwise_and.Tensor",
         "aten.bitwise_not.default", "aten.bitwise_or.Scalar",   "aten.bitwise_or.Tensor",
         "aten.bitwise_xor.Scalar",  "aten.bitwise_xor.Tensor",  "aten.ceil.default",
         "aten.clamp.Tensor",        "aten.clamp.default",       "aten.clamp_max.default",
         "aten.clamp_min.default",   "aten.cos.default",         "aten.cosh.default",
         "aten.div.Scalar_mode",     "aten.div.Tensor_mode",     "aten.elu.default",
         "aten.eq.Scalar",           "aten.eq.Tensor",           "aten.erf.default",
         "aten.exp.default",         "aten.expm1.default",       "aten.floor.default",
         "aten.fmod.Scalar",         "aten.fmod.Tensor",         "aten.ge.Scalar",
         "aten.ge.Tensor",           "aten.gelu.default",        "aten.gt.Scalar",
         "aten.gt.Tensor",           "aten.hardsigmoid.default", "aten.hardswish.default",
         "aten.hardtanh.default",    "aten.isinf.default",       "aten.isnan.default",
         "aten.le.Scalar",           "aten.le.Tensor",           "aten.leaky_relu.default",
         "aten.log.default",         "aten.log10.default",       "aten.log1p.default",
         "aten.log2.default",        "aten.logical_and.default", "aten.logical_not.default",
         "aten.logical_or.default",  "aten.logical_xor.default", "aten.lt.Scalar",
         "aten.lt.Tensor",           "aten.maximum.default",     "aten.minimum.default",
         "aten.mish.default",        "aten.ne.Scalar",           "aten.ne.Tensor",
         "aten.pow.Scalar",          "aten.pow.Tensor_Scalar",   "aten.pow.Tensor_Tensor",
         "aten.reciprocal.default",  "aten.relu.default",        "aten.remainder.Scalar",
         "aten.remainder.Tensor",    "aten.round.default",       "aten.rsqrt.default",
         "aten.rsub.Scalar",         "aten.sigmoid.default",     "aten.sign.default",
         "aten.silu.default",        "aten.sin.default",         "aten.sinh.default",
         "aten.softplus.default",    "aten.sqrt.default",        "aten.sub.Scalar",
         "aten.tan.default",         "aten.tanh.default",        "aten.trunc.default"},
        pointwise());
  // More math that PyTorch's OpInfo suite and real exports keep (complex
  // ones included: polar(abs, angle) -> complex, angle and sgn of complex).
  r.add({"aten.angle.default", "aten.conj_physical.default", "aten.copysign.Scalar", "aten.copysign.Tensor",
         "aten.deg2rad.default", "aten.digamma.default", "aten.erfc.default", "aten.erfinv.default",
         "aten.exp2.default", "aten.float_power.Tensor_Tensor", "aten.fmax.default", "aten.fmin.default",
         "aten.frac.default", "aten.heaviside.default", "aten.hypot.default", "aten.i0.default",
         "aten.ldexp.Tensor", "aten.lgamma.default", "aten.logaddexp.default", "aten.logaddexp2.default",
         "aten.logit.default", "aten.nan_to_num.default", "aten.nextafter.default", "aten.polar.default",
         "aten.rad2deg.default", "aten.round.decimals", "aten.sgn.default", "aten.signbit.default",
         "aten.sinc.default", "aten.special_erfcx.default", "aten.special_i0e.default",
         "aten.special_i1.default", "aten.special_i1e.default", "aten.special_ndtri.default",
         "aten.xlogy.Tensor",
         // Python's operators on tensors, as transformers 5's mask code
         // exports them (`a & b`): the bitwise ops under another name.
         "aten.__and__.Tensor", "aten.__and__.Scalar", "aten.__or__.Tensor", "aten.__or__.Scalar",
         "aten.__xor__.Tensor", "aten.__xor__.Scalar"},
        pointwise());
  // Special functions (PyTorch's OpInfo suite), elementwise in every tensor
  // operand; complex(real, imag) builds one complex element of two reals and
  // frexp gives a mantissa and an exponent per element.
  r.add({"aten.complex.default",
         "aten.frexp.Tensor",
         "aten.igamma.default",
         "aten.igammac.default",
         "aten.polygamma.default",
         "aten.special_airy_ai.default",
         "aten.special_bessel_j0.default",
         "aten.special_bessel_j1.default",
         "aten.special_bessel_y0.default",
         "aten.special_bessel_y1.default",
         "aten.special_chebyshev_polynomial_t.default",
         "aten.special_chebyshev_polynomial_u.default",
         "aten.special_chebyshev_polynomial_v.default",
         "aten.special_chebyshev_polynomial_w.default",
         "aten.special_hermite_polynomial_h.default",
         "aten.special_hermite_polynomial_he.default",
         "aten.special_laguerre_polynomial_l.default",
         "aten.special_legendre_polynomial_p.default",
         "aten.special_modified_bessel_i0.default",
         "aten.special_modified_bessel_i1.default",
         "aten.special_modified_bessel_k0.default",
         "aten.special_modified_bessel_k1.default",
         "aten.special_scaled_modified_bessel_k0.default",
         "aten.special_scaled_modified_bessel_k1.default",
         "aten.special_shifted_chebyshev_polynomial_t.default",
         "aten.special_shifted_chebyshev_polynomial_u.default",
         "aten.special_shifted_chebyshev_polynomial_v.default",
         "aten.special_shifted_chebyshev_polynomial_w.default",
         "aten.special_spherical_bessel_j0.default",
         "aten.special_zeta.default"},
        pointwise());
  // Linear in their one tensor: copies, views, scaling.
  // Conjugation is linear over the reals: conj(a + b) = conj(a) + conj(b).
  r.add({"aten._conj.default", "aten._conj_physical.default"}, pointwise(Linearity::Each, {0}));
  r.add({"aten.alias.default", "aten.clone.default", "aten.contiguous.default", "aten.div.Scalar",
         "aten.lift_fresh_copy.default", "aten.mul.Scalar", "aten.neg.default"},
        pointwise(Linearity::Each, {0}));
  // Backward ops: linear in the incoming gradient (native_dropout_backward: grad * mask * scale).
  r.add(
      {"aten.gelu_backward.default", "aten.hardsigmoid_backward.default", "aten.hardswish_backward.default",
       "aten.mish_backward.default", "aten.native_dropout_backward.default", "aten.sigmoid_backward.default",
       "aten.silu_backward.default", "aten.softplus_backward.default", "aten.threshold_backward.default"},
      pointwise(Linearity::Each, {0}));
  // Values not read: any layout, pending too.
  r.add({"aten.empty_like.default", "aten.fill.Scalar", "aten.full_like.default", "aten.ones_like.default",
         "aten.zeros_like.default"},
        pointwise(Linearity::ValueIndependent, {0}));
  r.add({"aten._to_copy.default", "aten.to.device", "aten.to.dtype", "aten.to.dtype_layout"}, rules::cast());
  r.add("aten.add.Tensor", pointwise(Linearity::Joint, {0, 1}));
  r.add("aten.copy.default", rules::cast(1));  // self gives the shape and dtype only
  r.add("aten.div.Tensor", pointwise(Linearity::Each, {0}));
  r.add("aten.dropout.default", dropout(true));
  r.add("aten.masked_fill.Scalar", linearWhenZero("value"));
  // masked_fill(a, m, v) + masked_fill(b, m, w) == masked_fill(a + b, m, v + w).
  r.add("aten.masked_fill.Tensor", pointwise(Linearity::Joint, {0, 2}));
  r.add("aten.mul.Tensor", pointwise(Linearity::Each, {0, 1}));
  r.add("aten.native_dropout.default", dropout(false));
  r.add("aten.sub.Tensor", pointwise(Linearity::Joint, {0, 1}));
  r.add("aten.type_as.default", typeAsRule);
  r.add("aten.where.self", pointwise(Linearity::Joint, {1, 2}));
  // Fused optimizer math (torch.optim's AdamW: exp_avg.lerp_(g, 1 - b1),
  // exp_avg_sq.addcmul_(g, g, value=1 - b2), p.addcdiv_(m, denom, ...)).
  r.add({"aten.addcdiv.default", "aten.addcmul.default", "aten.lerp.Scalar", "aten.lerp.Tensor"},
        pointwise());
}

}  // namespace spmd::sharding
