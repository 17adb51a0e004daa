// Argument checks of the view (split, slice, cat), matmul and indexing
// rules: a malformed node built by hand (as a fuzzed archive that got past
// the IR verifier would be) is refused with a one-line error naming the node,
// never an out-of-range read or an abort.
//
// Only the nodes the IR verifier refuses first are here (dims out of range,
// operands of the wrong rank, an int with no value): as IR text they never
// reach a rule, so lit cannot test the rule's own check. The malformed nodes
// that do reach their rule, and their well-formed neighbours, are lit tests:
// tests/lit/rules/argument-checks.test.
//
//   split(x[4, 6], 3, dim=2) -> "node %n0 (aten.split.Tensor): split rule: dim 2 is out of range ..."
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

namespace {

// The error propagation gives for `g` (replicated inputs, a 1-D mesh of 2),
// or "ok" when it succeeds.
std::string propagationError(const TestGraph& g) {
  auto mesh = sharding::Mesh::create({2});
  REQUIRE(mesh.hasValue());
  std::vector<sharding::ShardingSpec> specs(g.program().graph.inputs().size(),
                                            sharding::ShardingSpec::replicated(1));
  auto r = sharding::propagate(g.program(), specs, *mesh, sharding::defaultRuleRegistry());
  return r ? "ok" : r.status().message();
}

// An int argument with no value (a damaged archive's "as_int").
ir::Argument emptyInt() {
  ir::Argument a;
  a.kind = ir::Argument::Kind::Int;
  return a;
}

// `target`(args) over x[4, 6] (operand "self") with results `outs`.
TestGraph overX(const std::string& target, std::vector<std::pair<std::string, ir::Argument>> args,
                const std::vector<Out>& outs) {
  TestGraph g;
  ir::Value* x = g.input("x", {4, 6});
  args.insert(args.begin(), {"self", T(x)});
  g.node(target, std::move(args), outs);
  return g;
}

// A node with two operands of `a` and `b` and one result of `out`.
TestGraph binary(const std::string& target, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                 const std::vector<int64_t>& out) {
  TestGraph g;
  ir::Value* x = g.input("a", a);
  ir::Value* y = g.input("b", b);
  g.node(target, {{"self", T(x)}, {"mat2", T(y)}}, {{"out", out}});
  return g;
}

}  // namespace

TEST_CASE("split and chunk refuse a dim out of range and missing tensors", "[rules][view][checks]") {
  TestGraph g =
      overX("aten.split.Tensor", {{"split_size", I(3)}, {"dim", I(2)}}, {{"a", {4, 3}}, {"b", {4, 3}}});
  CHECK(ruleText(g.last()) ==
        "error: split rule: dim 2 is out of range for a rank-2 tensor (expected -2 to 1)");
  CHECK(propagationError(g) ==
        "node %n0 (aten.split.Tensor): split rule: dim 2 is out of range for a rank-2 tensor (expected -2 to "
        "1)");

  g = overX("aten.chunk.default", {{"chunks", I(2)}, {"dim", I(-3)}}, {{"a", {2, 6}}, {"b", {2, 6}}});
  CHECK(
      propagationError(g) ==
      "node %n0 (aten.chunk.default): split rule: dim -3 is out of range for a rank-2 tensor (expected -2 to "
      "1)");

  TestGraph noTensor;
  noTensor.node("aten.split.Tensor", {{"self", I(4)}, {"split_size", I(2)}}, {{"a", {2}}, {"b", {2}}});
  CHECK(propagationError(noTensor) ==
        "node %n0 (aten.split.Tensor): split rule: expected 1 tensor operand(s) and a tensor result, got 0 "
        "and 2");
}

TEST_CASE("slice, slice_scatter and cat refuse bad dims and missing values", "[rules][view][checks]") {
  TestGraph g = overX("aten.slice.Tensor", {{"dim", I(5)}, {"start", I(0)}, {"end", I(2)}}, {{"y", {4, 2}}});
  CHECK(propagationError(g) ==
        "node %n0 (aten.slice.Tensor): slice rule: dim 5 is out of range for a rank-2 tensor (expected -2 to "
        "1)");

  g = overX("aten.slice.Tensor", {{"dim", I(1)}, {"start", emptyInt()}, {"end", I(2)}}, {{"y", {4, 2}}});
  CHECK(propagationError(g) ==
        "node %n0 (aten.slice.Tensor): slice rule: start has 0 values, expected one int");

  TestGraph scatter;
  ir::Value* x = scatter.input("x", {4, 6});
  ir::Value* src = scatter.input("src", {4, 2});
  scatter.node("aten.slice_scatter.default", {{"self", T(x)}, {"src", T(src)}, {"dim", I(2)}},
               {{"y", {4, 6}}});
  CHECK(
      propagationError(scatter) ==
      "node %n0 (aten.slice_scatter.default): slice_scatter rule: dim 2 is out of range for a rank-2 tensor "
      "(expected -2 to 1)");

  TestGraph cat;
  ir::Value* a = cat.input("a", {4, 6});
  ir::Value* b = cat.input("b", {4, 6});
  cat.node("aten.cat.default", {{"tensors", ir::Argument::tensors({a, b})}, {"dim", I(-3)}}, {{"y", {8, 6}}});
  CHECK(
      propagationError(cat) ==
      "node %n0 (aten.cat.default): cat rule: dim -3 is out of range for a rank-2 tensor (expected -2 to 1)");
}

TEST_CASE("mm, bmm, addmm, baddbmm and linear refuse operands of the wrong rank", "[rules][matmul][checks]") {
  CHECK(propagationError(binary("aten.mm.default", {4}, {4, 8}, {8})) ==
        "node %n0 (aten.mm.default): mm rule: expected self[M, K], mat2[K, N] -> [M, N]; got ranks (1, 2) -> "
        "(1)");
  CHECK(
      propagationError(binary("aten.bmm.default", {2, 4, 8}, {8, 16}, {2, 4, 16})) ==
      "node %n0 (aten.bmm.default): bmm rule: expected self[B, M, K], mat2[B, K, N] -> [B, M, N]; got ranks "
      "(3, 2) -> (3)");

  TestGraph addmm;
  ir::Value* bias = addmm.input("bias", {1, 4, 16});
  ir::Value* m1 = addmm.input("m1", {4, 8});
  ir::Value* m2 = addmm.input("m2", {8, 16});
  addmm.node("aten.addmm.default", {{"self", T(bias)}, {"mat1", T(m1)}, {"mat2", T(m2)}}, {{"y", {4, 16}}});
  CHECK(propagationError(addmm) ==
        "node %n0 (aten.addmm.default): addmm rule: expected self (broadcast to [M, N]), mat1[M, K], mat2[K, "
        "N] "
        "-> [M, N]; got ranks (3, 2, 2) -> (2)");

  // A rank-4 result: the bias's dims were looked up in a table of three.
  TestGraph baddbmm;
  ir::Value* self = baddbmm.input("self", {2, 4, 16});
  ir::Value* b1 = baddbmm.input("b1", {2, 4, 8});
  ir::Value* b2 = baddbmm.input("b2", {2, 8, 16});
  baddbmm.node("aten.baddbmm.default", {{"self", T(self)}, {"batch1", T(b1)}, {"batch2", T(b2)}},
               {{"y", {1, 2, 4, 16}}});
  CHECK(propagationError(baddbmm) ==
        "node %n0 (aten.baddbmm.default): baddbmm rule: expected self (broadcast to [B, M, N]), batch1[B, M, "
        "K], "
        "batch2[B, K, N] -> [B, M, N]; got ranks (3, 3, 3) -> (4)");

  TestGraph linear;
  ir::Value* in = linear.input("in", {});
  ir::Value* w = linear.input("w", {16, 8});
  linear.node("aten.linear.default", {{"input", T(in)}, {"weight", T(w)}}, {{"y", {}}});
  CHECK(propagationError(linear) ==
        "node %n0 (aten.linear.default): linear rule: expected input[..., K], weight[N, K], bias[N] "
        "(optional) -> "
        "[..., N]; got a rank-0 input");
}

TEST_CASE("embedding refuses a weight that is not [V, D]", "[rules][indexing][checks]") {
  TestGraph g;
  ir::Value* w = g.input("w", {4, 256, 64});
  ir::Value* t = g.input("t", {2, 16}, ir::ScalarType::Long);
  g.node("aten.embedding.default", {{"weight", T(w)}, {"indices", T(t)}}, {{"out", {2, 16, 64}}});
  CHECK(ruleText(g.last()) ==
        "error: embedding rule: expected weight [V, D], indices [...] and a result [..., D]");
}
