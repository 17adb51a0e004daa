// The .pt2 reader on every test archive, and on each kind of bad input.
#include <nlohmann/json.hpp>
#include "../TestCatch.h"

#include "ArchiveFixtures.h"
#include "pt2/Archive.h"

using namespace spmd;
using spmd::testing::readBytes;
using spmd::testing::replaceFirst;
using spmd::testing::rewriteArchive;
using spmd::testing::TempDir;

namespace {

const char* kModels[] = {
    "cnn",        "cnn_train",         "gpt_block",     "gpt_block_sdpa",      "llama",
    "llama_deep", "llama_deep_train",  "llama_dynamic", "llama_dynamic_b3s24", "llama_train",
    "mlp",        "mlp_dynamic_batch", "mlp_train",     "mlp_training_ir",     "moe"};

std::string modelPath(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}
std::string mlpPath() { return modelPath("mlp"); }

// Reads a corrupt copy of mlp.pt2 and returns the error message.
std::string errorOf(const std::function<std::optional<std::string>(const std::string&, std::string)>& edit,
                    const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  TempDir dir;
  std::string bad = dir.file("bad.pt2");
  rewriteArchive(mlpPath(), bad, edit, extra);
  auto a = pt2::readArchive(bad);
  REQUIRE_FALSE(a.hasValue());
  std::string msg = a.status().message();
  CHECK(msg.rfind(bad + ": ", 0) == 0);  // every message names the file first
  return msg;
}

std::optional<std::string> editJson(const std::string& name, std::string bytes, const std::string& from,
                                    const std::string& to) {
  if (name == "model/models/model.json") return replaceFirst(std::move(bytes), from, to);
  return bytes;
}

}  // namespace

TEST_CASE("every test archive reads with the node count, ops and signature of its meta.json") {
  for (const char* m : kModels) {
    INFO(m);
    auto a = pt2::readArchive(modelPath(m));
    REQUIRE(a.hasValue());
    auto meta = nlohmann::json::parse(readBytes(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/meta.json"));
    const auto& p = a->program;
    // meta's counts are FX's: placeholders, the output node and getitem
    // nodes (which the archive folds into multi-output nodes) count too.
    std::map<std::string, int> ops;
    for (const auto& n : p.graph.nodes()) ++ops[n->target()];
    ops["<built-in function mul>"] = ops["_operator.mul"];
    size_t getitems = meta["ops"].value("<built-in function getitem>", 0);
    CHECK(p.graph.nodes().size() + p.graph.inputs().size() + 1 + getitems == meta["num_nodes"].get<size_t>());
    for (const auto& [op, count] : meta["ops"].items())
      if (op != "<built-in function getitem>") CHECK(ops[op] == count.get<int>());
    CHECK(p.signature.inputs.size() == meta["input_specs"].size());
    CHECK(p.signature.outputs.size() == meta["output_specs"].size());
    CHECK(p.graph.verify().isOk());
    for (const auto& in : p.signature.inputs) {
      if (in.kind != ir::InputKind::Parameter && in.kind != ir::InputKind::Buffer) continue;
      const pt2::TensorPayload* t = a->payload(in.target);
      REQUIRE(t);
      REQUIRE(t->storage);
      CHECK(static_cast<int64_t>(t->sizes.size()) == in.value->type().rank());
    }
  }
}

TEST_CASE("userSourceLine: the innermost frame that is neither torch nor generated code") {
  // A Hugging Face model called from the user's wrapper: the modeling file's
  // line, not the wrapper's; FX's generated code and torch frames skipped.
  std::string trace =
      "  File \"/home/u/zoo.py\", line 19, in forward\n    return self.model(x)\n"
      "  File \"/venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py\", line 271, "
      "in forward\n    attn_output = self.o_proj(attn_output)\n"
      "  File \"<eval_with_key>.42\", line 18, in forward\n    polar = torch.polar(a, b)\n"
      "  File \"/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py\", line 125, in forward\n"
      "    return F.linear(input, self.weight, self.bias)\n";
  CHECK(ir::userSourceLine(trace) == "modeling_llama.py:271: attn_output = self.o_proj(attn_output)");
  CHECK(ir::userSourceLine("  File \"<eval_with_key>.42\", line 18, in forward\n    x\n").empty());
}

TEST_CASE("mlp: graph, types, weights and metadata") {
  auto a = pt2::readArchive(mlpPath());
  REQUIRE(a.hasValue());
  const auto& g = a->program.graph;
  REQUIRE(g.nodes().size() == 5);
  const ir::Node& permute = *g.nodes()[0];
  CHECK(permute.target() == "aten.permute.default");
  CHECK(permute.outputValues()[0]->type().str() == "f32[64, 256]");
  CHECK(permute.input("dims")->ints == std::vector<int64_t>{1, 0});
  CHECK(ir::userSourceLine(permute.metadata().stackTrace) ==
        "export_models.py:37: return self.fc2(F.gelu(self.fc1(x)))");
  const ir::Value* x = g.findValue("x");
  REQUIRE(x);
  CHECK(x->users().size() == 1);
  CHECK(x->users()[0]->name() == "addmm");
  const pt2::TensorPayload* w = a->payload("fc1.weight");
  REQUIRE(w);
  CHECK(w->sizes == std::vector<int64_t>{256, 64});
  CHECK(w->storage->size() == 256 * 64 * 4);
  CHECK(reinterpret_cast<uintptr_t>(w->storage->data()) % 64 == 0);
  // The bytes are the archive member's bytes.
  TempDir dir;
  std::string raw;
  rewriteArchive(mlpPath(), dir.file("copy.pt2"), [&](const std::string& name, std::string bytes) {
    if (name == "model/data/weights/weight_0") raw = bytes;
    return std::optional<std::string>(bytes);
  });
  CHECK(std::memcmp(raw.data(), w->storage->data(), raw.size()) == 0);
}

TEST_CASE("symbolic sizes and ranges of llama_dynamic") {
  auto a = pt2::readArchive(modelPath("llama_dynamic"));
  REQUIRE(a.hasValue());
  const auto& p = a->program;
  REQUIRE(p.ranges.count("s27"));
  CHECK(p.ranges.at("s27").min == 2);
  CHECK(p.ranges.at("s27").max == 64);
  const ir::Value* tokens = p.graph.findValue("tokens");
  REQUIRE(tokens);
  CHECK(tokens->type().str() == "i64[s52, s27]");
  const ir::Value* mul = p.graph.findValue("mul_27");
  REQUIRE(mul);
  CHECK(mul->kind() == ir::ValueKind::SymInt);
  CHECK(mul->symValue().evaluate({{"s27", 5}, {"s52", 3}}).value() == 15);
}

TEST_CASE("tied weights share one storage") {
  TempDir dir;
  std::string tied = dir.file("tied.pt2");
  // fc2.bias (64 floats) made to point at fc1.bias's payload (256 floats).
  rewriteArchive(mlpPath(), tied, [](const std::string& name, std::string bytes) {
    if (name.find("weights_config.json") != std::string::npos) {
      auto j = nlohmann::json::parse(bytes);
      j["config"]["fc2.bias"]["path_name"] = "weight_1";
      return std::optional<std::string>(j.dump());
    }
    return std::optional<std::string>(bytes);
  });
  auto a = pt2::readArchive(tied);
  REQUIRE(a.hasValue());
  CHECK(a->payload("fc2.bias")->storage.get() == a->payload("fc1.bias")->storage.get());
}

TEST_CASE("bad input: a file that is not a zip") {
  TempDir dir;
  std::ofstream(dir.file("x.pt2")) << "hello, I am not a zip archive";
  auto a = pt2::readArchive(dir.file("x.pt2"));
  REQUIRE_FALSE(a.hasValue());
  CHECK_THAT(a.status().message(), Catch::Contains("not a zip archive"));
}

TEST_CASE("bad input: an empty file") {
  TempDir dir;
  std::ofstream(dir.file("empty.pt2")).flush();
  auto a = pt2::readArchive(dir.file("empty.pt2"));
  REQUIRE_FALSE(a.hasValue());
  CHECK_THAT(a.status().message(), Catch::Contains("empty file"));
}

TEST_CASE("bad input: a missing file") {
  auto a = pt2::readArchive("/nonexistent/model.pt2");
  REQUIRE_FALSE(a.hasValue());
  CHECK_THAT(a.status().message(), Catch::StartsWith("/nonexistent/model.pt2: cannot open"));
}

TEST_CASE("bad input: no model JSON") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) -> std::optional<std::string> {
    if (name == "model/models/model.json") return std::nullopt;
    return bytes;
  });
  CHECK_THAT(msg, Catch::Contains("no models/<name>.json in the archive"));
}

TEST_CASE("bad input: model JSON that does not parse") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) -> std::optional<std::string> {
    if (name == "model/models/model.json") return bytes.substr(0, bytes.size() / 2);
    return bytes;
  });
  CHECK_THAT(msg, Catch::Contains("model/models/model.json does not parse as JSON"));
}

TEST_CASE("bad input: an unknown schema major version") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) {
    return editJson(name, std::move(bytes), "\"major\": 8", "\"major\": 9");
  });
  CHECK_THAT(msg, Catch::Contains("export schema version 9.17 is not supported (this build reads 8.x)"));
}

TEST_CASE("a newer minor schema version is accepted") {
  TempDir dir;
  rewriteArchive(mlpPath(), dir.file("m.pt2"), [](const std::string& name, std::string bytes) {
    return editJson(name, std::move(bytes), "\"minor\": 17", "\"minor\": 99");
  });
  auto a = pt2::readArchive(dir.file("m.pt2"));
  REQUIRE(a.hasValue());
  CHECK(a->program.schemaMinor == 99);
}

TEST_CASE("bad input: an unknown argument kind") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) {
    return editJson(name, std::move(bytes), "\"as_ints\"", "\"as_intz\"");
  });
  CHECK_THAT(msg,
             Catch::Contains(
                 "node %permute (aten.permute.default) argument 'dims': unknown argument kind 'as_intz'"));
}

TEST_CASE("bad input: a node reading an undefined value") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) {
    return editJson(name, std::move(bytes), "{\"name\": \"p_fc1_weight\"}}, \"kind\"",
                    "{\"name\": \"ghost\"}}, \"kind\"");
  });
  CHECK_THAT(msg, Catch::Contains("reads undefined value 'ghost'"));
}

TEST_CASE("bad input: a weight payload shorter than its metadata") {
  std::string msg = errorOf([](const std::string& name, std::string bytes) {
    if (name == "model/data/weights/weight_0") bytes.resize(1000);
    return std::optional<std::string>(bytes);
  });
  CHECK_THAT(msg, Catch::Contains("payload of 'fc1.weight' (model/data/weights/weight_0) has 1000 bytes but "
                                  "its metadata needs 65536"));
}

TEST_CASE("bad input: a member whose path escapes the archive") {
  std::string msg =
      errorOf([](const std::string&, std::string bytes) { return std::optional<std::string>(bytes); },
              {{"../evil", "x"}});
  CHECK_THAT(msg, Catch::Contains("../evil"));
  CHECK_THAT(msg, Catch::Contains("escapes the archive"));
}
