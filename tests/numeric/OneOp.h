// OneOp: one hand-built node over real input values (LossParallelTest), checked numerically
// on every mesh of numeric::allMeshes() (see NumericUtil.h).
//
//   OneOp op;
//   auto x = op.in("x", at::randn({8, 6}));
//   op.node("aten.sum.dim_IntList", {{"self", x}, {"dim", Is({1})}}, {{"y", {8}}})
//       .check(total, {"operands [S(1)] -> results [P(sum)]"});   // must be among the mesh-2 cases
#pragma once

#include <ATen/ATen.h>

#include "../TestCatch.h"

#include <algorithm>
#include <iostream>
#include <limits>

#include "NumericUtil.h"
#include "runtime/TypeMap.h"

namespace spmd::numeric::oneop {

using ir::Argument;
using numeric::CheckStats;

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
  /// Checks every strategy on every mesh; each of `mustSee` ("operands
  /// [S(1)] -> results [P(sum)]", or "... on 2x2" for another mesh) must be
  /// among those run.
  void check(CheckStats& total, const std::vector<std::string>& mustSee = {}) {
    CheckStats stats;
    for (const auto& mesh : numeric::allMeshes())
      numeric::checkNode(*node_, values_, "hand-built", stats, mesh);
    for (const std::string& f : stats.failures) FAIL_CHECK(f);
    for (const std::string& want : mustSee) {
      INFO(node_->target() << " must offer " << want);
      CHECK(std::count(stats.checked.begin(), stats.checked.end(), node_->target() + ": " + want) == 1);
    }
    CHECK(stats.pairs > 0);
    total.add(stats);
  }

 private:
  ir::Graph g_;
  numeric::TensorMap values_;
  ir::Node* node_ = nullptr;
};

inline Argument I(int64_t v) { return Argument::integer(v); }
inline Argument Is(std::vector<int64_t> v) { return Argument::integers(std::move(v)); }
inline Argument F(double v) { return Argument::floating(v); }
inline Argument B(bool v) { return Argument::boolean(v); }
inline Argument Fs(std::vector<double> v) {
  Argument a;
  a.kind = Argument::Kind::Floats;
  a.floats = std::move(v);
  return a;
}
inline Argument Str(const std::string& v) {
  Argument a;
  a.kind = Argument::Kind::String;
  a.strings = {v};
  return a;
}
inline Argument Bs(std::vector<int64_t> v) {
  Argument a;
  a.kind = Argument::Kind::Bools;
  a.ints = std::move(v);
  return a;
}

inline at::Tensor randn(std::vector<int64_t> sizes) { return at::randn(sizes); }
inline at::Tensor randint(int64_t high, std::vector<int64_t> sizes) {
  return at::randint(high, sizes, at::kLong);
}

/// Checks op(self = x, more...) -> `outs` (see OneOp::check for `mustSee`);
/// `self` names x's argument.
inline void onX(CheckStats& total, const std::string& target, const at::Tensor& x,
                std::vector<std::pair<std::string, Argument>> more, const std::vector<Out>& outs,
                const std::vector<std::string>& mustSee, const char* self = "self") {
  OneOp op;
  std::vector<std::pair<std::string, Argument>> args{{self, op.in("x", x)}};
  args.insert(args.end(), more.begin(), more.end());
  op.node(target, args, outs).check(total, mustSee);
}

inline void printTotal(const std::string& what, const CheckStats& s) {
  std::cout << "numeric hand-built " << what << ": " << s.summary() << std::endl;
}

}  // namespace spmd::numeric::oneop
