// Rules of the indexing family (lib/sharding/rules/indexing.cpp): rule text
// on real and hand-built nodes, and the layouts propagation picks on a
// 1-D mesh of 2.
//
//   embedding(w[256, 64], tokens[2, 16] S(0)) -> S(0);  w S(1) -> S(2)
//   index_put(z, [t S(0)], v S(0), accumulate) -> P(sum)
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

namespace {

constexpr auto kLong = ir::ScalarType::Long;

// embedding(w[256, 64], t[2, 16]) -> out[2, 16, 64].
TestGraph embeddingGraph() {
  TestGraph g;
  ir::Value* w = g.input("w", {256, 64});
  ir::Value* t = g.input("t", {2, 16}, kLong);
  g.node("aten.embedding.default", {{"weight", T(w)}, {"indices", T(t)}}, {{"out", {2, 16, 64}}});
  return g;
}

}  // namespace

TEST_CASE("embedding: index dims and D pass through, the vocabulary is a summed factor",
          "[rules][indexing]") {
  CHECK(ruleText(nodeWithTarget(model("llama"), "aten.embedding.default")) ==
        "([l, k], [i, j]) -> ([i, j, k]) {i=2, j=16, k=64, l=256 reduction(sum)} linear-each(0)");
  TestGraph g = embeddingGraph();
  CHECK(Placements(g.program(), {{"t", "S(0)"}}, 2).node("n0") == "[R] [S(0)] -> [S(0)]");
  CHECK(Placements(g.program(), {{"t", "S(1)"}}, 2).of("out") == "[S(1)]");
  CHECK(Placements(g.program(), {{"w", "S(1)"}}, 2).node("n0") == "[S(1)] [R] -> [S(2)]");
  // A vocabulary shard is looked up where it lies (vocab-parallel): the
  // rows a rank does not hold give zeros, a pending sum.
  CHECK(Placements(g.program(), {{"w", "S(0)"}}, 2).node("n0") == "[S(0)] [R] -> [P(sum)]");
  // A pending weight stays pending: a lookup is linear in the table.
  CHECK(Placements(g.program(), {{"w", "P(sum)"}}, 2).node("n0") == "[P(sum)] [R] -> [P(sum)]");
}

TEST_CASE("embedding: real models propagate a sharded batch", "[rules][indexing]") {
  CHECK(Placements(model("llama"), {{"tokens", "S(0)"}}, 2).of("embedding") == "[S(0)]");
  CHECK(Placements(model("llama_train"), {{"tokens", "S(0)"}}, 2).of("embedding") == "[S(0)]");
}

TEST_CASE("embedding_dense_backward: index dims are sums, V replicated", "[rules][indexing]") {
  TestGraph g;
  ir::Value* grad = g.input("grad", {2, 16, 64});
  ir::Value* t = g.input("t", {2, 16}, kLong);
  g.node("aten.embedding_dense_backward.default",
         {{"grad_output", T(grad)},
          {"indices", T(t)},
          {"num_weights", I(256)},
          {"padding_idx", I(-1)},
          {"scale_grad_by_freq", B(false)}},
         {{"gw", {256, 64}}});
  CHECK(ruleText(g.last()) ==
        "([i, j, k], [i, j]) -> ([l, k]) {i=2 reduction(sum), j=16 reduction(sum), k=64, l=256 replicated} "
        "linear-each(0)");
  CHECK(Placements(g.program(), {{"grad", "S(0)"}, {"t", "S(0)"}}, 2).node("n0") ==
        "[S(0)] [S(0)] -> [P(sum)]");
  CHECK(Placements(g.program(), {{"grad", "S(2)"}}, 2).node("n0") == "[S(2)] [R] -> [S(1)]");

  TestGraph byFreq;
  grad = byFreq.input("grad", {2, 16, 64});
  t = byFreq.input("t", {2, 16}, kLong);
  byFreq.node("aten.embedding_dense_backward.default",
              {{"grad_output", T(grad)},
               {"indices", T(t)},
               {"num_weights", I(256)},
               {"padding_idx", I(-1)},
               {"scale_grad_by_freq", B(true)}},
              {{"gw", {256, 64}}});
  CHECK(ruleText(byFreq.last()) ==
        "([i, j, k], [i, j]) -> ([l, k]) {i=2 replicated, j=16 replicated, k=64, l=256 replicated} "
        "linear-each(0)");
}

TEST_CASE(
    "gather: the gathered dim of self is replicated, or summed with one index per row (loss parallel); index "
    "rows pass through",
    "[rules][indexing]") {
  CHECK(ruleText(nodeWithTarget(model("cnn_train"), "aten.gather.default")) ==
        "([i, j], [i, 1]) -> ([i, 1]) {i=8, j=10 reduction(sum)} linear-each(0)");
  CHECK(ruleText(nodeWithTarget(model("llama_train"), "aten.gather.default")) ==
        "([i, j], [i, 1]) -> ([i, 1]) {i=32, j=256 reduction(sum)} linear-each(0)");
  // Gathering rows (dim 0): the index's rows may be split, self stays whole.
  TestGraph g;
  ir::Value* x = g.input("x", {10, 4});
  ir::Value* idx = g.input("idx", {8, 4}, kLong);
  g.node("aten.gather.default", {{"self", T(x)}, {"dim", I(0)}, {"index", T(idx)}}, {{"out", {8, 4}}});
  CHECK(ruleText(g.last()) == "([k, j], [i, j]) -> ([i, j]) {i=8, j=4, k=10 replicated} linear-each(0)");
  CHECK(Placements(g.program(), {{"idx", "S(0)"}}, 2).node("n0") == "[R] [S(0)] -> [S(0)]");
  CHECK(Placements(g.program(), {{"x", "S(1)"}, {"idx", "S(1)"}}, 2).node("n0") == "[S(1)] [S(1)] -> [S(1)]");
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).node("n0") == "[R] [R] -> [R]");
}

TEST_CASE("scatter: the scattered dim is replicated; scatter_add contributions are sums",
          "[rules][indexing]") {
  CHECK(ruleText(nodeWithTarget(model("cnn_train"), "aten.scatter.value")) ==
        "([i, j], [i, 1]) -> ([i, j]) {i=8, j=10}");  // one write per row: loss parallel
  CHECK(ruleText(nodeWithTarget(model("moe"), "aten.scatter.src")) ==
        "([i, j], [i, k], [i, k]) -> ([i, j]) {i=32, j=4 replicated, k=2 replicated}");
  CHECK(Placements(model("moe"), {{"x", "S(0)"}}, 2).of("scatter") == "[S(0)]");

  TestGraph g;
  ir::Value* z = g.input("z", {10, 4});
  ir::Value* idx = g.input("idx", {8, 4}, kLong);
  ir::Value* src = g.input("src", {8, 4});
  g.node("aten.scatter_add.default", {{"self", T(z)}, {"dim", I(0)}, {"index", T(idx)}, {"src", T(src)}},
         {{"out", {10, 4}}});
  CHECK(ruleText(g.last()) ==
        "([i, k], [j, k], [j, k]) -> ([i, k]) {i=10 replicated, j=8 reduction(sum), k=4} linear-joint(0, 2)");
  // Each rank adds its rows into a zero copy of self: pending sum.
  CHECK(Placements(g.program(), {{"idx", "S(0)"}, {"src", "S(0)"}}, 2).node("n0") ==
        "[P(sum)] [S(0)] [S(0)] -> [P(sum)]");
  CHECK(Placements(g.program(), {{"z", "P(sum)"}, {"src", "P(sum)"}}, 2).node("n0") ==
        "[P(sum)] [R] [P(sum)] -> [P(sum)]");
  CHECK(Placements(g.program(), {{"z", "S(1)"}, {"idx", "S(1)"}, {"src", "S(1)"}}, 2).of("out") == "[S(1)]");

  // scatter.src with rows split would write different rows on each rank.
  TestGraph s;
  z = s.input("z", {10, 4});
  idx = s.input("idx", {8, 4}, kLong);
  src = s.input("src", {8, 4});
  s.node("aten.scatter.src", {{"self", T(z)}, {"dim", I(0)}, {"index", T(idx)}, {"src", T(src)}},
         {{"out", {10, 4}}});
  CHECK(ruleText(s.last()) == "([i, k], [j, k], [j, k]) -> ([i, k]) {i=10 replicated, j=8 replicated, k=4}");
  CHECK(Placements(s.program(), {{"idx", "S(0)"}, {"src", "S(0)"}}, 2).node("n0") == "[R] [R] [R] -> [R]");
}

TEST_CASE("index.Tensor: indexed dims replicated, index dims pass through", "[rules][indexing]") {
  // x[:, i] with i[4, 3]: result [8, 4, 3, 6].
  TestGraph g;
  ir::Value* x = g.input("x", {8, 10, 6});
  ir::Value* i = g.input("i", {4, 3}, kLong);
  g.node("aten.index.Tensor", {{"self", T(x)}, {"indices", optionalTensors({nullptr, i})}},
         {{"out", {8, 4, 3, 6}}});
  CHECK(ruleText(g.last()) ==
        "([i, m, j], [k, l]) -> ([i, k, l, j]) {i=8, j=6, k=4, l=3, m=10 replicated} linear-each(0)");
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).of("out") == "[S(0)]");
  CHECK(Placements(g.program(), {{"i", "S(0)"}}, 2).node("n0") == "[R] [S(0)] -> [S(1)]");
  CHECK(Placements(g.program(), {{"x", "S(2)"}}, 2).of("out") == "[S(3)]");
  CHECK(Placements(g.program(), {{"x", "S(1)"}}, 2).node("n0") == "[R] [R] -> [R]");

  // Non-adjacent indices x[a, :, c] put the broadcast dims first: [5, 10].
  TestGraph n;
  x = n.input("x", {8, 10, 6});
  ir::Value* a = n.input("a", {5}, kLong);
  ir::Value* c = n.input("c", {1}, kLong);
  n.node("aten.index.Tensor", {{"self", T(x)}, {"indices", optionalTensors({a, nullptr, c})}},
         {{"out", {5, 10}}});
  CHECK(ruleText(n.last()) ==
        "([k, i, l], [j], [1]) -> ([j, i]) {i=10, j=5, k=8 replicated, l=6 replicated} linear-each(0)");

  // A boolean mask gives a data-dependent shape: everything replicated.
  TestGraph m;
  x = m.input("x", {8, 6});
  ir::Value* mask = m.input("mask", {8}, ir::ScalarType::Bool);
  m.node("aten.index.Tensor", {{"self", T(x)}, {"indices", optionalTensors({mask})}}, {{"out", {3, 6}}});
  CHECK(ruleText(m.last()) ==
        "([i, j], [k]) -> ([l, m]) {i=8 replicated, j=6 replicated, k=8 replicated, l=3 replicated, "
        "m=6 replicated}");
}

TEST_CASE("index_put: accumulated index shards are pending sums", "[rules][indexing]") {
  const ir::ExportedProgram& p = model("llama_train");
  CHECK(ruleText(nodeWithTarget(p, "aten.index_put.default")) ==
        "([i, j], [k, l], [k, l, j]) -> ([i, j]) {i=256 replicated, j=64, k=2 reduction(sum), "
        "l=16 reduction(sum)} linear-joint(0, 2)");
  // The embedding gradient of a batch-sharded train step is pending.
  CHECK(Placements(p, {{"tokens", "S(0)"}}, 2).of("index_put") == "[P(sum)]");

  auto build = [](bool accumulate) {
    TestGraph g;
    ir::Value* z = g.input("z", {256, 64});
    ir::Value* t = g.input("t", {2, 16}, kLong);
    ir::Value* v = g.input("v", {2, 16, 64});
    g.node(
        "aten.index_put.default",
        {{"self", T(z)}, {"indices", optionalTensors({t})}, {"values", T(v)}, {"accumulate", B(accumulate)}},
        {{"out", {256, 64}}});
    return g;
  };
  TestGraph acc = build(true);
  CHECK(Placements(acc.program(), {{"t", "S(0)"}, {"v", "S(0)"}}, 2).node("n0") ==
        "[P(sum)] [S(0)] [S(0)] -> [P(sum)]");
  CHECK(Placements(acc.program(), {{"v", "S(2)"}}, 2).node("n0") == "[S(1)] [R] [S(2)] -> [S(1)]");
  CHECK(Placements(acc.program(), {{"v", "P(sum)"}}, 2).node("n0") == "[P(sum)] [R] [P(sum)] -> [P(sum)]");
  TestGraph put = build(false);
  CHECK(ruleText(put.last()) ==
        "([i, j], [k, l], [k, l, j]) -> ([i, j]) {i=256 replicated, j=64, k=2 replicated, l=16 replicated}");
  CHECK(Placements(put.program(), {{"t", "S(0)"}, {"v", "S(0)"}}, 2).node("n0") == "[R] [R] [R] -> [R]");
}

TEST_CASE("index_select: the selected dim is replicated in self", "[rules][indexing]") {
  TestGraph g;
  ir::Value* x = g.input("x", {8, 10});
  ir::Value* idx = g.input("idx", {4}, kLong);
  g.node("aten.index_select.default", {{"self", T(x)}, {"dim", I(1)}, {"index", T(idx)}}, {{"out", {8, 4}}});
  CHECK(ruleText(g.last()) == "([i, k], [j]) -> ([i, j]) {i=8, j=4, k=10 replicated} linear-each(0)");
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).of("out") == "[S(0)]");
  CHECK(Placements(g.program(), {{"idx", "S(0)"}}, 2).node("n0") == "[R] [S(0)] -> [S(1)]");
}

TEST_CASE("topk and sort: the dim is replicated, others pass through", "[rules][indexing]") {
  CHECK(ruleText(nodeWithTarget(model("moe"), "aten.topk.default")) ==
        "([i, j]) -> ([i, k], [i, k]) {i=32, j=4 replicated, k=2 replicated}");
  TestGraph g;
  ir::Value* x = g.input("x", {8, 10});
  g.node("aten.sort.default", {{"self", T(x)}, {"dim", I(0)}}, {{"v", {8, 10}}, {"ix", {8, 10}, kLong}});
  CHECK(ruleText(g.last()) == "([i, j]) -> ([i, j], [i, j]) {i=8 replicated, j=10}");
  CHECK(Placements(g.program(), {{"x", "S(1)"}}, 2).node("n0") == "[S(1)] -> [S(1)] [S(1)]");
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).node("n0") == "[R] -> [R] [R]");
}

TEST_CASE("indexing rules refuse inconsistent shapes with a message", "[rules][indexing]") {
  TestGraph g;
  ir::Value* w = g.input("w", {4, 256, 64});
  ir::Value* t = g.input("t", {2, 16}, kLong);
  g.node("aten.embedding.default", {{"weight", T(w)}, {"indices", T(t)}}, {{"out", {2, 16, 64}}});
  CHECK(ruleText(g.last()) ==
        "error: embedding rule: expected weight [V, D], indices [...] and a result [..., D]");
}
