// Rules of the conv family (lib/sharding/rules/conv.cpp): rule text on real
// and hand-built nodes, and the layouts propagation picks on a 1-D mesh of 2.
//
//   cnn with x S(0): conv, batch norm, relu and pooling keep the batch sharded
//   convolution(x S(1), w S(1), b) -> P(sum), with b made pending
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

namespace {

// convolution(x[8, 4, 16, 16], w[6, 4 / groups, k, k], b[6]?) -> [8, 6, 16, 16]
// with stride 1 and padding (k - 1) / 2.
TestGraph conv(int64_t k, int64_t groups = 1, bool bias = true) {
  TestGraph g;
  ir::Value* x = g.input("x", {8, 4, 16, 16});
  ir::Value* w = g.input("w", {6, 4 / groups, k, k});
  ir::Argument b = bias ? T(g.input("b", {6})) : ir::Argument::none();
  g.node("aten.convolution.default",
         {{"input", T(x)},
          {"weight", T(w)},
          {"bias", b},
          {"stride", Is({1, 1})},
          {"padding", Is({(k - 1) / 2, (k - 1) / 2})},
          {"dilation", Is({1, 1})},
          {"transposed", B(false)},
          {"output_padding", Is({0, 0})},
          {"groups", I(groups)}},
         {{"out", {8, 6, 16, 16}}});
  return g;
}

// convolution_backward(g[8, 6, 16, 16], x[8, 4, 16, 16], w[6, 4, 3, 3])
// -> gi, gw, gb with output_mask `mask`.
TestGraph convBackward(std::vector<bool> mask) {
  TestGraph g;
  ir::Value* grad = g.input("g", {8, 6, 16, 16});
  ir::Value* x = g.input("x", {8, 4, 16, 16});
  ir::Value* w = g.input("w", {6, 4, 3, 3});
  ir::Argument m;
  m.kind = ir::Argument::Kind::Bools;
  for (bool v : mask) m.ints.push_back(v ? 1 : 0);
  g.node("aten.convolution_backward.default",
         {{"grad_output", T(grad)},
          {"input", T(x)},
          {"weight", T(w)},
          {"bias_sizes", Is({6})},
          {"stride", Is({1, 1})},
          {"padding", Is({1, 1})},
          {"dilation", Is({1, 1})},
          {"transposed", B(false)},
          {"output_padding", Is({0, 0})},
          {"groups", I(1)},
          {"output_mask", m}},
         {{mask[0] ? "gi" : "", {8, 4, 16, 16}},
          {mask[1] ? "gw" : "", {6, 4, 3, 3}},
          {mask[2] ? "gb" : "", {6}}});
  return g;
}

}  // namespace

TEST_CASE("convolution: batch and output channels pass through, input channels reduce", "[rules][conv]") {
  CHECK(
      ruleText(nodeWithTarget(model("cnn"), "aten.convolution.default")) ==
      "([i, k, l, m], [j, k, n, o], [j]) -> ([i, j, p, q]) {i=8, j=16, k=3 reduction(sum), l=32 replicated, "
      "m=32 replicated, n=3 replicated, o=3 replicated, p=32 replicated, q=32 replicated} linear-joint(0, "
      "2)");
  TestGraph g = conv(3);
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).node("n0") == "[S(0)] [R] [R] -> [S(0)]");
  CHECK(Placements(g.program(), {{"w", "S(0)"}, {"b", "S(0)"}}, 2).node("n0") ==
        "[R] [S(0)] [S(0)] -> [S(1)]");
  CHECK(Placements(g.program(), {{"x", "S(1)"}, {"w", "S(1)"}}, 2).node("n0") ==
        "[S(1)] [S(1)] [P(sum)] -> [P(sum)]");
  CHECK(Placements(g.program(), {{"x", "P(sum)"}}, 2).node("n0") == "[P(sum)] [R] [P(sum)] -> [P(sum)]");
  // Spatial shards need halos: gathered first.
  CHECK(Placements(g.program(), {{"x", "S(2)"}}, 2).node("n0") == "[R] [R] [R] -> [R]");
}

TEST_CASE("convolution: no bias, 1x1 kernels, groups", "[rules][conv]") {
  TestGraph noBias = conv(3, 1, false);
  CHECK(
      ruleText(noBias.last()) ==
      "([i, k, l, m], [j, k, n, o]) -> ([i, j, p, q]) {i=8, j=6, k=4 reduction(sum), l=16 replicated, "
      "m=16 replicated, n=3 replicated, o=3 replicated, p=16 replicated, q=16 replicated} linear-each(0, 1)");
  CHECK(Placements(noBias.program(), {{"w", "P(sum)"}}, 2).node("n0") == "[R] [P(sum)] -> [P(sum)]");
  TestGraph pointwise = conv(1);
  CHECK(ruleText(pointwise.last()) ==
        "([i, k, l, m], [j, k, 1, 1], [j]) -> ([i, j, l, m]) {i=8, j=6, k=4 reduction(sum), l=16, m=16} "
        "linear-joint(0, 2)");
  CHECK(Placements(pointwise.program(), {{"x", "S(2)"}}, 2).of("out") == "[S(2)]");
  TestGraph grouped = conv(3, 2);
  CHECK(ruleText(grouped.last()) ==
        "([i, j, k, l], [m, n, o, p], [q]) -> ([i, r, s, t]) {i=8, j=4 replicated, k=16 replicated, "
        "l=16 replicated, m=6 replicated, n=2 replicated, o=3 replicated, p=3 replicated, q=6 replicated, "
        "r=6 replicated, s=16 replicated, t=16 replicated} linear-joint(0, 2)");
}

TEST_CASE("convolution: transposed weights swap channel dims", "[rules][conv]") {
  TestGraph g;
  ir::Value* x = g.input("x", {8, 4, 8, 8});
  ir::Value* w = g.input("w", {4, 6, 2, 2});
  g.node("aten.convolution.default",
         {{"input", T(x)},
          {"weight", T(w)},
          {"bias", ir::Argument::none()},
          {"stride", Is({2, 2})},
          {"padding", Is({0, 0})},
          {"dilation", Is({1, 1})},
          {"transposed", B(true)},
          {"output_padding", Is({0, 0})},
          {"groups", I(1)}},
         {{"out", {8, 6, 16, 16}}});
  CHECK(
      ruleText(g.last()) ==
      "([i, k, l, m], [k, j, n, o]) -> ([i, j, p, q]) {i=8, j=6, k=4 reduction(sum), l=8 replicated, "
      "m=8 replicated, n=2 replicated, o=2 replicated, p=16 replicated, q=16 replicated} linear-each(0, 1)");
  CHECK(Placements(g.program(), {{"w", "S(1)"}}, 2).node("n0") == "[R] [S(1)] -> [S(1)]");
}

TEST_CASE("convolution_backward: batch shards leave weight gradients pending", "[rules][conv]") {
  const ir::ExportedProgram& p = model("cnn_train");
  CHECK(ruleText(nodeWithTarget(p, "aten.convolution_backward.default")) ==
        "([i, j, l, o], [i, k, m, p], [j, k, n, q]) -> ([i, k, m, p], [j, k, n, q], [j]) "
        "{i=8 reduction(sum), j=32 reduction(sum), k=16, l=16 replicated, m=16 replicated, n=3 replicated, "
        "o=16 replicated, p=16 replicated, q=3 replicated} linear-each(0)");
  // conv1's backward has no grad_input (output_mask [false, true, true]).
  CHECK(ruleText(nodeWithTarget(p, "aten.convolution_backward.default", 1)) ==
        "([i, j, l, o], [i, k, m, p], [j, k, n, q]) -> ([j, k, n, q], [j]) "
        "{i=8 reduction(sum), j=16 reduction(sum), k=3, l=32 replicated, m=32 replicated, n=3 replicated, "
        "o=32 replicated, p=32 replicated, q=3 replicated} linear-each(0)");

  TestGraph g = convBackward({true, true, true});
  CHECK(Placements(g.program(), {{"g", "S(0)"}, {"x", "S(0)"}}, 2).node("n0") ==
        "[S(0)] [S(0)] [R] -> [S(0)] [P(sum)] [P(sum)]");
  CHECK(Placements(g.program(), {{"g", "S(1)"}, {"w", "S(0)"}}, 2).node("n0") ==
        "[S(1)] [R] [S(0)] -> [P(sum)] [S(0)] [S(0)]");
  CHECK(Placements(g.program(), {{"x", "S(1)"}, {"w", "S(1)"}}, 2).node("n0") ==
        "[R] [S(1)] [S(1)] -> [S(1)] [S(1)] [R]");
  CHECK(Placements(g.program(), {{"g", "P(sum)"}}, 2).node("n0") ==
        "[P(sum)] [R] [R] -> [P(sum)] [P(sum)] [P(sum)]");
  TestGraph noInput = convBackward({false, true, false});
  CHECK(Placements(noInput.program(), {{"g", "S(0)"}, {"x", "S(0)"}}, 2).node("n0") ==
        "[S(0)] [S(0)] [R] -> [P(sum)]");
}

TEST_CASE("pooling: batch and channels pass through, spatial dims replicated", "[rules][conv]") {
  const ir::ExportedProgram& cnn = model("cnn");
  CHECK(ruleText(nodeWithTarget(cnn, "aten.max_pool2d_with_indices.default")) ==
        "([i, j, k, l]) -> ([i, j, m, n], [i, j, m, n]) {i=8, j=16, k=32 replicated, l=32 replicated, "
        "m=16 replicated, n=16 replicated}");
  CHECK(ruleText(nodeWithTarget(model("cnn_train"), "aten.max_pool2d_with_indices_backward.default")) ==
        "([i, j, k, l], [i, j, m, n], [i, j, k, l]) -> ([i, j, m, n]) {i=8, j=32, k=8 replicated, l=8 "
        "replicated, "
        "m=16 replicated, n=16 replicated} linear-each(0)");

  TestGraph g;
  ir::Value* x = g.input("x", {8, 6, 16, 16});
  g.node("aten.avg_pool2d.default", {{"self", T(x)}, {"kernel_size", Is({2, 2})}}, {{"avg", {8, 6, 8, 8}}});
  ir::Value* avg = g.program().graph.findValue("avg");
  g.node("aten._adaptive_avg_pool2d.default", {{"self", T(avg)}, {"output_size", Is({1, 1})}},
         {{"ada", {8, 6, 1, 1}}});
  CHECK(ruleText(*g.program().graph.nodes()[0]) ==
        "([i, j, k, l]) -> ([i, j, m, n]) {i=8, j=6, k=16 replicated, l=16 replicated, m=8 replicated, "
        "n=8 replicated} linear-each(0)");
  CHECK(ruleText(g.last()) ==
        "([i, j, k, l]) -> ([i, j, 1, 1]) {i=8, j=6, k=8 replicated, l=8 replicated} linear-each(0)");
  Placements channels(g.program(), {{"x", "S(1)"}}, 2);
  CHECK(channels.of("avg") == "[S(1)]");
  CHECK(channels.of("ada") == "[S(1)]");
  CHECK(Placements(g.program(), {{"x", "P(sum)"}}, 2).of("ada") == "[P(sum)]");
}

TEST_CASE("cnn: a sharded batch stays sharded through conv, batch norm, relu and pooling", "[rules][conv]") {
  Placements p(model("cnn"), {{"x", "S(0)"}}, 2);
  for (const char* v :
       {"convolution", "getitem", "relu", "getitem_3", "convolution_1", "getitem_5", "getitem_8"}) {
    INFO(v);
    CHECK(p.of(v) == "[S(0)]");
  }
  // Output channels: conv1's weight and bias sharded on dim 0.
  Placements tp(model("cnn"), {{"conv1.weight", "S(0)"}, {"conv1.bias", "S(0)"}}, 2);
  CHECK(tp.of("convolution") == "[S(1)]");
  CHECK(tp.of("getitem") == "[S(1)]");
  CHECK(tp.of("getitem_3") == "[S(1)]");
}
