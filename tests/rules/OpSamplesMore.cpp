// Samples of the ops beyond Core ATen that real exports and PyTorch's OpInfo
// suite keep (issue 37): more math, complex views, histc, scans and medians.
//
//   aten.view_as_real.default(x c64[8, 6]) -> f32[8, 6, 2]
//   aten.histc.default(x f32[8, 6], 4, -1.0, 1.0) -> f32[4]
#include "OpSamples.h"

namespace spmd::testing {

using namespace samples;

void addMoreOpSamples(std::vector<OpSample>& s) {
  constexpr ir::ScalarType c64 = ir::ScalarType::ComplexFloat;
  for (const char* t :
       {"aten.conj_physical.default", "aten.deg2rad.default", "aten.digamma.default", "aten.erfc.default",
        "aten.erfinv.default", "aten.exp2.default", "aten.frac.default", "aten.i0.default",
        "aten.lgamma.default", "aten.logit.default", "aten.nan_to_num.default", "aten.rad2deg.default",
        "aten.sgn.default", "aten.sinc.default", "aten.special_erfcx.default", "aten.special_i0e.default",
        "aten.special_i1.default", "aten.special_i1e.default", "aten.special_ndtri.default"})
    s.push_back({t, onX({})});
  s.push_back({"aten.angle.default", onX({})});
  s.push_back({"aten.signbit.default", onX({}, {"y", {8, 6}, b8})});
  s.push_back({"aten.round.decimals", onX({{"decimals", I(2)}})});
  s.push_back({"aten.copysign.Scalar", onX({{"other", F(-1.0)}})});
  s.push_back({"aten.heaviside.default", binary("values")});
  s.push_back({"aten.float_power.Tensor_Tensor", binary("exponent")});
  for (const char* t : {"aten.copysign.Tensor", "aten.fmax.default", "aten.fmin.default",
                        "aten.hypot.default", "aten.ldexp.Tensor", "aten.logaddexp.default",
                        "aten.logaddexp2.default", "aten.nextafter.default", "aten.xlogy.Tensor"})
    s.push_back({t, binary()});
  s.push_back({"aten.polar.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"abs", T(g.input("r", {8, 6}))}, {"angle", T(g.input("a", {8, 6}))}};
                   },
                   {{"y", {8, 6}, c64}})});
  s.push_back({"aten.view_as_real.default", op(
                                                [](TestGraph& g) {
                                                  return Args{{"self", T(g.input("x", {8, 6}, c64))}};
                                                },
                                                {{"y", {8, 6, 2}}})});
  s.push_back({"aten.view_as_complex.default", op(
                                                   [](TestGraph& g) {
                                                     return Args{{"self", T(g.input("x", {8, 6, 2}))}};
                                                   },
                                                   {{"y", {8, 6}, c64}})});
  s.push_back({"aten.histc.default", onX({{"bins", I(4)}, {"min", F(-1.0)}, {"max", F(1.0)}}, {"y", {4}})});
  s.push_back({"aten.cumprod.default", onX({{"dim", I(1)}})});
  for (const char* t : {"aten.median.default", "aten.nanmedian.default"})
    s.push_back({t, onX({}, {"y", {}})});
  for (const char* t : {"aten.median.dim", "aten.nanmedian.dim", "aten.mode.default"})
    s.push_back({t, image({{"dim", I(1)}}, {{"v", {8}}, {"i", {8}, i64}}, {8, 6})});
  s.push_back(
      {"aten.new_empty_strided.default", onX({{"size", Is({4, 2})}, {"stride", Is({2, 1})}}, {"y", {4, 2}})});
}

}  // namespace spmd::testing
