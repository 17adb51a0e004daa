// Every op of every test model has a rule that builds on its nodes, and
// propagation of fully replicated inputs succeeds.
//
//   for each node of testdata/pt2/<m>/model.pt2 (not _operator.*, sym_size):
//     defaultRuleRegistry().find(target) != null and the rule builds
#include "RuleTestUtil.h"

using namespace spmd;
using namespace spmd::testing;

TEST_CASE("every op of the test models has a working rule", "[rules][coverage]") {
  for (const char* m :
       {"cnn", "cnn_train", "gpt_block", "gpt_block_fused", "gpt_block_sdpa", "llama", "llama_deep",
        "llama_deep_train", "llama_dynamic", "llama_dynamic_b3s24", "llama_train", "llama_train_t214", "mlp",
        "mlp_dynamic_batch", "mlp_train", "mlp_training_ir", "moe"}) {
    const ir::ExportedProgram& p = model(m);
    for (const auto& n : p.graph.nodes()) {
      if (sharding::isSymbolicOp(n->target())) continue;
      INFO(m << ": %" << n->name() << " " << n->target());
      std::string text = ruleText(*n);
      CHECK(text.rfind("no rule", 0) != 0);
      CHECK(text.rfind("error", 0) != 0);
    }
    INFO(m);
    Placements replicated(p, {}, 2);
    CHECK(replicated.result().warnings.empty());
  }
}
