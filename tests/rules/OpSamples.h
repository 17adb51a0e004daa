// Representative nodes of the ops in lib/sharding/rules/ops.txt that no
// test model holds: one hand-built node per op, with shapes and arguments as
// an export would give them.
//
//   for (const OpSample& s : opSamples()) { TestGraph g; s.build(g, s.target); ruleText(g.last()); }
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "RuleTestUtil.h"

namespace spmd::testing {

/// Builds the node of `target` as the last node of a TestGraph.
struct OpSample {
  std::string target;
  std::function<void(TestGraph&, const std::string&)> build;
};

/// Every sample, at most one per target.
const std::vector<OpSample>& opSamples();

/// Samples of the pointwise, reduction, view, movement and matmul families.
void addOpSamples(std::vector<OpSample>& s);
/// Samples of the conv, norm, indexing, attention, factory and meta families.
void addNnOpSamples(std::vector<OpSample>& s);
/// Samples of ops beyond Core ATen (OpInfo's math, complex views, histc).
void addMoreOpSamples(std::vector<OpSample>& s);

/// Builders for the sample tables.
namespace samples {

using ir::Argument;
using Args = std::vector<std::pair<std::string, Argument>>;
using Build = std::function<void(TestGraph&, const std::string&)>;
constexpr ir::ScalarType f32 = ir::ScalarType::Float;
constexpr ir::ScalarType i64 = ir::ScalarType::Long;
constexpr ir::ScalarType b8 = ir::ScalarType::Bool;

inline Argument F(double v) { return Argument::floating(v); }
inline Argument S(const std::string& s) {
  Argument a;
  a.kind = Argument::Kind::String;
  a.strings = {s};
  return a;
}
inline Argument L(std::vector<ir::Value*> vs) { return Argument::tensors(std::move(vs)); }
inline Argument Bs(std::vector<int64_t> v) {
  Argument a;
  a.kind = Argument::Kind::Bools;
  a.ints = std::move(v);
  return a;
}
inline Argument dtype(ir::ScalarType t) { return Argument::scalarType(t); }

// One node reading the given tensors; `outs` as TestGraph::node.
inline Build op(std::function<Args(TestGraph&)> args, std::vector<Out> outs) {
  return [=](TestGraph& g, const std::string& target) { g.node(target, args(g), outs); };
}
// self f32[8, 6] and `more` arguments -> one result.
inline Build onX(Args more, Out out = {"y", {8, 6}}) {
  return op(
      [more](TestGraph& g) {
        Args a{{"self", T(g.input("x", {8, 6}))}};
        a.insert(a.end(), more.begin(), more.end());
        return a;
      },
      {out});
}
// self f32[8, 6], `name` f32[6] (broadcast) -> [8, 6].
inline Build binary(const char* name = "other", ir::ScalarType out = f32) {
  return op(
      [name](TestGraph& g) {
        return Args{{"self", T(g.input("x", {8, 6}))}, {name, T(g.input("w", {6}))}};
      },
      {{"y", {8, 6}, out}});
}
// grad_output, self f32[8, 6] and `more` -> [8, 6].
inline Build backward(Args more = {}) {
  return op(
      [more](TestGraph& g) {
        Args a{{"grad_output", T(g.input("g", {8, 6}))}, {"self", T(g.input("x", {8, 6}))}};
        a.insert(a.end(), more.begin(), more.end());
        return a;
      },
      {{"y", {8, 6}}});
}
// An image f32[2, 4, 8, 8] and `more` -> `outs`.
inline Build image(Args more, std::vector<Out> outs, std::vector<int64_t> shape = {2, 4, 8, 8}) {
  return op(
      [more, shape](TestGraph& g) {
        Args a{{"self", T(g.input("x", shape))}};
        a.insert(a.end(), more.begin(), more.end());
        return a;
      },
      outs);
}

}  // namespace samples

}  // namespace spmd::testing
