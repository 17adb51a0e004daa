// The pointwise rules no test model exercises, checked numerically on
// hand-built one-op graphs on every mesh (2, 4, 2x2 ranks): the unary math
// and activation family, binary ops with broadcasting, scalar overloads,
// rounding divisions, casts (linear into floats, not into integers),
// masked fills, backward ops (linear in the gradient) and dropout while it
// is the identity.
#include "OneOp.h"

using namespace spmd;
using namespace spmd::numeric::oneop;

namespace {

const std::vector<std::string> kSharded = {
    "operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]",
    "operands [S(0), S(1)] -> results [S(0), S(1)] on 2x2", "operands [S(1)] -> results [S(1)] on 4"};

// op(x) with x = `value` [8, 4] and extra arguments; result `dtype`.
void unary(CheckStats& total, const std::string& target, const at::Tensor& value,
           std::vector<std::pair<std::string, Argument>> more = {},
           ir::ScalarType dtype = ir::ScalarType::Float, const std::vector<std::string>& mustSee = kSharded) {
  OneOp op;
  std::vector<std::pair<std::string, Argument>> args{{"self", op.in("x", value)}};
  args.insert(args.end(), more.begin(), more.end());
  op.node(target, args, {{"y", {8, 4}, dtype}}).check(total, mustSee);
}

}  // namespace

TEST_CASE("hand-built unary math and activations") {
  at::manual_seed(11);
  CheckStats total;
  at::Tensor x = randn({8, 4});
  at::Tensor unit = at::rand({8, 4}) * 1.8 - 0.9;  // (-0.9, 0.9)
  at::Tensor positive = at::rand({8, 4}) + 0.1;
  for (const char* t : {"aten.asinh.default", "aten.atan.default", "aten.ceil.default", "aten.cosh.default",
                        "aten.expm1.default", "aten.floor.default", "aten.hardsigmoid.default",
                        "aten.hardswish.default", "aten.mish.default", "aten.round.default",
                        "aten.sign.default", "aten.sinh.default", "aten.tan.default", "aten.trunc.default"})
    unary(total, t, x * 2);
  for (const char* t : {"aten.acos.default", "aten.asin.default", "aten.atanh.default"})
    unary(total, t, unit);
  for (const char* t : {"aten.log10.default", "aten.log1p.default", "aten.log2.default"})
    unary(total, t, positive);
  unary(total, "aten.acosh.default", positive + 1);
  at::Tensor special = x.clone();
  special.index_put_({0, 0}, std::numeric_limits<float>::infinity());
  special.index_put_({3, 1}, std::numeric_limits<float>::quiet_NaN());
  special.index_put_({5, 2}, -std::numeric_limits<float>::infinity());
  for (const char* t : {"aten.isinf.default", "aten.isnan.default"})
    unary(total, t, special, {}, ir::ScalarType::Bool);
  unary(total, "aten.elu.default", x, {{"alpha", F(1.5)}, {"scale", F(2.0)}, {"input_scale", F(0.5)}});
  unary(total, "aten.leaky_relu.default", x, {{"negative_slope", F(0.2)}});
  unary(total, "aten.hardtanh.default", x, {{"min_val", F(-0.5)}, {"max_val", F(0.25)}});
  unary(total, "aten.softplus.default", x, {{"beta", F(2.0)}, {"threshold", F(1.0)}});
  unary(total, "aten.sub.Scalar", x, {{"other", F(1.5)}, {"alpha", F(2.0)}});
  unary(total, "aten.fmod.Scalar", x * 4, {{"other", F(1.5)}});
  unary(total, "aten.remainder.Scalar", x * 4, {{"other", F(-1.5)}});
  unary(total, "aten.div.Scalar_mode", x * 4, {{"other", F(1.5)}, {"rounding_mode", Str("floor")}});
  unary(total, "aten.round.default", at::randint(-20, 20, {8, 4}, at::kLong), {}, ir::ScalarType::Long);
  unary(total, "aten.sign.default", at::randint(-3, 3, {8, 4}, at::kInt), {}, ir::ScalarType::Int);
  printTotal("unary math and activations", total);
}

TEST_CASE("hand-built binary pointwise ops broadcast") {
  at::manual_seed(12);
  CheckStats total;
  auto binary = [&](const std::string& target, const at::Tensor& a, const at::Tensor& b,
                    std::vector<std::pair<std::string, Argument>> more = {},
                    ir::ScalarType dtype = ir::ScalarType::Float, const char* second = "other") {
    OneOp op;
    std::vector<std::pair<std::string, Argument>> args{{"self", op.in("a", a)}, {second, op.in("b", b)}};
    args.insert(args.end(), more.begin(), more.end());
    op.node(target, args, {{"y", {8, 4}, dtype}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]", "operands [S(1)] [S(0)] -> results [S(1)]",
                       "operands [S(1)] [S(0)] -> results [S(1)] on 4"});
  };
  binary("aten.atan2.default", randn({8, 4}), randn({4}));
  binary("aten.fmod.Tensor", randn({8, 4}) * 4, at::rand({4}) + 0.5);
  binary("aten.remainder.Tensor", randn({8, 4}) * 4, -at::rand({4}) - 0.5);
  binary("aten.remainder.Tensor", at::randint(-20, 20, {8, 4}, at::kLong), at::randint(1, 5, {4}, at::kLong),
         {}, ir::ScalarType::Long);
  binary("aten.logical_xor.default", randn({8, 4}).gt(0), randn({4}).gt(0), {}, ir::ScalarType::Bool);
  binary("aten.div.Tensor_mode", randn({8, 4}) * 4, at::rand({4}) + 0.5, {{"rounding_mode", Str("trunc")}});
  binary("aten.div.Tensor_mode", at::randint(-20, 20, {8, 4}, at::kLong), at::randint(1, 5, {4}, at::kLong),
         {{"rounding_mode", Str("floor")}}, ir::ScalarType::Long);
  binary("aten.clamp.Tensor", randn({8, 4}), randn({4}) - 0.5, {}, ir::ScalarType::Float, "min");
  binary("aten.copy.default", randn({8, 4}).to(at::kDouble), randn({4}), {}, ir::ScalarType::Double, "src");
  {
    OneOp op;
    auto a = op.in("a", randn({8, 4})), lo = op.in("lo", randn({4}) - 1), hi = op.in("hi", randn({8, 1}) + 1);
    op.node("aten.clamp.Tensor", {{"self", a}, {"min", lo}, {"max", hi}}, {{"y", {8, 4}}})
        .check(total, {"operands [S(0)] [R] [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto a = op.in("a", randn({8, 4})), b = op.in("b", randn({4})), out = op.in("out", at::zeros({8, 4}));
    op.node("aten.atan2.out", {{"self", a}, {"other", b}, {"out", out}}, {{"y", {8, 4}}})
        .check(total, {"operands [S(1)] [S(0)] [S(1)] -> results [S(1)]"});
  }
  printTotal("binary", total);
}

TEST_CASE("hand-built casts, copies and fills: linear only into floats") {
  at::manual_seed(13);
  CheckStats total;
  at::Tensor x = randn({8, 4}) * 3;
  // float -> int64 rounds: a pending sum must be reduced before.
  unary(total, "aten._to_copy.default", x, {{"dtype", Argument::scalarType(ir::ScalarType::Long)}},
        ir::ScalarType::Long);
  unary(total, "aten.to.dtype", x, {{"dtype", Argument::scalarType(ir::ScalarType::Bool)}},
        ir::ScalarType::Bool);
  std::vector<std::string> linear = kSharded;
  linear.push_back("operands [P(sum)] -> results [P(sum)]");
  linear.push_back("operands [P(sum), S(0)] -> results [P(sum), S(0)] on 2x2");
  unary(total, "aten._to_copy.default", x, {{"dtype", Argument::scalarType(ir::ScalarType::Double)}},
        ir::ScalarType::Double, linear);
  unary(total, "aten.to.dtype", x, {{"dtype", Argument::scalarType(ir::ScalarType::BFloat16)}},
        ir::ScalarType::BFloat16, linear);
  unary(total, "aten.lift_fresh_copy.default", x, {}, ir::ScalarType::Float, linear);
  unary(total, "aten.contiguous.default", x, {}, ir::ScalarType::Float, linear);
  unary(total, "aten.fill.Scalar", x, {{"value", F(2.5)}}, ir::ScalarType::Float,
        {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [R]"});
  {
    OneOp op;
    auto a = op.in("a", x), b = op.in("b", at::zeros({2}, at::kDouble));
    op.node("aten.type_as.default", {{"self", a}, {"other", b}}, {{"y", {8, 4}, ir::ScalarType::Double}})
        .check(total, {"operands [S(1)] [R] -> results [S(1)]", "operands [P(sum)] [R] -> results [P(sum)]",
                       "operands [R] [S(0)] -> results [R]"});
  }
  {
    OneOp op;
    auto a = op.in("a", x), b = op.in("b", at::zeros({2}, at::kLong));
    op.node("aten.type_as.default", {{"self", a}, {"other", b}}, {{"y", {8, 4}, ir::ScalarType::Long}})
        .check(total, {"operands [S(1)] [R] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto a = op.in("a", randn({8, 4}).to(at::kDouble)), b = op.in("b", randn({8, 4}));
    op.node("aten.copy.default", {{"self", a}, {"src", b}}, {{"y", {8, 4}, ir::ScalarType::Double}})
        .check(total,
               {"operands [R] [P(sum)] -> results [P(sum)]", "operands [S(1)] [S(1)] -> results [S(1)]"});
  }
  printTotal("casts", total);
}

TEST_CASE("hand-built masked fills, backward ops and identity dropout") {
  at::manual_seed(14);
  CheckStats total;
  at::Tensor x = randn({8, 4});
  for (double value : {0.0, 1.5}) {
    OneOp op;
    auto a = op.in("a", x), m = op.in("m", randn({8, 1}).gt(0));
    std::vector<std::string> mustSee = {"operands [S(0)] [S(0)] -> results [S(0)]",
                                        "operands [S(1)] [R] -> results [S(1)]"};
    if (value == 0) mustSee.push_back("operands [P(sum)] [R] -> results [P(sum)]");
    op.node("aten.masked_fill.Scalar", {{"self", a}, {"mask", m}, {"value", F(value)}}, {{"y", {8, 4}}})
        .check(total, mustSee);
  }
  {
    OneOp op;
    auto a = op.in("a", x), m = op.in("m", randn({8, 4}).gt(0)), v = op.in("v", randn({}));
    op.node("aten.masked_fill.Tensor", {{"self", a}, {"mask", m}, {"value", v}}, {{"y", {8, 4}}})
        .check(total,
               {"operands [P(sum)] [R] [P(sum)] -> results [P(sum)]",
                "operands [S(0)] [S(0)] [R] -> results [S(0)]",
                "operands [P(sum), P(sum)] [R, R] [P(sum), P(sum)] -> results [P(sum), P(sum)] on 2x2"});
  }
  const std::vector<std::string> linearInGrad = {"operands [P(sum)] [R] -> results [P(sum)]",
                                                 "operands [S(1)] [S(1)] -> results [S(1)]",
                                                 "operands [P(sum)] [R] -> results [P(sum)] on 4"};
  for (const char* t : {"aten.hardsigmoid_backward.default", "aten.hardswish_backward.default",
                        "aten.mish_backward.default", "aten.silu_backward.default"}) {
    OneOp op;
    auto g = op.in("g", randn({8, 4})), s = op.in("s", x * 4);
    op.node(t, {{"grad_output", g}, {"self", s}}, {{"y", {8, 4}}}).check(total, linearInGrad);
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 4})), s = op.in("s", x * 4);
    op.node("aten.softplus_backward.default",
            {{"grad_output", g}, {"self", s}, {"beta", F(2.0)}, {"threshold", F(3.0)}}, {{"y", {8, 4}}})
        .check(total, linearInGrad);
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 4})), m = op.in("m", at::rand({8, 4}).gt(0.3));
    op.node("aten.native_dropout_backward.default", {{"grad_output", g}, {"mask", m}, {"scale", F(1.25)}},
            {{"y", {8, 4}}})
        .check(total, linearInGrad);
  }
  for (auto [p, train] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
    OneOp op;
    auto a = op.in("a", x);
    op.node("aten.dropout.default", {{"input", a}, {"p", F(p)}, {"train", B(train)}}, {{"y", {8, 4}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto a = op.in("a", x);
    op.node("aten.native_dropout.default", {{"input", a}, {"p", F(0.5)}, {"train", B(false)}},
            {{"y", {8, 4}}, {"mask", {8, 4}, ir::ScalarType::Bool}})
        .check(total,
               {"operands [S(1)] -> results [S(1)] [S(1)]", "operands [S(0)] -> results [S(0)] [S(0)] on 4"});
  }
  printTotal("masked fills, backward, dropout", total);
}
