// Every op torch.export can leave in a graph (lib/sharding/rules/ops.txt,
// from scripts/gen-op-list.py) has a sharding rule, or is evaluated
// symbolically, and the rule builds on a representative node: a node of a
// test model, or one of the hand-built samples below.
//
//   ops.txt: aten.acos.default          -> defaultRuleRegistry().find(...) != null
//   sample:  acos(x f32[8, 6]) -> [8, 6] -> "([i, j]) -> ([i, j]) {i=8, j=6}"
#include <fstream>
#include <iostream>
#include <map>

#include "OpSamples.h"
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

namespace {

std::vector<std::string> opList() {
  std::ifstream in(SPMD_OPS_LIST);
  REQUIRE(in.good());
  std::vector<std::string> ops;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') ops.push_back(line);
  return ops;
}

const char* const kModels[] = {"cnn",
                               "cnn_train",
                               "gpt_block",
                               "gpt_block_fused",
                               "gpt_block_sdpa",
                               "llama",
                               "llama_deep_train",
                               "llama_dynamic",
                               "llama_train",
                               "mlp_train",
                               "mlp_training_ir",
                               "moe"};

}  // namespace

TEST_CASE("every op of ops.txt has a rule", "[rules][coverage]") {
  std::vector<std::string> ops = opList();
  CHECK(ops.size() > 250);
  std::string missing;
  int covered = 0;
  for (const std::string& op : ops) {
    if (sharding::isSymbolicOp(op) || sharding::defaultRuleRegistry().find(op)) {
      ++covered;
      continue;
    }
    missing += " " + op;
  }
  INFO("ops without a rule:" << missing);
  CHECK(missing.empty());
  std::cout << "ops.txt: " << ops.size() << " ops, " << covered << " with a rule or symbolic" << std::endl;
}

TEST_CASE("every rule of ops.txt builds on a representative node", "[rules][coverage]") {
  std::map<std::string, std::string> texts;  // op -> rule text of its first sample
  std::string failed;
  auto record = [&](const ir::Node& n, const std::string& where) {
    std::string text = ruleText(n);
    if (text.rfind("no rule", 0) == 0 || text.rfind("error", 0) == 0)
      failed += "\n  " + n.target() + " (" + where + "): " + text;
    texts.try_emplace(n.target(), text);
  };
  for (const char* m : kModels)
    for (const auto& n : model(m).graph.nodes())
      if (!sharding::isSymbolicOp(n->target())) record(*n, m);
  std::map<std::string, int> perTarget;
  for (const OpSample& s : opSamples()) {
    INFO("one sample per target: " << s.target);
    CHECK(++perTarget[s.target] == 1);
    TestGraph g;
    s.build(g, s.target);
    INFO(s.target);
    REQUIRE(g.last().target() == s.target);
    record(g.last(), "sample");
  }
  std::string unsampled;
  for (const std::string& op : opList())
    if (!sharding::isSymbolicOp(op) && !texts.count(op)) unsampled += " " + op;
  INFO("rules that fail on their node:" << failed);
  CHECK(failed.empty());
  INFO("ops with neither a model node nor a sample:" << unsampled);
  CHECK(unsampled.empty());
}

TEST_CASE("sample rules say what must stay whole", "[rules][coverage]") {
  auto textOf = [](const std::string& target) {
    for (const OpSample& s : opSamples()) {
      if (s.target != target) continue;
      TestGraph g;
      s.build(g, s.target);
      return ruleText(g.last());
    }
    return std::string("no sample");
  };
  // Dropout while training draws a mask a shard could not reproduce.
  CHECK(textOf("aten.native_dropout.default") ==
        "([i, j]) -> ([k, l], [m, n]) {i=8 replicated, j=6 replicated, k=8 replicated, l=6 replicated, "
        "m=8 replicated, n=6 replicated}");
  // A cast to integers rounds: not linear; to floats it is.
  CHECK(textOf("aten._to_copy.default") == "([i, j]) -> ([i, j]) {i=8, j=6}");
  CHECK(textOf("aten.to.dtype") == "([i, j]) -> ([i, j]) {i=8, j=6} linear-each(0)");
  CHECK(textOf("aten.sort.default") == "([i, j]) -> ([i, j], [i, j]) {i=8, j=6 replicated}");
  // Each rank repeats its block of rows: a strided shard of the result.
  CHECK(textOf("aten.repeat.default") == "([j, k]) -> ([i j, k]) {i=2 replicated, j=8, k=6} linear-each(0)");
  // reduction "sum": output and total weight pending over sharded samples.
  // A histogram with a fixed range: the shards' counts add up.
  CHECK(textOf("aten.histc.default") ==
        "([i, j]) -> ([k]) {i=8 reduction(sum), j=6 reduction(sum), k=4 replicated}");
  // The (real, imaginary) pair stays whole; the other dims pass through.
  CHECK(textOf("aten.view_as_complex.default") ==
        "([i, j, k]) -> ([i, j]) {i=8, j=6, k=2 replicated} linear-each(0)");
  CHECK(textOf("aten.nll_loss_forward.default") ==
        "([j, i], [j]) -> ([], []) {i=5 replicated, j=8 reduction(sum)}");
}
