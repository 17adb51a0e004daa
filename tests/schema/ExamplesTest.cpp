// The example schemas in schemas/examples/ parse and resolve against the
// models they were written for (testdata/pt2/<model>/model.pt2).
//
//   llama_dp_tp.json + llama -> layers.0.wq.weight [R, S(0)], tokens [S(0), R]
#include "../TestCatch.h"

#include <map>

#include "pt2/Archive.h"
#include "schema/Resolve.h"

using spmd::sharding::Placement;
using spmd::sharding::ShardingSpec;
using namespace spmd::schema;

namespace {

struct Resolved {
  ResolvedPlacements placements;
  /// Input spec by FQN (parameters, buffers) or name (user inputs).
  std::map<std::string, ShardingSpec> byName;
};

/// Resolves schemas/examples/<example> against testdata/pt2/<model>.
Resolved resolveExample(const std::string& example, const std::string& model) {
  auto schema = loadPlacementSchema(std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + example);
  INFO(schema.status().message());
  REQUIRE(schema.hasValue());
  spmd::pt2::ReadOptions options;
  options.loadWeights = false;
  auto archive =
      spmd::pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + model + "/model.pt2", options);
  INFO(archive.status().message());
  REQUIRE(archive.hasValue());
  auto r = resolvePlacements(*schema, archive->program, std::nullopt);
  INFO(r.status().message());
  REQUIRE(r.hasValue());
  Resolved out{*r, {}};
  const auto& inputs = archive->program.signature.inputs;
  REQUIRE(r->inputs.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    out.byName[inputs[i].target.empty() ? inputs[i].value->name() : inputs[i].target] = r->inputs[i];
  return out;
}

ShardingSpec spec(std::vector<Placement> p) { return ShardingSpec{std::move(p)}; }
const Placement kR = Placement::replicate();

}  // namespace

TEST_CASE("example mlp_tp.json: Megatron mlp", "[schema][examples]") {
  Resolved r = resolveExample("mlp_tp.json", "mlp");
  CHECK(r.placements.mesh.str() == "8 (tp)");
  CHECK(r.byName.at("fc1.weight") == spec({Placement::shard(0)}));
  CHECK(r.byName.at("fc1.bias") == spec({Placement::shard(0)}));
  CHECK(r.byName.at("fc2.weight") == spec({Placement::shard(1)}));
  CHECK(r.byName.at("fc2.bias") == spec({kR}));
  CHECK(r.byName.at("x") == spec({kR}));
  REQUIRE(r.placements.outputs.size() == 1);
  CHECK(r.placements.outputs[0] == spec({kR}));
}

TEST_CASE("example gpt_block_tp.json: Megatron attention and MLP", "[schema][examples]") {
  Resolved r = resolveExample("gpt_block_tp.json", "gpt_block");
  for (const char* fqn :
       {"attn.q.weight", "attn.k.weight", "attn.v.weight", "mlp.fc1.weight", "mlp.fc1.bias"})
    CHECK(r.byName.at(fqn) == spec({Placement::shard(0)}));
  CHECK(r.byName.at("attn.o.weight") == spec({Placement::shard(1)}));
  CHECK(r.byName.at("mlp.fc2.weight") == spec({Placement::shard(1)}));
  for (const char* fqn : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "mlp.fc2.bias", "x"})
    CHECK(r.byName.at(fqn) == spec({kR}));
}

TEST_CASE("example llama_tp.json: Megatron llama", "[schema][examples]") {
  Resolved r = resolveExample("llama_tp.json", "llama");
  for (const char* layer : {"layers.0.", "layers.1."}) {
    std::string l = layer;
    for (const char* w : {"wq", "wk", "wv", "w1", "w3"})
      CHECK(r.byName.at(l + w + ".weight") == spec({Placement::shard(0)}));
    for (const char* w : {"wo", "w2"}) CHECK(r.byName.at(l + w + ".weight") == spec({Placement::shard(1)}));
    CHECK(r.byName.at(l + "attn_norm.weight") == spec({kR}));
  }
  for (const char* fqn : {"tok.weight", "out.weight", "norm.weight", "cos", "sin", "tokens"})
    CHECK(r.byName.at(fqn) == spec({kR}));
}

TEST_CASE("example llama_dp_tp.json: batch over dp, Megatron over tp", "[schema][examples]") {
  Resolved r = resolveExample("llama_dp_tp.json", "llama");
  CHECK(r.placements.mesh.str() == "2x4 (dp, tp)");
  CHECK(r.byName.at("layers.1.wk.weight") == spec({kR, Placement::shard(0)}));
  CHECK(r.byName.at("layers.1.w3.weight") == spec({kR, Placement::shard(0)}));
  CHECK(r.byName.at("layers.0.w2.weight") == spec({kR, Placement::shard(1)}));
  CHECK(r.byName.at("tok.weight") == spec({kR, kR}));
  CHECK(r.byName.at("tokens") == spec({Placement::shard(0), kR}));
  for (const auto& out : r.placements.outputs) CHECK(out == spec({kR, kR}));
}

TEST_CASE("every example names the JSON Schema and parses", "[schema][examples]") {
  for (const char* example : {"mlp_tp.json", "gpt_block_tp.json", "llama_tp.json", "llama_dp_tp.json"}) {
    INFO(example);
    auto s = loadPlacementSchema(std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + example);
    INFO(s.status().message());
    CHECK(s.hasValue());
  }
}
