// Rules of the norm family (lib/sharding/rules/norm.cpp): rule text on real
// and hand-built nodes, and the layouts propagation picks on a 1-D mesh of 2.
//
//   native_layer_norm(x[4, 16, 64] S(1)) -> out S(1), mean S(1), rstd S(1)
//   native_layer_norm_backward(g S(0), x S(0), ...) -> grad_input S(0), grad_weight P(sum)
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

namespace {

// native_layer_norm_backward over x[4, 16, 64] with output_mask `mask`;
// results named gi, gw, gb (None where the mask is false).
TestGraph layerNormBackward(std::vector<bool> mask) {
  TestGraph g;
  ir::Value* grad = g.input("g", {4, 16, 64});
  ir::Value* x = g.input("x", {4, 16, 64});
  ir::Value* mean = g.input("mean", {4, 16, 1});
  ir::Value* rstd = g.input("rstd", {4, 16, 1});
  ir::Value* w = g.input("w", {64});
  ir::Value* b = g.input("b", {64});
  ir::Argument m;
  m.kind = ir::Argument::Kind::Bools;
  for (bool v : mask) m.ints.push_back(v ? 1 : 0);
  g.node("aten.native_layer_norm_backward.default",
         {{"grad_out", T(grad)},
          {"input", T(x)},
          {"normalized_shape", Is({64})},
          {"mean", T(mean)},
          {"rstd", T(rstd)},
          {"weight", T(w)},
          {"bias", T(b)},
          {"output_mask", m}},
         {{mask[0] ? "gi" : "", {4, 16, 64}}, {mask[1] ? "gw" : "", {64}}, {mask[2] ? "gb" : "", {64}}});
  return g;
}

// A batch-norm-like node over x[8, 16, 4, 4] with per-channel operands
// w, b, rm, rv and results out (like x) then `stats` per-channel results.
TestGraph batchNorm(const std::string& target, std::vector<std::pair<std::string, ir::Argument>> extra,
                    int stats, bool runningStats = true) {
  TestGraph g;
  ir::Value* x = g.input("x", {8, 16, 4, 4});
  std::vector<std::pair<std::string, ir::Argument>> args{{"input", T(x)}};
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    if (!runningStats && name[0] == 'r') continue;
    args.emplace_back(name, T(g.input(name, {16})));
  }
  for (auto& e : extra) args.push_back(std::move(e));
  std::vector<Out> outs{{"out", {8, 16, 4, 4}}};
  for (int i = 0; i < stats; ++i) outs.push_back({"s" + std::to_string(i), {16}});
  g.node(target, std::move(args), outs);
  return g;
}

}  // namespace

TEST_CASE("native_layer_norm: leading dims pass through, normalized dims replicated", "[rules][norm]") {
  const ir::ExportedProgram& p = model("gpt_block");
  CHECK(ruleText(nodeWithTarget(p, "aten.native_layer_norm.default")) ==
        "([i, j, k], [k], [k]) -> ([i, j, k], [i, j, 1], [i, j, 1]) {i=4, j=16, k=64 replicated}");
  CHECK(Placements(p, {{"x", "S(0)"}}, 2).node("native_layer_norm") ==
        "[S(0)] [R] [R] -> [S(0)] [S(0)] [S(0)]");

  TestGraph g;
  ir::Value* x = g.input("x", {4, 16, 64});
  ir::Value* b = g.input("b", {16, 64});
  g.node("aten.native_layer_norm.default",
         {{"input", T(x)},
          {"normalized_shape", Is({16, 64})},
          {"weight", ir::Argument::none()},
          {"bias", T(b)},
          {"eps", ir::Argument::floating(1e-5)}},
         {{"out", {4, 16, 64}}, {"mean", {4, 1, 1}}, {"rstd", {4, 1, 1}}});
  CHECK(ruleText(g.last()) ==
        "([i, j, k], [j, k]) -> ([i, j, k], [i, 1, 1], [i, 1, 1]) {i=4, j=16 replicated, k=64 replicated}");
  CHECK(Placements(g.program(), {{"x", "S(1)"}}, 2).node("n0") == "[R] [R] -> [R] [R] [R]");
  CHECK(Placements(g.program(), {{"x", "S(0)"}}, 2).node("n0") == "[S(0)] [R] -> [S(0)] [S(0)] [S(0)]");
}

TEST_CASE("native_layer_norm_backward: parameter gradients sum over leading dims", "[rules][norm]") {
  TestGraph g = layerNormBackward({true, true, true});
  CHECK(ruleText(g.last()) ==
        "([i, j, k], [i, j, k], [i, j, 1], [i, j, 1], [k], [k]) -> ([i, j, k], [k], [k]) "
        "{i=4 reduction(sum), j=16 reduction(sum), k=64 replicated} linear-each(0)");
  CHECK(Placements(g.program(), {{"g", "S(0)"}, {"x", "S(0)"}, {"mean", "S(0)"}, {"rstd", "S(0)"}}, 2)
            .node("n0") == "[S(0)] [S(0)] [S(0)] [S(0)] [R] [R] -> [S(0)] [P(sum)] [P(sum)]");
  CHECK(Placements(g.program(), {{"g", "P(sum)"}}, 2).node("n0") ==
        "[P(sum)] [R] [R] [R] [R] [R] -> [P(sum)] [P(sum)] [P(sum)]");

  TestGraph noInput = layerNormBackward({false, true, true});
  CHECK(ruleText(noInput.last()) ==
        "([i, j, k], [i, j, k], [i, j, 1], [i, j, 1], [k], [k]) -> ([k], [k]) "
        "{i=4 reduction(sum), j=16 reduction(sum), k=64 replicated} linear-each(0)");
  CHECK(Placements(noInput.program(), {{"g", "S(1)"}, {"x", "S(1)"}}, 2).of("gw") == "[P(sum)]");
}

TEST_CASE("batch norm without training: every dim passes through", "[rules][norm]") {
  CHECK(ruleText(nodeWithTarget(model("cnn"), "aten._native_batch_norm_legit_no_training.default")) ==
        "([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [m], [n]) "
        "{i=8, j=16, k=32, l=32, m=0 replicated, n=0 replicated}");
  TestGraph g =
      batchNorm("aten._native_batch_norm_legit_no_training.default",
                {{"momentum", ir::Argument::floating(0.1)}, {"eps", ir::Argument::floating(1e-5)}}, 0);
  CHECK(Placements(g.program(), {{"x", "S(2)"}}, 2).of("out") == "[S(2)]");
  CHECK(Placements(g.program(), {{"weight", "S(0)"}, {"running_var", "S(0)"}}, 2).node("n0") ==
        "[S(1)] [S(0)] [S(0)] [S(0)] [S(0)] -> [S(1)]");
}

TEST_CASE("batch norm in training: batch and spatial dims replicated", "[rules][norm]") {
  const ir::ExportedProgram& p = model("cnn_train");
  CHECK(ruleText(nodeWithTarget(p, "aten._native_batch_norm_legit_functional.default")) ==
        "([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j], [j], [j]) "
        "{i=8 replicated, j=16, k=32 replicated, l=32 replicated}");
  // The batch is gathered before batch statistics.
  CHECK(Placements(p, {{"x", "S(0)"}}, 2).of("getitem") == "[R]");

  auto training = [](bool t) -> std::vector<std::pair<std::string, ir::Argument>> {
    return {
        {"training", B(t)}, {"momentum", ir::Argument::floating(0.1)}, {"eps", ir::Argument::floating(1e-5)}};
  };
  TestGraph f = batchNorm("aten._native_batch_norm_legit_functional.default", training(true), 4);
  CHECK(Placements(f.program(), {{"x", "S(0)"}}, 2).node("n0") ==
        "[R] [R] [R] [R] [R] -> [R] [R] [R] [R] [R]");
  CHECK(Placements(f.program(), {{"x", "S(1)"}}, 2).node("n0") ==
        "[S(1)] [S(0)] [S(0)] [S(0)] [S(0)] -> [S(1)] [S(0)] [S(0)] [S(0)] [S(0)]");
  TestGraph legit = batchNorm("aten._native_batch_norm_legit.default", training(true), 2);
  CHECK(ruleText(legit.last()) ==
        "([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j]) "
        "{i=8 replicated, j=16, k=4 replicated, l=4 replicated}");
  TestGraph noStats = batchNorm("aten._native_batch_norm_legit.no_stats", training(true), 2, false);
  CHECK(ruleText(noStats.last()) ==
        "([i, j, k, l], [j], [j]) -> ([i, j, k, l], [j], [j]) {i=8 replicated, j=16, k=4 replicated, l=4 "
        "replicated}");
  TestGraph native = batchNorm("aten.native_batch_norm.default", training(true), 2);
  CHECK(ruleText(native.last()) == ruleText(legit.last()));
  TestGraph eval = batchNorm("aten.native_batch_norm.default", training(false), 2);
  CHECK(ruleText(eval.last()) ==
        "([i, j, k, l], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j]) {i=8, j=16, k=4, l=4}");
}

TEST_CASE("native_batch_norm_backward: eval-mode gradients sum over batch and space", "[rules][norm]") {
  auto build = [](bool train) {
    TestGraph g;
    ir::Value* grad = g.input("g", {8, 16, 4, 4});
    ir::Value* x = g.input("x", {8, 16, 4, 4});
    std::vector<std::pair<std::string, ir::Argument>> args{{"grad_out", T(grad)}, {"input", T(x)}};
    for (const char* name : {"weight", "running_mean", "running_var", "save_mean", "save_invstd"})
      args.emplace_back(name, T(g.input(name, {16})));
    args.emplace_back("train", B(train));
    args.emplace_back("eps", ir::Argument::floating(1e-5));
    g.node("aten.native_batch_norm_backward.default", std::move(args),
           {{"gi", {8, 16, 4, 4}}, {"gw", {16}}, {"gb", {16}}});
    return g;
  };
  TestGraph train = build(true);
  CHECK(ruleText(train.last()) ==
        "([i, j, k, l], [i, j, k, l], [j], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j]) "
        "{i=8 replicated, j=16, k=4 replicated, l=4 replicated} linear-each(0)");
  CHECK(Placements(train.program(), {{"g", "S(1)"}, {"x", "S(1)"}}, 2).node("n0") ==
        "[S(1)] [S(1)] [S(0)] [S(0)] [S(0)] [S(0)] [S(0)] -> [S(1)] [S(0)] [S(0)]");
  TestGraph eval = build(false);
  CHECK(ruleText(eval.last()) ==
        "([i, j, k, l], [i, j, k, l], [j], [j], [j], [j], [j]) -> ([i, j, k, l], [j], [j]) "
        "{i=8 reduction(sum), j=16, k=4 reduction(sum), l=4 reduction(sum)} linear-each(0)");
  CHECK(Placements(eval.program(), {{"g", "S(0)"}, {"x", "S(0)"}}, 2).node("n0") ==
        "[S(0)] [S(0)] [R] [R] [R] [R] [R] -> [S(0)] [P(sum)] [P(sum)]");
}
