// Ops beyond Core ATen that real exports and PyTorch's OpInfo suite keep
// (issue 37), checked numerically on hand-built one-op graphs on every mesh
// (2, 4, 2x2 ranks): OpInfo's extra math, complex views and polar (complex
// RoPE), histc (MoE routing statistics), cumprod, medians and mode.
//
//   histc(x f32[8, 4], 4, -2, 2) with x sharded on rows: each rank counts its
//   rows, and the counts add up ("operands [S(0)] -> results [P(sum)]").
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

namespace {

constexpr ir::ScalarType kLong = ir::ScalarType::Long;
constexpr ir::ScalarType kBool = ir::ScalarType::Bool;
constexpr ir::ScalarType kComplex = ir::ScalarType::ComplexFloat;
const std::vector<std::string> kRows = {"operands [S(0)] -> results [S(0)]",
                                        "operands [S(1)] -> results [S(1)] on 4"};

}  // namespace

TEST_CASE("hand-built math beyond Core ATen") {
  at::manual_seed(41);
  CheckStats total;
  at::Tensor x = randn({8, 4});
  at::Tensor unit = at::rand({8, 4}) * 1.8 - 0.9;
  at::Tensor positive = at::rand({8, 4}) + 0.1;
  for (const char* t : {"aten.deg2rad.default", "aten.erfc.default", "aten.exp2.default", "aten.frac.default",
                        "aten.i0.default", "aten.rad2deg.default", "aten.sgn.default", "aten.sinc.default",
                        "aten.special_erfcx.default", "aten.special_i0e.default", "aten.special_i1.default",
                        "aten.special_i1e.default", "aten.conj_physical.default", "aten.nan_to_num.default",
                        "aten.angle.default"})
    onX(total, t, x * 2, {}, {{"y", {8, 4}}}, kRows);
  for (const char* t : {"aten.digamma.default", "aten.lgamma.default"})
    onX(total, t, positive * 3, {}, {{"y", {8, 4}}}, kRows);
  for (const char* t : {"aten.erfinv.default", "aten.logit.default"})
    onX(total, t, unit.abs(), {}, {{"y", {8, 4}}}, kRows);
  onX(total, "aten.special_ndtri.default", at::rand({8, 4}) * 0.9 + 0.05, {}, {{"y", {8, 4}}}, kRows);
  onX(total, "aten.signbit.default", x, {}, {{"y", {8, 4}, kBool}}, kRows);
  onX(total, "aten.round.decimals", x * 10, {{"decimals", I(1)}}, {{"y", {8, 4}}}, kRows);
  onX(total, "aten.copysign.Scalar", x, {{"other", F(-1.0)}}, {{"y", {8, 4}}}, kRows);
  onX(total, "aten.angle.default", at::randn({8, 4}, at::kComplexFloat), {}, {{"y", {8, 4}}}, kRows);
  onX(total, "aten.sgn.default", at::randn({8, 4}, at::kComplexFloat), {}, {{"y", {8, 4}, kComplex}}, kRows);
  for (const char* t :
       {"aten.copysign.Tensor", "aten.float_power.Tensor_Tensor", "aten.fmax.default", "aten.fmin.default",
        "aten.heaviside.default", "aten.hypot.default", "aten.ldexp.Tensor", "aten.logaddexp.default",
        "aten.logaddexp2.default", "aten.nextafter.default", "aten.xlogy.Tensor"}) {
    OneOp op;
    bool power = std::string(t) == "aten.float_power.Tensor_Tensor";
    ir::ScalarType out = power ? ir::ScalarType::Double : ir::ScalarType::Float;
    auto a = op.in("a", power ? positive : x), b = op.in("b", randn({4}));
    const char* second = std::string(t) == "aten.heaviside.default" ? "values" : power ? "exponent" : "other";
    op.node(t, {{"self", a}, {second, b}}, {{"y", {8, 4}, out}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]", "operands [S(1)] [S(0)] -> results [S(1)]"});
  }
  at::Tensor mask = at::rand({8, 4}) > 0.5;
  for (const char* t : {"aten.__and__.Tensor", "aten.__or__.Tensor", "aten.__xor__.Tensor"}) {
    OneOp op;  // transformers 5's causal masks: `a & b` on bool tensors
    auto a = op.in("a", mask), b = op.in("b", at::rand({4}) > 0.5);
    op.node(t, {{"self", a}, {"other", b}}, {{"y", {8, 4}, kBool}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]", "operands [S(1)] [S(0)] -> results [S(1)]"});
  }
  for (const char* t : {"aten.__and__.Scalar", "aten.__or__.Scalar", "aten.__xor__.Scalar"})
    onX(total, t, at::randint(0, 8, {8, 4}, at::kLong), {{"other", I(3)}}, {{"y", {8, 4}, kLong}}, kRows);
  printTotal("math beyond Core ATen", total);
}

TEST_CASE("hand-built complex views and polar (complex RoPE)") {
  at::manual_seed(42);
  CheckStats total;
  {
    OneOp op;
    auto r = op.in("r", at::rand({8, 4}) + 0.5), a = op.in("a", randn({8, 4}));
    op.node("aten.polar.default", {{"abs", r}, {"angle", a}}, {{"y", {8, 4}, kComplex}})
        .check(total,
               {"operands [S(0)] [S(0)] -> results [S(0)]", "operands [S(1)] [S(1)] -> results [S(1)]"});
  }
  onX(total, "aten.view_as_real.default", at::randn({8, 4}, at::kComplexFloat), {}, {{"y", {8, 4, 2}}},
      {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]",
       "operands [P(sum)] -> results [P(sum)]"});
  onX(total, "aten.view_as_complex.default", randn({8, 4, 2}), {}, {{"y", {8, 4}, kComplex}},
      {"operands [S(1)] -> results [S(1)]", "operands [R] -> results [R]"});
  printTotal("complex views", total);
}

TEST_CASE("hand-built histc, cumprod, medians and mode") {
  at::manual_seed(43);
  CheckStats total;
  at::Tensor x = randn({8, 4});
  onX(total, "aten.histc.default", x, {{"bins", I(6)}, {"min", F(-2.0)}, {"max", F(2.0)}}, {{"y", {6}}},
      {"operands [S(0)] -> results [P(sum)]", "operands [S(1)] -> results [P(sum)] on 4"});
  // The data's own range: every rank would bin by its own extremes.
  onX(total, "aten.histc.default", x, {{"bins", I(5)}}, {{"y", {5}}}, {"operands [R] -> results [R]"});
  onX(total, "aten.cumprod.default", x, {{"dim", I(1)}}, {{"y", {8, 4}}},
      {"operands [S(0)] -> results [S(0)]"});
  for (const char* t : {"aten.median.dim", "aten.nanmedian.dim", "aten.mode.default"})
    onX(total, t, x, {{"dim", I(1)}}, {{"v", {8}}, {"i", {8}, kLong}},
        {"operands [S(0)] -> results [S(0)] [S(0)]"});
  for (const char* t : {"aten.median.default", "aten.nanmedian.default"})
    onX(total, t, x, {}, {{"y", {}}}, {"operands [R] -> results [R]"});
  printTotal("histc, scans and medians", total);
}
