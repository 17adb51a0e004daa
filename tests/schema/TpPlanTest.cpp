// Hugging Face tensor-parallel plans: which placement each style gives each
// kind of module, how plan globs find modules under a prefix, and the
// errors for unknown styles.
//
//   "colwise" on nn.Linear [out, in] -> weight S(0), bias S(0)
//   "colwise" on GPT-2's Conv1D [in, out] -> weight S(1)
//   "layers.*.mlp" governs model.layers.0.mlp (plans are relative to the base model)
#include "../TestCatch.h"

#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "schema/TpPlan.h"

using namespace spmd::schema;
using spmd::sharding::Placement;
namespace ir = spmd::ir;

namespace {
const char* kLinear = "torch.nn.modules.linear.Linear";
const char* kConv1D = "transformers.pytorch_utils.Conv1D";
const char* kEmbedding = "torch.nn.modules.sparse.Embedding";
std::string at(const std::string& style, const char* type, const char* leaf, int64_t rank) {
  return tpPlacement(style, type, leaf, rank).str();
}
}  // namespace

TEST_CASE("tp styles place nn.Linear, Conv1D and Embedding parameters as transformers does", "[schema][tp]") {
  CHECK(at("colwise", kLinear, "weight", 2) == "S(0)");
  CHECK(at("colwise", kLinear, "bias", 1) == "S(0)");
  CHECK(at("rowwise", kLinear, "weight", 2) == "S(1)");
  CHECK(at("rowwise", kLinear, "bias", 1) == "R");
  CHECK(at("colwise_rep", "", "weight", 2) == "S(0)");  // unknown type: nn.Linear
  CHECK(at("colwise", kConv1D, "weight", 2) == "S(1)");
  CHECK(at("rowwise", kConv1D, "weight", 2) == "S(0)");
  CHECK(at("colwise", kEmbedding, "weight", 2) == "S(1)");
  CHECK(at("rowwise", kEmbedding, "weight", 2) == "S(0)");
  CHECK(at("embedding_rowwise", kEmbedding, "weight", 2) == "S(0)");
  CHECK(at("packed_colwise", kLinear, "weight", 2) == "S(0,sf=2)");
  CHECK(at("packed_colwise:3", kConv1D, "weight", 2) == "S(1,sf=3)");
  CHECK(at("packed_colwise:3", kConv1D, "bias", 1) == "S(0,sf=3)");
  CHECK(at("grouped_gemm", "", "gate_up_proj", 3) == "S(0)");
  for (const char* style : {"replicate", "sequence_parallel", "gather", "local", "ep_router"})
    CHECK(at(style, kLinear, "weight", 2) == "R");
}

TEST_CASE("transformers 5's unit, embedding_colwise, local_params and mla_kv_a_proj styles", "[schema][tp]") {
  // Beam's and GraniteSWA's "layers.*.self_attn": "local_params", DeepSeek's kv_a_proj_with_mqa, MiniCPM5's
  // unit_colwise k/v projections, Qwen4's embedding_colwise n-gram table: refused as unknown before.
  auto s = parsePlacementSchema(R"js({"version": 1, "tp_plan": {"layers.*.self_attn": "local_params",
      "layers.*.self_attn.kv_a_proj_with_mqa": "mla_kv_a_proj", "layers.*.self_attn.k_proj": "unit_colwise",
      "layers.*.self_attn.o_proj": "unit_rowwise", "ple": "embedding_colwise"}})js",
                                "s.json");
  REQUIRE(s.hasValue());
  CHECK(at("unit_colwise", kLinear, "weight", 2) == "S(0)");
  CHECK(at("unit_colwise", kLinear, "bias", 1) == "S(0)");
  CHECK(at("unit_rowwise", kLinear, "weight", 2) == "S(1)");
  CHECK(at("embedding_colwise", kEmbedding, "weight", 2) == "S(1)");
  CHECK(at("local_params", "", "sinks", 1) == "R");
  CHECK(at("mla_kv_a_proj", kLinear, "weight", 2) == "R");
}

TEST_CASE("plan globs govern modules under any prefix; the longest matching glob wins", "[schema][tp]") {
  TpPlan plan = {{"layers.*.mlp.up_proj", "colwise"}, {"layers.*", "replicate"}, {"lm_head", "colwise_rep"}};
  CHECK(tpPlanEntry(plan, "model.layers.3.mlp.up_proj")->second == "colwise");
  CHECK(tpPlanEntry(plan, "layers.3.mlp.up_proj")->second == "colwise");
  CHECK(tpPlanEntry(plan, "model.layers.3.mlp.down_proj")->second == "replicate");
  CHECK(tpPlanEntry(plan, "lm_head")->second == "colwise_rep");
  CHECK_FALSE(tpPlanEntry(plan, "model.norm").has_value());
  CHECK_FALSE(tpPlanEntry(plan, "xlm_head").has_value());
}

TEST_CASE("a plan with an unknown style is refused at parse time, naming it", "[schema][tp][bad]") {
  auto s = parsePlacementSchema(R"js({"version": 1, "tp_plan": {"layers.*.q_proj": "colwize"}})js", "s.json");
  REQUIRE_FALSE(s.hasValue());
  CHECK(s.status().message().find("s.json: /tp_plan/layers.*.q_proj: unknown tensor-parallel style 'colwize' "
                                  "(styles: colwise,") == 0);
  CHECK_FALSE(
      parsePlacementSchema(R"js({"version": 1, "tp_plan": {"a": "colwise:3"}})js", "s.json").hasValue());
  CHECK(parsePlacementSchema(R"js({"version": 1, "tp_plan": {"a": "packed_rowwise:4"}})js", "s.json")
            .hasValue());
}

TEST_CASE("module types come from the nodes' nn_module_stack", "[schema][tp]") {
  ir::ExportedProgram p;
  auto v = p.graph.addValue("y", ir::ValueKind::Tensor);
  REQUIRE(v.hasValue());
  auto n = p.graph.addNode("y", "aten.mm.default", {}, {ir::Argument::tensor(*v)});
  REQUIRE(n.hasValue());
  (*n)->mutableMetadata().nnModuleStack =
      "L__self__,,__main__.W;L__self__m_h_0_attn,m.h.0.attn,transformers.models.gpt2.modeling_gpt2."
      "GPT2Attention;"
      "L__self__m_h_0_attn_c_attn,m.h.0.attn.c_attn,transformers.pytorch_utils.Conv1D";
  auto types = moduleTypes(p);
  CHECK(types["m.h.0.attn.c_attn"] == "transformers.pytorch_utils.Conv1D");
  CHECK(types["m.h.0.attn"] == "transformers.models.gpt2.modeling_gpt2.GPT2Attention");
}

TEST_CASE("without nn_module_stack (joint train steps) a weight's readers tell Conv1D and Embedding",
          "[schema][tp]") {
  ir::ExportedProgram p;
  auto tensor = [&](const std::string& name) {
    auto v = p.graph.addValue(name, ir::ValueKind::Tensor);
    REQUIRE(v.hasValue());
    return *v;
  };
  auto param = [&](const std::string& name, const std::string& fqn) {
    ir::Value* v = tensor(name);
    p.graph.addInput(v);
    ir::InputSpec in;
    in.kind = ir::InputKind::Parameter;
    in.value = v;
    in.target = fqn;
    p.signature.inputs.push_back(in);
    return v;
  };
  ir::Value* conv1d = param("p_c_attn", "h.0.attn.c_attn.weight");
  ir::Value* linear = param("p_q_proj", "layers.0.q_proj.weight");
  ir::Value* table = param("p_wte", "wte.weight");
  ir::Value* x = tensor("x");
  p.graph.addInput(x);
  auto node = [&](const std::string& name, const std::string& target, std::vector<ir::NamedArgument> args) {
    REQUIRE(p.graph.addNode(name, target, std::move(args), {ir::Argument::tensor(tensor(name))}).hasValue());
  };
  node("mm", "aten.mm.default",
       {{"self", ir::Argument::tensor(x), false}, {"mat2", ir::Argument::tensor(conv1d), false}});
  node("t", "aten.permute.default", {{"self", ir::Argument::tensor(linear), false}});
  node("e", "aten.embedding.default",
       {{"weight", ir::Argument::tensor(table), false}, {"indices", ir::Argument::tensor(x), false}});
  auto types = moduleTypes(p);
  CHECK(types["h.0.attn.c_attn"] == "Conv1D");
  CHECK(types["wte"] == "Embedding");
  CHECK_FALSE(types.count("layers.0.q_proj"));  // read transposed: nn.Linear, the default
  CHECK(tpPlacement("colwise", types["h.0.attn.c_attn"], "weight", 2).str() == "S(1)");
}

TEST_CASE("a schema's op rules are parsed when it is read; a bad one names its target", "[schema][rules]") {
  auto s = parsePlacementSchema(
      R"js({"version": 1, "rules": {"mylib.rope.default": "([b, s, d], [s, d]) -> ([b, s, d])"}})js",
      "s.json");
  REQUIRE(s.hasValue());
  REQUIRE(s->opRules.size() == 1);
  CHECK(s->opRules[0].first == "mylib.rope.default");
  auto bad = parsePlacementSchema(
      R"js({"version": 1, "rules": {"mylib.rope.default": "([b, s) -> ([b])"}})js", "s.json");
  REQUIRE_FALSE(bad.hasValue());
  CHECK(bad.status().message() ==
        "s.json: /rules/mylib.rope.default: rule '([b, s) -> ([b])': at 6: expected ',' or ']'");
}
