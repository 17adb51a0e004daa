// Argument checks of the view (split, slice, cat) and matmul rules: a
// malformed node built by hand (as a fuzzed archive that got past the IR
// verifier would be) is refused with a one-line error naming the node, never
// an out-of-range read or an abort.
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

// A string argument.
ir::Argument str(const std::string& v) {
  ir::Argument a;
  a.kind = ir::Argument::Kind::String;
  a.strings = {v};
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

TEST_CASE("split and chunk refuse a dim out of range, missing tensors and ranks that differ",
          "[rules][view][checks]") {
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

  g = overX("aten.split_with_sizes.default", {{"split_sizes", Is({3, 3})}, {"dim", I(1)}},
            {{"a", {4, 3}}, {"b", {12}}});
  CHECK(propagationError(g) ==
        "node %n0 (aten.split_with_sizes.default): split rule: result 1 has rank 1, the input 2");

  TestGraph noTensor;
  noTensor.node("aten.split.Tensor", {{"self", I(4)}, {"split_size", I(2)}}, {{"a", {2}}, {"b", {2}}});
  CHECK(propagationError(noTensor) ==
        "node %n0 (aten.split.Tensor): split rule: expected 1 tensor operand(s) and a tensor result, got 0 "
        "and 2");

  // A well-formed split still gets its rule.
  g = overX("aten.split.Tensor", {{"split_size", I(3)}, {"dim", I(-1)}}, {{"a", {4, 3}}, {"b", {4, 3}}});
  CHECK(ruleText(g.last()) == "([i, j k]) -> ([i, k], [i, k]) {i=4, j=2 replicated, k=3} linear-each(0)");
  CHECK(propagationError(g) == "ok");
}

TEST_CASE("slice, slice_scatter and cat refuse bad dims and bounds", "[rules][view][checks]") {
  TestGraph g = overX("aten.slice.Tensor", {{"dim", I(5)}, {"start", I(0)}, {"end", I(2)}}, {{"y", {4, 2}}});
  CHECK(propagationError(g) ==
        "node %n0 (aten.slice.Tensor): slice rule: dim 5 is out of range for a rank-2 tensor (expected -2 to "
        "1)");

  g = overX("aten.slice.Tensor", {{"dim", I(1)}, {"start", emptyInt()}, {"end", I(2)}}, {{"y", {4, 2}}});
  CHECK(propagationError(g) ==
        "node %n0 (aten.slice.Tensor): slice rule: start has 0 values, expected one int");

  g = overX("aten.slice.Tensor", {{"dim", I(1)}, {"start", I(0)}, {"end", I(6)}, {"step", I(0)}},
            {{"y", {4, 6}}});
  CHECK(propagationError(g) == "node %n0 (aten.slice.Tensor): slice rule: step 0 is not positive");

  g = overX("aten.slice.Tensor", {{"dim", I(1)}, {"start", I(0)}, {"end", I(2)}}, {{"y", {8}}});
  CHECK(propagationError(g) == "node %n0 (aten.slice.Tensor): slice rule: result 0 has rank 1, the input 2");

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
  CHECK(propagationError(binary("aten.mm.default", {4, 8}, {8, 16}, {4, 16})) == "ok");

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
  TestGraph linear1;
  ir::Value* in1 = linear1.input("in", {4, 8});
  ir::Value* w1 = linear1.input("w", {8});
  linear1.node("aten.linear.default", {{"input", T(in1)}, {"weight", T(w1)}}, {{"y", {4, 16}}});
  CHECK(propagationError(linear1) ==
        "node %n0 (aten.linear.default): linear rule: expected input[..., K], weight[N, K], bias[N] "
        "(optional) -> "
        "[..., N]; got ranks (2, 1) -> (2)");
}

TEST_CASE("einsum and cdist refuse equations and results that do not fit", "[rules][matmul][checks]") {
  TestGraph g;
  ir::Value* q = g.input("q", {2, 4});
  ir::Value* k = g.input("k", {4, 8});
  g.node("aten.einsum.default",
         {{"equation", str("ij,jk,kl->il")}, {"tensors", ir::Argument::tensors({q, k})}}, {{"y", {2, 8}}});
  CHECK(
      propagationError(g) ==
      "node %n0 (aten.einsum.default): einsum rule: the equation \"ij,jk,kl->il\" has 3 operand terms for 2 "
      "tensors");

  TestGraph cdist;
  ir::Value* x1 = cdist.input("x1", {4, 8});
  ir::Value* x2 = cdist.input("x2", {6, 8});
  cdist.node("aten._cdist_forward.default", {{"x1", T(x1)}, {"x2", T(x2)}}, {{"y", {24}}});
  CHECK(
      propagationError(cdist) ==
      "node %n0 (aten._cdist_forward.default): cdist rule: expected x1[..., P, M], x2[..., R, M] -> [..., P, "
      "R]; got ranks (2, 2) -> (1)");
}
