// The verifier run by the .pt2 reader: one regression test per defect of
// issue 15 (each crashed compile or gave wrong numbers before), and
// `spmdc inspect` on a truncated payload.
#include <nlohmann/json.hpp>
#include "../TestCatch.h"

#include "ArchiveFixtures.h"
#include "ir/Verify.h"
#include "pt2/Archive.h"

using namespace spmd;
using nlohmann::json;
using spmd::testing::readBytes;
using spmd::testing::rewriteArchive;
using spmd::testing::runCommand;
using spmd::testing::TempDir;

namespace {

const std::string kModelJson = "model/models/model.json";
const std::string kWeightsConfig = "model/data/weights/model_weights_config.json";
constexpr int64_t k2to62 = int64_t{1} << 62;

std::string mlpPath() { return std::string(SPMD_TESTDATA_DIR) + "/pt2/mlp/model.pt2"; }

// A copy of mlp.pt2 with the model JSON and the weights config edited.
struct Edited {
  TempDir dir;
  std::string path = dir.file("bad.pt2");
  Edited(const std::function<void(json&)>& model, const std::function<void(json&)>& config = nullptr) {
    rewriteArchive(mlpPath(), path, [&](const std::string& name, std::string bytes) {
      if (name == kModelJson && model) {
        json j = json::parse(bytes);
        model(j);
        return std::optional<std::string>(j.dump());
      }
      if (name == kWeightsConfig && config) {
        json j = json::parse(bytes);
        config(j);
        return std::optional<std::string>(j.dump());
      }
      return std::optional<std::string>(bytes);
    });
  }
};

json& node(json& j, const std::string& name) {
  for (json& n : j["graph_module"]["graph"]["nodes"])
    if (n["outputs"][0]["as_tensor"]["name"] == name) return n;
  FAIL("no node " << name);
  static json none;
  return none;
}
json& meta(json& j, const std::string& value) { return j["graph_module"]["graph"]["tensor_values"][value]; }

// The reader's error for an edited mlp.pt2; it names the file once, first.
std::string readError(const Edited& e) {
  auto a = pt2::readArchive(e.path);
  REQUIRE_FALSE(a.hasValue());
  std::string msg = a.status().message();
  CHECK(msg.rfind(e.path + ": ", 0) == 0);
  CHECK(msg.find(e.path, 1) == std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
  return msg;
}

void setPermuteDims(json& j, json dims) {
  node(j, "permute")["inputs"][1]["arg"]["as_ints"] = std::move(dims);
}

}  // namespace

TEST_CASE("verifier: permute dims out of range") {
  Edited e([](json& j) { setPermuteDims(j, {1, 2}); });
  CHECK_THAT(readError(e), Catch::EndsWith(": node %permute (aten.permute.default): dims [1, 2] is not a "
                                           "permutation of the 2 dims of its input; re-export the model"));
}

TEST_CASE("verifier: permute with the wrong number of dims") {
  Edited e([](json& j) { setPermuteDims(j, {1}); });
  CHECK_THAT(readError(e), Catch::Contains("dims [1] is not a permutation of the 2 dims of its input"));
  Edited repeated([](json& j) { setPermuteDims(j, {0, 0}); });
  CHECK_THAT(readError(repeated), Catch::Contains("dims [0, 0] is not a permutation"));
}

TEST_CASE("verifier: permute whose result is not its input's dims moved") {
  Edited e([](json& j) { setPermuteDims(j, {0, 1}); });
  CHECK_THAT(readError(e),
             Catch::Contains("result sizes [64, 256] are not the input's [256, 64] with dims [0, 1]"));
}

TEST_CASE("verifier: sizes whose product overflows int64") {
  Edited e([](json& j) {
    meta(j, "addmm")["sizes"] = {{{"as_int", k2to62}}, {{"as_int", 256}}};
    meta(j, "addmm")["strides"] = {{{"as_int", 256}}, {{"as_int", 1}}};
  });
  CHECK_THAT(readError(e),
             Catch::Contains("node %addmm (aten.addmm.default): f32[4611686018427387904, 256]: its "
                             "sizes hold more than 2^63 bytes; re-export the model"));
}

TEST_CASE("verifier: a negative size on an intermediate value") {
  Edited e([](json& j) { meta(j, "gelu")["sizes"][0]["as_int"] = -1; });
  CHECK_THAT(readError(e),
             Catch::Contains("node %gelu (aten.gelu.default): f32[-1, 256]: dim 0 has negative size "
                             "-1; re-export the model"));
}

TEST_CASE("verifier: a stride of 2^62") {
  Edited e([](json& j) { meta(j, "gelu")["strides"][0]["as_int"] = k2to62; });
  CHECK_THAT(readError(e),
             Catch::Contains("node %gelu (aten.gelu.default): f32[32, 256]: the last element "
                             "reachable through its strides and storage offset lies beyond 2^63"));
  Edited negative([](json& j) { meta(j, "gelu")["strides"][1]["as_int"] = -1; });
  CHECK_THAT(readError(negative), Catch::Contains("dim 1 has negative stride -1"));
  Edited count([](json& j) { meta(j, "gelu")["strides"].erase(1); });
  CHECK_THAT(readError(count), Catch::Contains("2 sizes but 1 strides"));
}

TEST_CASE("verifier: a dim argument out of range") {
  Edited e([](json& j) {
    json& n = node(j, "permute");
    n["target"] = "torch.ops.aten.transpose.int";
    n["inputs"][1] = {{"name", "dim0"}, {"arg", {{"as_int", 0}}}, {"kind", 1}};
    n["inputs"][2] = {{"name", "dim1"}, {"arg", {{"as_int", 2}}}, {"kind", 1}};
  });
  CHECK_THAT(readError(e),
             Catch::Contains("node %permute (aten.transpose.int): dim1 2 is out of range for its "
                             "rank-2 input (expected -2..1)"));
}

TEST_CASE("verifier: a matrix operand of the wrong rank") {
  Edited e([](json& j) {
    for (json& in : node(j, "addmm")["inputs"])
      if (in["name"] == "mat2") in["arg"]["as_tensor"]["name"] = "p_fc1_bias";
  });
  CHECK_THAT(readError(e), Catch::Contains("node %addmm (aten.addmm.default): argument 'mat2' has rank 1, "
                                           "expected 2; re-export the model"));
  Edited k([](json& j) {
    for (json& in : node(j, "addmm")["inputs"])
      if (in["name"] == "mat2") in["arg"]["as_tensor"]["name"] = "p_fc1_weight";
  });
  CHECK_THAT(readError(k), Catch::Contains("cannot multiply f32[32, 64] by f32[256, 64]"));
}

TEST_CASE("verifier: a storage offset the graph and the payload disagree on is refused") {
  Edited e([](json& j) { meta(j, "p_fc1_weight")["storage_offset"]["as_int"] = 5; });
  CHECK_THAT(readError(e),
             Catch::Contains("parameter 'fc1.weight': the graph reads %p_fc1_weight as f32[256, 64] "
                             "strides [64, 1] offset 5 but its payload metadata says f32[256, 64] "
                             "strides [64, 1] offset 0; re-export the model"));
  Edited negative([](json& j) { meta(j, "gelu")["storage_offset"]["as_int"] = -3; });
  CHECK_THAT(readError(negative),
             Catch::Contains("node %gelu (aten.gelu.default): f32[32, 256]: storage offset -3 "
                             "is negative"));
}

TEST_CASE("verifier: a payload that is a view into a larger storage is read at its storage offset") {
  // fc2.bias (64 floats) made a view of fc1.bias's storage (256 floats) at offset 64,
  // as torch.export writes a tensor sliced from another.
  auto offset64 = [](json& m) { m["storage_offset"]["as_int"] = 64; };
  Edited e([&](json& j) { offset64(meta(j, "p_fc2_bias")); },
           [&](json& c) {
             c["config"]["fc2.bias"]["path_name"] = "weight_1";
             offset64(c["config"]["fc2.bias"]["tensor_meta"]);
           });
  auto a = pt2::readArchive(e.path);
  REQUIRE(a.hasValue());
  const pt2::TensorPayload* bias = a->payload("fc2.bias");
  CHECK(bias->storageOffset == 64);
  CHECK(bias->storage.get() == a->payload("fc1.bias")->storage.get());
  // The graph's offset and the payload's must agree.
  Edited other([&](json& j) { offset64(meta(j, "p_fc2_bias")); },
               [&](json& c) {
                 c["config"]["fc2.bias"]["path_name"] = "weight_1";
                 c["config"]["fc2.bias"]["tensor_meta"]["storage_offset"]["as_int"] = 100;
               });
  CHECK_THAT(readError(other),
             Catch::Contains("offset 64 but its payload metadata says f32[64] strides [1] offset 100"));
  // Past the end of the storage: 200 + 64 floats > 256.
  Edited outside([&](json& j) { meta(j, "p_fc2_bias")["storage_offset"]["as_int"] = 200; },
                 [&](json& c) {
                   c["config"]["fc2.bias"]["path_name"] = "weight_1";
                   c["config"]["fc2.bias"]["tensor_meta"]["storage_offset"]["as_int"] = 200;
                 });
  CHECK_THAT(
      readError(outside),
      Catch::Contains("payload of 'fc2.bias' (model/data/weights/weight_1) has 1024 bytes but its metadata "
                      "needs 1056; the archive is truncated or corrupt, re-export it"));
}

TEST_CASE("verifier: payload metadata that disagrees with the graph input") {
  Edited e(nullptr, [](json& c) { c["config"]["fc1.weight"]["tensor_meta"]["sizes"][1]["as_int"] = 32; });
  CHECK_THAT(readError(e),
             Catch::Contains("the graph reads %p_fc1_weight as f32[256, 64] strides [64, 1] offset 0 "
                             "but its payload metadata says f32[256, 32]"));
}

TEST_CASE("verifier: a truncated payload is found without reading the weights") {
  TempDir dir;
  std::string bad = dir.file("cut.pt2");
  rewriteArchive(mlpPath(), bad, [](const std::string& name, std::string bytes) {
    if (name == "model/data/weights/weight_0") bytes.resize(1000);
    return std::optional<std::string>(bytes);
  });
  auto a = pt2::readArchive(bad, {.loadWeights = false});
  REQUIRE_FALSE(a.hasValue());
  CHECK_THAT(a.status().message(),
             Catch::Contains("payload of 'fc1.weight' (model/data/weights/weight_0) has 1000 "
                             "bytes but its metadata needs 65536"));
  // spmdc inspect says so: exit 2, one line, nothing on stdout.
  auto res = runCommand(std::string(SPMDC_PATH) + " inspect " + bad);
  CHECK(res.exitCode == 2);
  CHECK(res.stdoutText.empty());
  CHECK(res.stderrText == "error: " + a.status().message() + "\n");
  res = runCommand(std::string(SPMDC_PATH) + " inspect --format json " + bad);
  CHECK(res.exitCode == 2);
}

TEST_CASE("verifier: a corrupt member names the archive once") {
  // Flip a byte inside weight_0's stored data: libzip's CRC check fails.
  std::string raw = readBytes(mlpPath());
  std::string weight;
  TempDir dir;
  rewriteArchive(mlpPath(), dir.file("copy.pt2"), [&](const std::string& name, std::string bytes) {
    if (name == "model/data/weights/weight_0") weight = bytes;
    return std::optional<std::string>(bytes);
  });
  size_t at = raw.find(weight.substr(1000, 256));
  REQUIRE(at != std::string::npos);
  raw[at + 100] = static_cast<char>(raw[at + 100] ^ 0x5a);
  std::string bad = dir.file("crc.pt2");
  std::ofstream(bad, std::ios::binary) << raw;
  auto a = pt2::readArchive(bad);
  REQUIRE_FALSE(a.hasValue());
  std::string msg = a.status().message();
  CHECK(msg.rfind(bad + ": ", 0) == 0);
  CHECK(msg.find(bad, 1) == std::string::npos);
}

TEST_CASE("verifier: every test archive passes it") {
  for (const char* m : {"cnn_train", "gpt_block_fused", "llama_dynamic", "llama_train", "moe", "tied_lm"}) {
    INFO(m);
    auto a =
        pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2", {.loadWeights = false});
    REQUIRE(a.hasValue());
    CHECK(ir::verifyProgram(a->program).isOk());
  }
}
