// Mutated archives never crash the compiler: integers in a real archive's
// model JSON and weights config are rewritten deterministically (sizes to
// -1, 0 or 2^62, dims out of range, list entries dropped); the reader must
// return a graph or an error, and compile() must return a program or an
// error for every graph the verifier accepted. Before the verifier, 58 of
// 2,400 such archives aborted or segfaulted compile. Also the defences
// behind the verifier: rules and the cost model on malformed input.
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include "../TestCatch.h"

#include "../pt2/ArchiveFixtures.h"
#include "ir/Verify.h"
#include "passes/Pipeline.h"
#include "program/WeightSource.h"
#include "schema/PlacementSchema.h"
#include "sharding/CostModel.h"
#include "sharding/RuleRegistry.h"

using namespace spmd;
using nlohmann::json;
using spmd::testing::rewriteArchive;
using spmd::testing::runCommand;
using spmd::testing::TempDir;

namespace {

std::string model(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}

// One place a mutation can hit: an integer, or a list whose entries can be dropped.
struct Site {
  bool config = false;  // in the weights config rather than the model JSON
  json::json_pointer at;
  bool list = false;
};

void collect(const json& j, const json::json_pointer& at, bool config, std::vector<Site>& out) {
  if (j.is_number_integer()) out.push_back({config, at, false});
  if (j.is_array()) {
    if (!j.empty()) out.push_back({config, at, true});
    for (size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, config, out);
  }
  if (j.is_object())
    for (const auto& [key, value] : j.items()) collect(value, at / key, config, out);
}

struct Member {
  std::string name;
  json doc;
};

// Applies the next mutation `rng` picks to `docs`; returns its description.
std::string mutate(std::vector<Member>& docs, const std::vector<Site>& sites, std::mt19937_64& rng) {
  json& values = docs[0].doc["graph_module"]["graph"]["tensor_values"];
  if (rng() % 5 == 0 && !values.empty()) {
    // Drop one dim of a value, from its sizes and strides alike.
    auto it = std::next(values.begin(), static_cast<std::ptrdiff_t>(rng() % values.size()));
    json& sizes = (*it)["sizes"];
    if (!sizes.empty()) {
      size_t d = rng() % sizes.size();
      sizes.erase(d);
      if ((*it)["strides"].size() > d) (*it)["strides"].erase(d);
      return "tensor_values/" + it.key() + ": dim " + std::to_string(d) + " dropped";
    }
  }
  const Site& s = sites[rng() % sites.size()];
  json& doc = docs[s.config ? 1 : 0].doc;
  json& target = doc[s.at];
  std::string what = (s.config ? "config" : "model") + s.at.to_string();
  if (s.list) {
    size_t i = rng() % target.size();
    target.erase(i);
    return what + ": entry " + std::to_string(i) + " dropped";
  }
  static const int64_t kValues[] = {-1, 0, int64_t{1} << 62, 7, -9, 3, int64_t{1} << 31, -(int64_t{1} << 62)};
  int64_t v = kValues[rng() % std::size(kValues)];
  target = v;
  return what + " = " + std::to_string(v);
}

// Mutates `count` times; every read and compile must return (error or value).
void fuzz(const std::string& m, const std::string& schemaArg, std::vector<int64_t> mesh, int count,
          uint64_t seed) {
  const std::string modelJson = "model/models/model.json";
  const std::string config = "model/data/weights/model_weights_config.json";
  std::vector<Member> base(2);
  TempDir dir;
  rewriteArchive(model(m), dir.file("unused.pt2"), [&](const std::string& name, std::string bytes) {
    if (name == modelJson) base[0] = {name, json::parse(bytes)};
    if (name == config) base[1] = {name, json::parse(bytes)};
    return std::optional<std::string>();
  });
  REQUIRE(base[0].doc.is_object());
  REQUIRE(base[1].doc.is_object());
  std::vector<Site> sites;
  collect(base[0].doc["graph_module"]["graph"], json::json_pointer("/graph_module/graph"), false, sites);
  collect(base[1].doc, json::json_pointer(), true, sites);
  REQUIRE(sites.size() > 50);
  auto schema = schema::loadSchemaOrPreset(schemaArg);
  REQUIRE(schema.hasValue());
  std::mt19937_64 rng(seed);
  int refused = 0, compiled = 0;
  for (int i = 0; i < count; ++i) {
    std::vector<Member> docs = base;
    std::string what = mutate(docs, sites, rng);
    INFO(m << " mutation " << i << ": " << what);
    std::string path = dir.file("m.pt2");
    rewriteArchive(model(m), path, [&](const std::string& name, std::string bytes) {
      for (const Member& d : docs)
        if (name == d.name) return std::optional<std::string>(d.doc.dump());
      return std::optional<std::string>(bytes);
    });
    auto archive = pt2::readArchive(path);
    if (!archive) {
      ++refused;
      CHECK(archive.status().message().find('\n') == std::string::npos);
      continue;
    }
    passes::CompileOptions opts;
    opts.mesh = mesh;
    auto r = passes::compile(*archive, *schema, opts);
    compiled += r.hasValue();
  }
  // Neither vacuous: some mutations are refused, some still compile.
  CHECK(refused > count / 10);
  CHECK(compiled > count / 10);
}

}  // namespace

TEST_CASE("mutated mlp archives are read or refused, and compile or fail, without crashing") {
  fuzz("mlp", std::string(SPMD_SOURCE_DIR) + "/schemas/examples/mlp_tp.json", {2}, 200, 1);
  fuzz("mlp", "dp", {2}, 100, 2);
}

TEST_CASE("mutated llama archives are read or refused, and compile or fail, without crashing") {
  fuzz("llama", std::string(SPMD_SOURCE_DIR) + "/schemas/examples/llama_tp.json", {2}, 300, 3);
}

TEST_CASE("mutated train-step archives are read or refused, and compile or fail, without crashing") {
  fuzz("llama_train", "fsdp", {2}, 150, 4);
  fuzz("cnn_train", "dp", {2}, 100, 5);
}

namespace {

// A node built by hand, bypassing the reader's verifier.
struct HandGraph {
  ir::Graph g;
  ir::Value* tensor(const std::string& name, std::vector<int64_t> sizes) {
    ir::Value* v = g.addValue(name, ir::ValueKind::Tensor).value();
    v->mutableType().dtype = ir::ScalarType::Float;
    for (int64_t s : sizes) v->mutableType().sizes.emplace_back(s);
    return v;
  }
  const ir::Node& node(const std::string& target, std::vector<ir::NamedArgument> args,
                       std::vector<int64_t> out) {
    ir::Value* r = tensor("r" + std::to_string(g.nodes().size()), std::move(out));
    return *g.addNode(r->name(), target, std::move(args), {ir::Argument::tensor(r)}).value();
  }
};

Expected<sharding::OpShardingRule> ruleOf(const ir::Node& n) {
  sharding::RuleRegistry r;
  sharding::registerAllRules(r);
  const sharding::RuleFn* fn = r.find(n.target());
  REQUIRE(fn);
  return (*fn)(n);
}

}  // namespace

TEST_CASE("the permute rule refuses dims out of range or of the wrong count, unverified") {
  HandGraph h;
  ir::Value* x = h.tensor("x", {2, 3, 4});
  auto permute = [&](std::vector<int64_t> dims) -> const ir::Node& {
    return h.node("aten.permute.default",
                  {{"self", ir::Argument::tensor(x), false}, {"dims", ir::Argument::integers(dims), false}},
                  {4, 3, 2});
  };
  CHECK(ruleOf(permute({2, 1, 0})).hasValue());
  CHECK_THAT(ruleOf(permute({0, 5, 1})).status().message(), Catch::Contains("permute rule"));
  CHECK_THAT(ruleOf(permute({2, 1})).status().message(), Catch::Contains("2 dims for a rank-3 input"));
  CHECK_FALSE(ruleOf(permute({-7, 1, 0})).hasValue());
  CHECK_FALSE(ruleOf(h.node("aten.permute.default", {{"self", ir::Argument::tensor(x), false}}, {2, 3, 4})));
  const ir::Node& t = h.node("aten.transpose.int",
                             {{"self", ir::Argument::tensor(x), false},
                              {"dim0", ir::Argument::integer(0), false},
                              {"dim1", ir::Argument::integer(9), false}},
                             {4, 3, 2});
  CHECK_THAT(ruleOf(t).status().message(), Catch::Contains("transpose rule: dim out of range"));
}

TEST_CASE("RuleBuilder reports an operand or dim out of range from build(), never aborts") {
  HandGraph h;
  ir::Value* x = h.tensor("x", {2, 3});
  const ir::Node& n = h.node("aten.relu.default", {{"self", ir::Argument::tensor(x), false}}, {2, 3});
  sharding::RuleBuilder b(n);
  int f = b.factor(2);
  b.operand(0, 5, f).result(3, 0, f).operand(0, 0, f);
  auto rule = b.build();
  REQUIRE_FALSE(rule.hasValue());
  CHECK(rule.status().message() == "sharding rule: dim 5 of operand 0 is out of range");
}

TEST_CASE("the cost model saturates byte counts past int64 instead of aborting") {
  using K = sharding::CollectiveKind;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CHECK(sharding::CostModel::bytesMoved(K::AllReduce, 8, kMax, kMax) == kMax);
  CHECK(sharding::CostModel::bytesMoved(K::AllGather, 4, 0, kMax) == kMax / 4 * 3 + (kMax % 4) * 3 / 4);
  // A product that overflowed upstream arrives negative: the most bytes there are.
  CHECK(sharding::CostModel::bytesMoved(K::ReduceScatter, 2, -64, 0) == kMax / 2);
  sharding::CostModel cm;
  CHECK(cm.cost(K::AllToAll, 0, 4, -1, -1) > 0);
  CHECK(cm.cost(K::LocalSlice, 0, 4, -1, -1) > 0);
}

TEST_CASE("spmdc compile refuses a malformed archive with one line and no output") {
  TempDir dir;
  std::string bad = dir.file("bad.pt2");
  rewriteArchive(model("mlp"), bad, [](const std::string& name, std::string bytes) {
    if (name == "model/models/model.json")
      bytes = spmd::testing::replaceFirst(bytes, "\"as_ints\": [1, 0]", "\"as_ints\": [1, 1]");
    return std::optional<std::string>(bytes);
  });
  auto res = runCommand(std::string(SPMDC_PATH) + " compile " + bad + " --schema dp --mesh 2 -o " +
                        dir.file("out.spmd"));
  CHECK(res.exitCode == 2);
  CHECK(res.stderrText ==
        "error: " + bad +
            ": node %permute (aten.permute.default): dims [1, 1] is not a permutation of the 2 "
            "dims of its input; re-export the model\n");
  CHECK_FALSE(std::filesystem::exists(dir.file("out.spmd")));
}

TEST_CASE("a payload's storage offset is honoured when its weight is sliced") {
  // fc2.bias made a view at element 64 of fc1.bias's storage (as torch.export
  // writes a weight sliced from another): its bytes are fc1.bias's 64..127.
  TempDir dir;
  std::string path = dir.file("view.pt2");
  rewriteArchive(model("mlp"), path, [](const std::string& name, std::string bytes) {
    if (name == "model/models/model.json") {
      json j = json::parse(bytes);
      j["graph_module"]["graph"]["tensor_values"]["p_fc2_bias"]["storage_offset"]["as_int"] = 64;
      return std::optional<std::string>(j.dump());
    }
    if (name == "model/data/weights/model_weights_config.json") {
      json j = json::parse(bytes);
      j["config"]["fc2.bias"]["path_name"] = "weight_1";
      j["config"]["fc2.bias"]["tensor_meta"]["storage_offset"]["as_int"] = 64;
      return std::optional<std::string>(j.dump());
    }
    return std::optional<std::string>(bytes);
  });
  auto archive = pt2::readArchive(path);
  REQUIRE(archive.hasValue());
  program::ArchiveWeightSource weights(*archive);
  auto fc1 = weights.globalBytes("fc1.bias");
  auto fc2 = weights.globalBytes("fc2.bias");
  REQUIRE(fc1.hasValue());
  REQUIRE(fc2.hasValue());
  REQUIRE(fc2->size() == 64 * 4);
  CHECK(std::memcmp(fc2->data(), fc1->data() + 64 * 4, 64 * 4) == 0);
  auto s = schema::loadSchemaOrPreset("dp");
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  CHECK(passes::compile(*archive, *s, opts).hasValue());
}

TEST_CASE("compiled local programs pass the verifier too") {
  // So that readers of .spmd programs can run it (local sizes, spmd.* ops).
  struct Case {
    std::string model, schema;
  };
  const std::string examples = std::string(SPMD_SOURCE_DIR) + "/schemas/examples/";
  for (const Case& c : std::vector<Case>{{"mlp", examples + "mlp_tp.json"},
                                         {"gpt_block", examples + "gpt_block_tp.json"},
                                         {"llama", examples + "llama_tp.json"},
                                         {"llama_train", "fsdp"},
                                         {"llama_dynamic", "dp"},
                                         {"cnn_train", "dp"},
                                         {"moe", "fsdp"}}) {
    INFO(c.model << " " << c.schema);
    auto archive = pt2::readArchive(model(c.model));
    REQUIRE(archive.hasValue());
    auto s = schema::loadSchemaOrPreset(c.schema);
    REQUIRE(s.hasValue());
    passes::CompileOptions opts;
    opts.mesh = std::vector<int64_t>{2};
    auto r = passes::compile(*archive, *s, opts);
    REQUIRE(r.hasValue());
    Status st = ir::verifyProgram(r->program.graph);
    CHECK(st.message() == "");
  }
}
