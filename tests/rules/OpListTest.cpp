// Every op torch.export can leave in a graph (lib/sharding/rules/ops.txt,
// from scripts/gen-op-list.py) has a sharding rule, or is evaluated
// symbolically, and the rule builds on a representative node: a node of a
// test model, or a sample node of tests/lit/rules/samples/*.ir (whose
// CHECK lines pin each rule's text).
//
//   ops.txt: aten.acos.default          -> defaultRuleRegistry().find(...) != null
//   sample:  %acos: f32[8, 6] = aten.acos.default(self=%acos_x)   (tests/lit/rules/samples/pointwise.ir)
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "RuleTestUtil.h"
#include "serialize/FromText.h"

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

/// Every program of tests/lit/rules/samples, by file name (the family files
/// next to it also hold nodes without a rule, on purpose).
std::vector<std::pair<std::string, ir::ExportedProgram>> litRulePrograms() {
  std::vector<std::pair<std::string, ir::ExportedProgram>> programs;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(SPMD_SOURCE_DIR) + "/tests/lit/rules/samples")) {
    if (e.path().extension() != ".ir") continue;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto p = serialize::parseProgram(text, e.path().string());
    INFO(p.status().message());
    REQUIRE(p.hasValue());
    programs.emplace_back(e.path().filename().string(), std::move(*p));
  }
  return programs;
}

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
  auto programs = litRulePrograms();
  CHECK(programs.size() >= 10);
  for (const auto& [file, p] : programs)
    for (const auto& n : p.graph.nodes()) record(*n, file);
  std::string unsampled;
  for (const std::string& op : opList())
    if (!sharding::isSymbolicOp(op) && !texts.count(op)) unsampled += " " + op;
  INFO("rules that fail on their node:" << failed);
  CHECK(failed.empty());
  INFO("ops with neither a model node nor a sample:" << unsampled);
  CHECK(unsampled.empty());
}
