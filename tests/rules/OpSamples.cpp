// The hand-built samples (see OpSamples.h), grouped as the rule families.
#include "OpSamples.h"

namespace spmd::testing {
namespace {

using namespace samples;

void pointwiseSamples(std::vector<OpSample>& s) {
  for (const char* t : {"aten.acos.default",      "aten.acosh.default",
                        "aten.asin.default",      "aten.asinh.default",
                        "aten.atan.default",      "aten.atanh.default",
                        "aten.ceil.default",      "aten.contiguous.default",
                        "aten.cosh.default",      "aten.expm1.default",
                        "aten.floor.default",     "aten.hardsigmoid.default",
                        "aten.hardswish.default", "aten.lift_fresh_copy.default",
                        "aten.log10.default",     "aten.log1p.default",
                        "aten.log2.default",      "aten.mish.default",
                        "aten.round.default",     "aten.sign.default",
                        "aten.sinh.default",      "aten.tan.default",
                        "aten.trunc.default"})
    s.push_back({t, onX({})});
  for (const char* t : {"aten.abs.default", "aten.cos.default", "aten.log.default", "aten.reciprocal.default",
                        "aten.silu.default", "aten.sin.default", "aten.sqrt.default", "aten.tanh.default"})
    s.push_back({t, onX({})});
  s.push_back({"aten.clamp.default", onX({{"min", F(-0.5)}})});
  for (const char* t : {"aten.isinf.default", "aten.isnan.default"})
    s.push_back({t, onX({}, {"y", {8, 6}, b8})});
  for (const char* t : {"aten.atan2.default", "aten.fmod.Tensor", "aten.maximum.default",
                        "aten.minimum.default", "aten.pow.Tensor_Tensor", "aten.remainder.Tensor"})
    s.push_back({t, binary()});
  for (const char* t :
       {"aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor", "aten.__and__.Tensor",
        "aten.__or__.Tensor", "aten.__xor__.Tensor", "aten.eq.Tensor", "aten.ge.Tensor", "aten.gt.Tensor",
        "aten.le.Tensor", "aten.logical_or.default", "aten.lt.Tensor", "aten.ne.Tensor"})
    s.push_back({t, binary("other", b8)});
  for (const char* t :
       {"aten.bitwise_and.Scalar", "aten.bitwise_or.Scalar", "aten.bitwise_xor.Scalar", "aten.__and__.Scalar",
        "aten.__or__.Scalar", "aten.__xor__.Scalar", "aten.gt.Scalar", "aten.lt.Scalar"})
    s.push_back({t, onX({{"other", I(1)}}, {"y", {8, 6}, b8})});
  s.push_back({"aten.pow.Scalar", op(
                                      [](TestGraph& g) {
                                        return Args{{"self", F(2.0)}, {"exponent", T(g.input("x", {8, 6}))}};
                                      },
                                      {{"y", {8, 6}}})});
  s.push_back({"aten.gelu_backward.default", backward()});
  s.push_back({"aten.threshold_backward.default", backward({{"threshold", F(0.0)}})});
  for (const char* t : {"aten._log_softmax_backward_data.default", "aten._softmax_backward_data.default"})
    s.push_back({t, op(
                        [](TestGraph& g) {
                          return Args{{"grad_output", T(g.input("g", {8, 6}))},
                                      {"output", T(g.input("x", {8, 6}))},
                                      {"dim", I(1)},
                                      {"input_dtype", dtype(f32)}};
                        },
                        {{"y", {8, 6}}})});
}

// Pointwise ops with more arguments: scalars, rounding modes, masks, casts, dropout.
void pointwiseArgSamples(std::vector<OpSample>& s) {
  s.push_back({"aten.logical_xor.default", binary("other", b8)});
  s.push_back({"aten.atan2.out", op(
                                     [](TestGraph& g) {
                                       return Args{{"self", T(g.input("x", {8, 6}))},
                                                   {"other", T(g.input("w", {6}))},
                                                   {"out", T(g.input("o", {8, 6}))}};
                                     },
                                     {{"y", {8, 6}}})});
  for (const char* t : {"aten.fmod.Scalar", "aten.remainder.Scalar", "aten.sub.Scalar"})
    s.push_back({t, onX({{"other", F(2.0)}})});
  s.push_back({"aten.div.Scalar_mode", onX({{"other", F(2.0)}, {"rounding_mode", S("floor")}})});
  s.push_back({"aten.div.Tensor_mode", op(
                                           [](TestGraph& g) {
                                             return Args{{"self", T(g.input("x", {8, 6}))},
                                                         {"other", T(g.input("w", {6}))},
                                                         {"rounding_mode", S("trunc")}};
                                           },
                                           {{"y", {8, 6}}})});
  s.push_back({"aten.clamp.Tensor", binary("min")});
  s.push_back({"aten.elu.default", onX({{"alpha", F(1.0)}})});
  s.push_back({"aten.hardtanh.default", onX({{"min_val", F(-0.5)}, {"max_val", F(0.5)}})});
  s.push_back({"aten.leaky_relu.default", onX({{"negative_slope", F(0.1)}})});
  s.push_back({"aten.softplus.default", onX({{"beta", F(2.0)}})});
  s.push_back({"aten.fill.Scalar", onX({{"value", F(3.0)}})});
  for (const char* t : {"aten.hardsigmoid_backward.default", "aten.hardswish_backward.default",
                        "aten.mish_backward.default", "aten.silu_backward.default"})
    s.push_back({t, backward()});
  s.push_back({"aten.softplus_backward.default", backward({{"beta", F(1.0)}, {"threshold", F(20.0)}})});
  s.push_back({"aten.masked_fill.Scalar", op(
                                              [](TestGraph& g) {
                                                return Args{{"self", T(g.input("x", {8, 6}))},
                                                            {"mask", T(g.input("m", {8, 1}, b8))},
                                                            {"value", F(0.0)}};
                                              },
                                              {{"y", {8, 6}}})});
  s.push_back({"aten.masked_fill.Tensor", op(
                                              [](TestGraph& g) {
                                                return Args{{"self", T(g.input("x", {8, 6}))},
                                                            {"mask", T(g.input("m", {8, 6}, b8))},
                                                            {"value", T(g.input("v", {}))}};
                                              },
                                              {{"y", {8, 6}}})});
  s.push_back({"aten._to_copy.default", onX({{"dtype", dtype(i64)}}, {"y", {8, 6}, i64})});
  s.push_back({"aten.to.dtype",
               onX({{"dtype", dtype(ir::ScalarType::Double)}}, {"y", {8, 6}, ir::ScalarType::Double})});
  s.push_back({"aten.copy.default", binary("src")});
  s.push_back({"aten.type_as.default", op(
                                           [](TestGraph& g) {
                                             return Args{
                                                 {"self", T(g.input("x", {8, 6}))},
                                                 {"other", T(g.input("o", {4}, ir::ScalarType::Double))}};
                                           },
                                           {{"y", {8, 6}, ir::ScalarType::Double}})});
  s.push_back({"aten.dropout.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"input", T(g.input("x", {8, 6}))}, {"p", F(0.0)}, {"train", B(true)}};
                   },
                   {{"y", {8, 6}}})});
  s.push_back({"aten.native_dropout.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"input", T(g.input("x", {8, 6}))}, {"p", F(0.1)}, {"train", B(true)}};
                   },
                   {{"y", {8, 6}}, {"mask", {8, 6}, b8}})});
  s.push_back({"aten.native_dropout_backward.default", op(
                                                           [](TestGraph& g) {
                                                             return Args{
                                                                 {"grad_output", T(g.input("g", {8, 6}))},
                                                                 {"mask", T(g.input("m", {8, 6}, b8))},
                                                                 {"scale", F(1.25)}};
                                                           },
                                                           {{"y", {8, 6}}})});
}

void reductionSamples(std::vector<OpSample>& s) {
  for (const char* t : {"aten.amax.default", "aten.amin.default"})
    s.push_back({t, onX({{"dim", Is({1})}}, {"y", {8}})});
  s.push_back({"aten.cumsum.default", onX({{"dim", I(1)}})});
  s.push_back({"aten.any.default", onX({}, {"y", {}, b8})});
  s.push_back({"aten.any.dims", onX({{"dim", Is({0})}}, {"y", {6}, b8})});
  s.push_back({"aten.argmax.default", onX({{"dim", I(1)}}, {"y", {8}, i64})});
  s.push_back({"aten.argmin.default", onX({}, {"y", {}, i64})});
  for (const char* t : {"aten.max.dim", "aten.min.dim"})
    s.push_back({t, image({{"dim", I(1)}}, {{"v", {8}}, {"i", {8}, i64}}, {8, 6})});
  s.push_back({"aten.prod.default", onX({}, {"y", {}})});
  s.push_back({"aten.prod.dim_int", onX({{"dim", I(0)}, {"keepdim", B(true)}}, {"y", {1, 6}})});
  s.push_back({"aten.var.correction", onX({{"dim", Is({1})}, {"correction", I(1)}}, {"y", {8}})});
  s.push_back({"aten.var.dim", onX({{"dim", Is({0})}}, {"y", {6}})});
  s.push_back({"aten.softmax.int", onX({{"dim", I(-1)}})});
  s.push_back({"aten.log_softmax.int", onX({{"dim", I(1)}})});
  s.push_back(
      {"aten._fft_r2c.default", onX({{"dim", Is({1})}, {"normalization", I(0)}, {"onesided", B(true)}},
                                    {"y", {8, 4}, ir::ScalarType::ComplexFloat})});
  s.push_back({"aten._fft_c2r.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"self", T(g.input("x", {8, 4}, ir::ScalarType::ComplexFloat))},
                                 {"dim", Is({1})},
                                 {"normalization", I(0)},
                                 {"last_dim_size", I(6)}};
                   },
                   {{"y", {8, 6}}})});
  auto loss = [](std::vector<int64_t> out, int64_t reduction) {
    return op(
        [reduction](TestGraph& g) {
          return Args{{"self", T(g.input("x", {8, 5}))},
                      {"target", T(g.input("t", {8}, i64))},
                      {"reduction", I(reduction)}};
        },
        {{"y", out}, {"w", {}}});
  };
  s.push_back({"aten.nll_loss_forward.default", loss({}, 2)});
  s.push_back({"aten.cross_entropy_loss.default", op(
                                                      [](TestGraph& g) {
                                                        return Args{{"self", T(g.input("x", {8, 5}))},
                                                                    {"target", T(g.input("t", {8}, i64))},
                                                                    {"reduction", I(0)}};
                                                      },
                                                      {{"y", {8}}})});
  s.push_back({"aten.nll_loss_backward.default", op(
                                                     [](TestGraph& g) {
                                                       return Args{{"grad_output", T(g.input("g", {}))},
                                                                   {"self", T(g.input("x", {8, 5}))},
                                                                   {"target", T(g.input("t", {8}, i64))},
                                                                   {"reduction", I(1)},
                                                                   {"ignore_index", I(-100)},
                                                                   {"total_weight", T(g.input("tw", {}))}};
                                                     },
                                                     {{"y", {8, 5}}})});
}

void viewSamples(std::vector<OpSample>& s) {
  s.push_back(
      {"aten.as_strided.default", onX({{"size", Is({4, 4})}, {"stride", Is({1, 4})}}, {"y", {4, 4}})});
  s.push_back({"aten.chunk.default", [](TestGraph& g, const std::string& t) {
                 g.node(t, {{"self", T(g.input("x", {8, 6}))}, {"chunks", I(3)}, {"dim", I(1)}},
                        {{"a", {8, 2}}, {"b", {8, 2}}, {"c", {8, 2}}});
               }});
  s.push_back({"aten.reshape.default", onX({{"shape", Is({48})}}, {"y", {48}})});
  s.push_back({"aten.split.Tensor", [](TestGraph& g, const std::string& t) {
                 g.node(t, {{"self", T(g.input("x", {8, 6}))}, {"split_size", I(3)}, {"dim", I(1)}},
                        {{"a", {8, 3}}, {"b", {8, 3}}});
               }});
  s.push_back({"aten.squeeze.dim", image({{"dim", I(1)}}, {{"y", {8, 6}}}, {8, 1, 6})});
  s.push_back({"aten.t.default", onX({}, {"y", {6, 8}})});
  s.push_back({"aten.transpose.int", image({{"dim0", I(0)}, {"dim1", I(2)}}, {{"y", {6, 4, 2}}}, {2, 4, 6})});
  s.push_back({"aten.diagonal.default", image({{"dim1", I(1)}, {"dim2", I(2)}}, {{"y", {2, 6}}}, {2, 6, 6})});
  s.push_back({"aten.expand_as.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"self", T(g.input("x", {1, 6}))}, {"other", T(g.input("o", {8, 6}))}};
                   },
                   {{"y", {8, 6}}})});
  s.push_back({"aten.flatten.using_ints", image({{"start_dim", I(1)}}, {{"y", {2, 256}}})});
  s.push_back({"aten.unflatten.int", onX({{"dim", I(1)}, {"sizes", Is({2, 3})}}, {"y", {8, 2, 3}})});
  s.push_back({"aten.view_as.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"self", T(g.input("x", {8, 6}))}, {"other", T(g.input("o", {48}))}};
                   },
                   {{"y", {48}}})});
  s.push_back(
      {"aten.unbind.int", [](TestGraph& g, const std::string& t) {
         g.node(t, {{"self", T(g.input("x", {2, 8, 6}))}, {"dim", I(0)}}, {{"a", {8, 6}}, {"b", {8, 6}}});
       }});
  s.push_back({"aten.stack.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"tensors", L({g.input("a", {8, 6}), g.input("b", {8, 6})})}, {"dim", I(1)}};
                   },
                   {{"y", {8, 2, 6}}})});
  s.push_back({"aten.select_scatter.default", op(
                                                  [](TestGraph& g) {
                                                    return Args{{"self", T(g.input("x", {8, 6}))},
                                                                {"src", T(g.input("s", {8}))},
                                                                {"dim", I(1)},
                                                                {"index", I(2)}};
                                                  },
                                                  {{"y", {8, 6}}})});
}

void movementSamples(std::vector<OpSample>& s) {
  s.push_back({"aten.constant_pad_nd.default", onX({{"pad", Is({1, 1})}, {"value", F(0.0)}}, {"y", {8, 8}})});
  s.push_back({"aten.pad.default", onX({{"pad", Is({1, 1})}, {"mode", S("reflect")}}, {"y", {8, 8}})});
  s.push_back(
      {"aten.reflection_pad1d.default", image({{"padding", Is({1, 2})}}, {{"y", {2, 4, 11}}}, {2, 4, 8})});
  s.push_back(
      {"aten.reflection_pad2d.default", image({{"padding", Is({1, 1, 2, 2})}}, {{"y", {2, 4, 12, 10}}})});
  s.push_back({"aten.reflection_pad3d.default",
               image({{"padding", Is({1, 1, 1, 1, 1, 1})}}, {{"y", {2, 4, 6, 6, 6}}}, {2, 4, 4, 4, 4})});
  s.push_back(
      {"aten.replication_pad2d.default", image({{"padding", Is({1, 1, 0, 0})}}, {{"y", {2, 4, 8, 10}}})});
  s.push_back({"aten.replication_pad3d.default",
               image({{"padding", Is({0, 0, 1, 1, 0, 0})}}, {{"y", {2, 4, 4, 6, 4}}}, {2, 4, 4, 4, 4})});
  s.push_back({"aten.flip.default", onX({{"dims", Is({0})}})});
  s.push_back({"aten.repeat.default", onX({{"repeats", Is({2, 1})}}, {"y", {16, 6}})});
  s.push_back({"aten.repeat_interleave.self_int", onX({{"repeats", I(3)}, {"dim", I(1)}}, {"y", {8, 18}})});
  s.push_back({"aten.diff.default", onX({{"dim", I(1)}}, {"y", {8, 5}})});
  for (const char* t : {"aten.tril.default", "aten.triu.default"})
    s.push_back({t, image({{"diagonal", I(1)}}, {{"y", {2, 8, 6}}}, {2, 8, 6})});
  s.push_back(
      {"aten.meshgrid.default", [](TestGraph& g, const std::string& t) {
         g.node(t, {{"tensors", L({g.input("a", {8}), g.input("b", {6})})}}, {{"p", {8, 6}}, {"q", {8, 6}}});
       }});
}

void matmulSamples(std::vector<OpSample>& s) {
  s.push_back({"aten.matmul.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"self", T(g.input("a", {2, 8, 6}))}, {"other", T(g.input("b", {6, 4}))}};
                   },
                   {{"y", {2, 8, 4}}})});
  s.push_back({"aten.baddbmm.default", op(
                                           [](TestGraph& g) {
                                             return Args{{"self", T(g.input("c", {8, 4}))},
                                                         {"batch1", T(g.input("a", {2, 8, 6}))},
                                                         {"batch2", T(g.input("b", {2, 6, 4}))}};
                                           },
                                           {{"y", {2, 8, 4}}})});
  s.push_back({"aten.einsum.default",
               op(
                   [](TestGraph& g) {
                     return Args{{"equation", S("bij,bjk->bik")},
                                 {"tensors", L({g.input("a", {2, 8, 6}), g.input("b", {2, 6, 4})})}};
                   },
                   {{"y", {2, 8, 4}}})});
  s.push_back(
      {"aten._cdist_forward.default",
       op(
           [](TestGraph& g) {
             return Args{{"x1", T(g.input("a", {8, 6}))}, {"x2", T(g.input("b", {4, 6}))}, {"p", F(2.0)}};
           },
           {{"y", {8, 4}}})});
  s.push_back({"aten._pdist_forward.default", onX({{"p", F(2.0)}}, {"y", {28}})});
}

}  // namespace

void addOpSamples(std::vector<OpSample>& s) {
  pointwiseSamples(s);
  pointwiseArgSamples(s);
  reductionSamples(s);
  viewSamples(s);
  movementSamples(s);
  matmulSamples(s);
}

const std::vector<OpSample>& opSamples() {
  static const std::vector<OpSample> kSamples = [] {
    std::vector<OpSample> s;
    addOpSamples(s);
    addNnOpSamples(s);
    addMoreOpSamples(s);
    return s;
  }();
  return kSamples;
}

}  // namespace spmd::testing
