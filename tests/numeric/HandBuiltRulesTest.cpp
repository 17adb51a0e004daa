// Rules no test model exercises in a sharded way, checked numerically on
// hand-built one-op graphs with random inputs: reductions leaving pending
// sums, means, maxima and minima, data movement (cat, transpose, split into
// several results), scans, backward ops, indexing with random in-range
// indices, pooling and factories. Every strategy each rule offers runs on 2
// simulated ranks against the op run unsharded; each case also names the
// strategies it must see, so a rule that stops offering them fails here.
#include <ATen/ATen.h>

#include "../TestCatch.h"

#include <algorithm>
#include <iostream>

#include "NumericUtil.h"
#include "runtime/TypeMap.h"

using namespace spmd;
using ir::Argument;
using numeric::CheckStats;

namespace {

/// One result of a hand-built node: name, sizes, dtype.
struct Out {
  std::string name;
  std::vector<int64_t> sizes;
  ir::ScalarType dtype = ir::ScalarType::Float;
};

/// Builds one node over real input values and checks it.
class OneOp {
 public:
  /// A tensor operand named `name` holding `value`.
  Argument in(const std::string& name, const at::Tensor& value) {
    auto v = g_.addValue(name, ir::ValueKind::Tensor);
    REQUIRE(v.hasValue());
    ir::TensorType& t = (*v)->mutableType();
    t.dtype = *runtime::fromC10ScalarType(value.scalar_type());
    for (int64_t s : value.sizes()) t.sizes.emplace_back(s);
    values_[name] = value;
    return Argument::tensor(*v);
  }
  /// A Tensor[] or Tensor?[] operand.
  static Argument list(std::vector<Argument> tensors, Argument::Kind kind = Argument::Kind::Tensors) {
    Argument a;
    a.kind = kind;
    for (const Argument& t : tensors) a.values.push_back(t.value());
    return a;
  }
  /// Adds the node `target(args)`; each entry of `outs` is one output
  /// argument: one tensor, or (with `listOutput`) one Tensor[] of them all.
  /// An Out with an empty name is a None output.
  OneOp& node(const std::string& target, std::vector<std::pair<std::string, Argument>> args,
              const std::vector<Out>& outs, bool listOutput = false) {
    std::vector<ir::NamedArgument> inputs;
    for (auto& [name, a] : args) inputs.push_back({name, std::move(a), false});
    std::vector<Argument> outputs;
    Argument list;
    list.kind = Argument::Kind::Tensors;
    for (const Out& o : outs) {
      if (o.name.empty()) {
        outputs.push_back(Argument::none());
        continue;
      }
      auto v = g_.addValue(o.name, ir::ValueKind::Tensor);
      REQUIRE(v.hasValue());
      (*v)->mutableType().dtype = o.dtype;
      for (int64_t s : o.sizes) (*v)->mutableType().sizes.emplace_back(s);
      if (listOutput)
        list.values.push_back(*v);
      else
        outputs.push_back(Argument::tensor(*v));
    }
    if (listOutput) outputs.push_back(list);
    auto n = g_.addNode("op", target, std::move(inputs), std::move(outputs));
    INFO(n.status().message());
    REQUIRE(n.hasValue());
    node_ = *n;
    return *this;
  }
  /// Checks every strategy; each of `mustSee` ("operands [S(1)] -> results
  /// [P(sum)]") must be among those run.
  void check(CheckStats& total, const std::vector<std::string>& mustSee = {}) {
    CheckStats stats;
    numeric::checkNode(*node_, values_, "hand-built", stats);
    for (const std::string& f : stats.failures) FAIL_CHECK(f);
    for (const std::string& want : mustSee) {
      INFO(node_->target() << " must offer " << want);
      CHECK(std::count(stats.checked.begin(), stats.checked.end(), node_->target() + ": " + want) == 1);
    }
    CHECK(stats.pairs > 0);
    total.nodes += stats.nodes;
    total.pairs += stats.pairs;
    total.skippedUneven += stats.skippedUneven;
    total.setupRetries += stats.setupRetries;
  }

 private:
  ir::Graph g_;
  numeric::TensorMap values_;
  ir::Node* node_ = nullptr;
};

Argument I(int64_t v) { return Argument::integer(v); }
Argument Is(std::vector<int64_t> v) { return Argument::integers(std::move(v)); }
Argument F(double v) { return Argument::floating(v); }
Argument B(bool v) { return Argument::boolean(v); }
Argument Bs(std::vector<int64_t> v) {
  Argument a;
  a.kind = Argument::Kind::Bools;
  a.ints = std::move(v);
  return a;
}

at::Tensor randn(std::vector<int64_t> sizes) { return at::randn(sizes); }
at::Tensor randint(int64_t high, std::vector<int64_t> sizes) { return at::randint(high, sizes, at::kLong); }

void printTotal(const std::string& what, const CheckStats& s) {
  std::cout << "numeric hand-built " << what << ": " << s.summary() << std::endl;
}

}  // namespace

TEST_CASE("hand-built reductions leave pending sums, means, maxima and minima") {
  at::manual_seed(1);
  CheckStats total;
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.sum.dim_IntList", {{"self", x}, {"dim", Is({1})}}, {{"y", {8}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [P(sum)]",
                       "operands [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.sum.default", {{"self", x}}, {{"y", {}}})
        .check(total, {"operands [S(2)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.mean.dim", {{"self", x}, {"dim", Is({-1})}, {"keepdim", B(true)}}, {{"y", {8, 1}}})
        .check(total, {"operands [S(1)] -> results [P(avg)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.mean.default", {{"self", x}}, {{"y", {}}})
        .check(total, {"operands [S(0)] -> results [P(avg)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.amax.default", {{"self", x}, {"dim", Is({1})}}, {{"y", {8}}})
        .check(total, {"operands [S(1)] -> results [P(max)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6, 4}));
    op.node("aten.amin.default", {{"self", x}, {"dim", Is({0, 2})}, {"keepdim", B(true)}}, {{"y", {1, 6, 1}}})
        .check(total, {"operands [S(0)] -> results [P(min)]", "operands [S(2)] -> results [P(min)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.cumsum.default", {{"self", x}, {"dim", I(1)}}, {{"y", {8, 6}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [P(sum)] -> results [P(sum)]"});
  }
  printTotal("reductions", total);
}

TEST_CASE("hand-built data movement: cat, transpose, split, reshape, slice, select") {
  at::manual_seed(2);
  CheckStats total;
  {
    OneOp op;
    auto a = op.in("a", randn({4, 6})), b = op.in("b", randn({4, 2})), c = op.in("c", randn({4, 4}));
    op.node("aten.cat.default", {{"tensors", OneOp::list({a, b, c})}, {"dim", I(1)}}, {{"y", {4, 12}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.transpose.int", {{"self", x}, {"dim0", I(0)}, {"dim1", I(-1)}}, {{"y", {8, 6, 4}}})
        .check(total, {"operands [S(0)] -> results [S(2)]", "operands [S(2)] -> results [S(0)]",
                       "operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6}));
    op.node("aten.t.default", {{"self", x}}, {{"y", {6, 4}}})
        .check(total, {"operands [S(0)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.split.Tensor", {{"self", x}, {"split_size", I(2)}, {"dim", I(1)}},
            {{"y0", {8, 2}}, {"y1", {8, 2}}, {"y2", {8, 2}}}, /*listOutput=*/true)
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)] [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({6, 8}));
    op.node("aten.split_with_sizes.default", {{"self", x}, {"split_sizes", Is({2, 4})}, {"dim", I(0)}},
            {{"y0", {2, 8}}, {"y1", {4, 8}}}, /*listOutput=*/true)
        .check(total, {"operands [S(1)] -> results [S(1)] [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.reshape.default", {{"self", x}, {"shape", Is({24, 8})}}, {{"y", {24, 8}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(0,sf=4)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 48}));
    op.node("aten._unsafe_view.default", {{"self", x}, {"size", Is({4, 6, 8})}}, {{"y", {4, 6, 8}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 1, 8}));
    op.node("aten.squeeze.dim", {{"self", x}, {"dim", I(1)}}, {{"y", {4, 8}}})
        .check(total, {"operands [S(2)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.slice.Tensor", {{"self", x}, {"dim", I(1)}, {"start", I(1)}, {"end", I(5)}},
            {{"y", {8, 4}}})
        .check(total, {"operands [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8}));
    op.node("aten.select.int", {{"self", x}, {"dim", I(1)}, {"index", I(3)}}, {{"y", {4, 8}}})
        .check(total, {"operands [S(2)] -> results [S(1)]"});
  }
  printTotal("data movement", total);
}

TEST_CASE("hand-built pointwise and backward ops") {
  at::manual_seed(3);
  CheckStats total;
  {
    // add(x, 1.0) is not linear: no pending pass-through.
    OneOp op;
    auto x = op.in("x", randn({8, 6}));
    op.node("aten.add.Tensor", {{"self", x}, {"other", F(1.0)}}, {{"y", {8, 6}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), w = op.in("w", randn({6}));
    op.node("aten.mul.Tensor", {{"self", x}, {"other", w}}, {{"y", {8, 6}}})
        .check(total,
               {"operands [S(1)] [S(0)] -> results [S(1)]", "operands [P(sum)] [R] -> results [P(sum)]",
                "operands [R] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), y = op.in("y", randn({1, 6}));
    op.node("aten.maximum.default", {{"self", x}, {"other", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [S(0)] [R] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto c = op.in("c", randn({8, 6}).gt(0)), x = op.in("x", randn({8, 6})), y = op.in("y", randn({6}));
    op.node("aten.where.self", {{"condition", c}, {"self", x}, {"other", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [R] [P(sum)] [P(sum)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), y = op.in("y", at::sigmoid(randn({8, 6})));
    op.node("aten.sigmoid_backward.default", {{"grad_output", g}, {"output", y}}, {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), x = op.in("x", randn({8, 6}));
    op.node("aten.threshold_backward.default", {{"grad_output", g}, {"self", x}, {"threshold", F(0.0)}},
            {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), x = op.in("x", randn({8, 6}));
    op.node("aten.gelu_backward.default", {{"grad_output", g}, {"self", x}}, {{"z", {8, 6}}})
        .check(total, {"operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({4, 8, 6})), y = op.in("y", at::softmax(randn({4, 8, 6}), -1));
    op.node("aten._softmax_backward_data.default",
            {{"grad_output", g},
             {"output", y},
             {"dim", I(-1)},
             {"input_dtype", Argument::scalarType(ir::ScalarType::Float)}},
            {{"z", {4, 8, 6}}})
        .check(total,
               {"operands [S(1)] [S(1)] -> results [S(1)]", "operands [P(sum)] [R] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({8, 6})), y = op.in("y", at::log_softmax(randn({8, 6}), -1));
    op.node("aten._log_softmax_backward_data.default",
            {{"grad_output", g},
             {"output", y},
             {"dim", I(1)},
             {"input_dtype", Argument::scalarType(ir::ScalarType::Float)}},
            {{"z", {8, 6}}})
        .check(total, {"operands [S(0)] [S(0)] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 6})), w = op.in("w", randn({4, 6})), b = op.in("b", randn({4}));
    op.node("aten.linear.default", {{"input", x}, {"weight", w}, {"bias", b}}, {{"y", {8, 4}}})
        .check(total, {"operands [S(1)] [S(1)] [P(sum)] -> results [P(sum)]",
                       "operands [R] [S(0)] [S(0)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({4, 6, 8})), x = op.in("x", randn({4, 6, 8}));
    auto mean = op.in("mean", randn({4, 6, 1})), rstd = op.in("rstd", at::rand({4, 6, 1}) + 0.5);
    auto w = op.in("w", randn({8})), b = op.in("b", randn({8}));
    op.node("aten.native_layer_norm_backward.default",
            {{"grad_out", g},
             {"input", x},
             {"normalized_shape", Is({8})},
             {"mean", mean},
             {"rstd", rstd},
             {"weight", w},
             {"bias", b},
             {"output_mask", Bs({1, 1, 1})}},
            {{"gx", {4, 6, 8}}, {"gw", {8}}, {"gb", {8}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] [S(0)] [R] [R] -> results [S(0)] [P(sum)] [P(sum)]"});
  }
  printTotal("pointwise and backward", total);
}

TEST_CASE("hand-built indexing, pooling and factories") {
  at::manual_seed(4);
  CheckStats total;
  {
    OneOp op;
    auto x = op.in("x", randn({10, 6})), i = op.in("i", randint(10, {4, 2}));
    op.node("aten.index.Tensor",
            {{"self", x}, {"indices", OneOp::list({i}, Argument::Kind::OptionalTensors)}}, {{"y", {4, 2, 6}}})
        .check(total, {"operands [R] [S(0)] -> results [S(0)]", "operands [S(1)] [R] -> results [S(2)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({8, 10})), i = op.in("i", randint(10, {4}));
    op.node("aten.index_select.default", {{"self", x}, {"dim", I(1)}, {"index", i}}, {{"y", {8, 4}}})
        .check(total, {"operands [R] [S(0)] -> results [S(1)]", "operands [S(0)] [R] -> results [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 10})), i = op.in("i", randint(10, {4, 6})), s = op.in("s", randn({4, 6}));
    op.node("aten.scatter_add.default", {{"self", x}, {"dim", I(1)}, {"index", i}, {"src", s}},
            {{"y", {4, 10}}})
        .check(total, {"operands [S(0)] [S(0)] [S(0)] -> results [S(0)]",
                       "operands [P(sum)] [S(1)] [S(1)] -> results [P(sum)]"});
  }
  {
    OneOp op;
    auto g = op.in("g", randn({2, 8, 6})), i = op.in("i", randint(10, {2, 8}));
    op.node("aten.embedding_dense_backward.default",
            {{"grad_output", g},
             {"indices", i},
             {"num_weights", I(10)},
             {"padding_idx", I(-1)},
             {"scale_grad_by_freq", B(false)}},
            {{"y", {10, 6}}})
        .check(total,
               {"operands [S(1)] [S(1)] -> results [P(sum)]", "operands [S(2)] [R] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({6, 8}));
    op.node("aten.sort.default", {{"self", x}, {"dim", I(1)}},
            {{"v", {6, 8}}, {"i", {6, 8}, ir::ScalarType::Long}})
        .check(total, {"operands [S(0)] -> results [S(0)] [S(0)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8, 8}));
    op.node("aten.avg_pool2d.default", {{"self", x}, {"kernel_size", Is({2, 2})}, {"stride", Is({2, 2})}},
            {{"y", {4, 6, 4, 4}}})
        .check(total, {"operands [S(0)] -> results [S(0)]", "operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    auto x = op.in("x", randn({4, 6, 8, 8}));
    op.node("aten._adaptive_avg_pool2d.default", {{"self", x}, {"output_size", Is({1, 1})}},
            {{"y", {4, 6, 1, 1}}})
        .check(total, {"operands [S(1)] -> results [S(1)]"});
  }
  {
    OneOp op;
    op.node("aten.ones.default", {{"size", Is({4, 6})}}, {{"y", {4, 6}}})
        .check(total, {"operands () -> results [S(0)]", "operands () -> results [S(1)]"});
  }
  {
    OneOp op;
    op.node("aten.empty.memory_format", {{"size", Is({4, 6})}}, {{"y", {4, 6}}})
        .check(total, {"operands () -> results [S(1)]"});
  }
  printTotal("indexing, pooling, factories", total);
}
