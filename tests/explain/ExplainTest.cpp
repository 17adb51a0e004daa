// spmd_explain: the page's data (modules, memory, comparison, uneven
// shards), its embedding in the HTML, and the memory estimate it shares
// with `spmdc compile`.
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "../TestCatch.h"
#include "../TestUtil.h"
#include "../program/ProgramTestUtil.h"
#include "explain/Explain.h"
#include "ir/Collectives.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

using namespace spmd;
using program::testing::arg;
using program::testing::ProgramBuilder;

namespace {

passes::CompileResult compileOrFail(const std::string& m, const std::string& schema,
                                    std::vector<int64_t> mesh, const std::string& optimizer = "") {
  auto archive = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2");
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = mesh;
  opts.optimizer.kind = optimizer;
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

nlohmann::json pageData(const std::vector<explain::ExplainInput>& inputs) {
  auto json = explain::explainJson(inputs);
  if (!json) FAIL(json.status().message());
  return nlohmann::json::parse(*json);
}

std::string modulePath(const nlohmann::json& p, int index) { return p["modules"][index]["path"]; }

}  // namespace

TEST_CASE("estimateMemory counts a value read twice by one node once", "[explain]") {
  // x (16 B) -> a = neg(x) -> b = mul(a, a) -> c = neg(b) -> d = add(b, c):
  // at d, x, b, c and d are live: 64 B (the old walk freed a twice: 48).
  ProgramBuilder pb("twice", {1}, {"x"});
  ir::Value* x = pb.input(ir::InputKind::UserInput, "x", {4}, {4}, {"R"});
  ir::Value* a = pb.node("a", "aten.neg.default", {arg("self", ir::Argument::tensor(x))}, {4});
  ir::Value* b = pb.node("b", "aten.mul.Tensor",
                         {arg("self", ir::Argument::tensor(a)), arg("other", ir::Argument::tensor(a))}, {4});
  ir::Value* c = pb.node("c", "aten.neg.default", {arg("self", ir::Argument::tensor(b))}, {4});
  ir::Value* d = pb.node("d", "aten.add.Tensor",
                         {arg("self", ir::Argument::tensor(b)), arg("other", ir::Argument::tensor(c))}, {4});
  pb.output(d, {"R"}, {4});
  program::Program p = pb.take();
  CHECK(passes::estimateMemory(p).peakBytes == 64);
  auto j = pageData({{&p, "twice.spmd"}});
  CHECK(j["programs"][0]["memory"]["peak"]["node"] == 3);
  CHECK(j["programs"][0]["memory"]["peak"]["dynamic_bytes"] == 64);
}

TEST_CASE("the data is deterministic and survives the HTML round trip", "[explain]") {
  auto r = compileOrFail("mlp", "fsdp", {2});
  auto first = explain::explainJson({{&r.program, "mlp.spmd"}});
  auto again = explain::explainJson({{&r.program, "mlp.spmd"}});
  REQUIRE(first.hasValue());
  REQUIRE(again.hasValue());
  CHECK(*first == *again);
  std::string html = explain::explainHtml(*first);
  CHECK(html == explain::explainHtml(*again));
  auto embedded = explain::embeddedJson(html);
  REQUIRE(embedded.hasValue());
  CHECK(nlohmann::json::parse(*embedded) == nlohmann::json::parse(*first));
  // No network: nothing fetched, and the policy forbids it.
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  CHECK(html.find("default-src 'none'") != std::string::npos);
  CHECK(!explain::embeddedJson("<html>no data</html>").hasValue());
}

TEST_CASE("a label holding </script> cannot end the data tag", "[explain]") {
  auto r = compileOrFail("mlp", "fsdp", {2});
  const std::string label = "</script><script>alert(1)</script><!--";
  auto json = explain::explainJson({{&r.program, label}});
  REQUIRE(json.hasValue());
  std::string html = explain::explainHtml(*json);
  CHECK(html.find("alert(1)</script>") == std::string::npos);
  auto embedded = explain::embeddedJson(html);
  REQUIRE(embedded.hasValue());
  CHECK(nlohmann::json::parse(*embedded)["programs"][0]["label"] == label);
}

TEST_CASE("one or two programs, no more", "[explain]") {
  auto r = compileOrFail("mlp", "fsdp", {2});
  CHECK_THAT(explain::explainJson({}).status().message(), Catch::Contains("one program, or two"));
  CHECK(!explain::explainJson({{&r.program, "a"}, {&r.program, "b"}, {&r.program, "c"}}).hasValue());
}

TEST_CASE("modules, weights and collectives of an export with nn_module_stack", "[explain]") {
  auto r = compileOrFail("mlp", "fsdp", {2});
  auto p = pageData({{&r.program, "mlp.spmd"}})["programs"][0];
  CHECK(p["module_source"] == "nn_module_stack");
  std::vector<std::string> paths;
  for (const auto& m : p["modules"]) paths.push_back(m["path"]);
  CHECK(paths == std::vector<std::string>{"", "fc1", "fc2"});
  CHECK(p["modules"][1]["type"] == "torch.nn.modules.linear.Linear");
  int communicating = 0;
  for (const auto& n : r.program.graph.graph.nodes()) communicating += ir::isCommunicating(n->target());
  REQUIRE(p["collectives"].size() == static_cast<size_t>(communicating));
  REQUIRE(communicating > 0);
  for (const auto& c : p["collectives"]) {  // FSDP's gathers (maybe bucketed), issued async
    CHECK(c["kind"] == "all_gather");
    CHECK(c["wait"].get<int>() > c["index"].get<int>());
    CHECK(modulePath(p, c["module"]) != "");
    CHECK(p["ops"]["name"][c["index"].get<int>()] == c["node"]);
  }
  CHECK(p["weights"][0]["spec"] == nlohmann::json::array({"S(0)"}));
  CHECK(p["weights"][0]["rank_shapes"].is_null());  // even split: one local shape
}

TEST_CASE("memory: the peak is spmdc compile's estimate, gradients counted", "[explain]") {
  auto r = compileOrFail("mlp_train", "fsdp", {2}, "adamw");
  auto p = pageData({{&r.program, "mlp_train.spmd"}})["programs"][0];
  const auto& mem = p["memory"];
  const auto& st = mem["rank_classes"][0]["static"];
  int64_t weights =
      st["parameters"].get<int64_t>() + st["buffers"].get<int64_t>() + st["optimizer_states"].get<int64_t>();
  CHECK(st["optimizer_states"].get<int64_t>() > 0);
  CHECK(weights == passes::estimateMemory(r.program).paramBytes);
  CHECK(weights + mem["peak"]["dynamic_bytes"].get<int64_t>() == passes::estimateMemory(r.program).peakBytes);
  int64_t gradMax = 0;
  for (const auto& g : mem["series"]["gradients"]) gradMax = std::max(gradMax, g.get<int64_t>());
  CHECK(gradMax > 0);
}

TEST_CASE("joint train steps: modules inferred from the weights ops read", "[explain]") {
  auto r = compileOrFail("llama_train", "fsdp", {2}, "sgd");
  auto p = pageData({{&r.program, "llama_train.spmd"}})["programs"][0];
  CHECK(p["module_source"] == "weights");
  const auto& ops = p["ops"];
  bool found = false;
  for (size_t i = 0; i < ops["name"].size(); ++i)
    if (ops["name"][i] == "model_out_weight_updated") {
      CHECK(modulePath(p, ops["module"][i]) == "model.out");
      found = true;
    }
  CHECK(found);
}

TEST_CASE("uneven shards: local shapes and memory per rank", "[explain]") {
  ProgramBuilder pb("uneven", {4}, {"x"});
  ir::Value* w = pb.input(ir::InputKind::Parameter, "p_w", {2, 4}, {6, 4}, {"S(0)"}, "lin.w");
  ir::Value* t = pb.node("t", "aten.neg.default", {arg("self", ir::Argument::tensor(w))}, {2, 4});
  pb.output(t, {"S(0)"}, {6, 4});
  pb.weight("lin.w", {6, 4}, {"S(0)"});
  pb.program().weights[0].localShape = {2, 4};
  program::Program p = pb.take();
  auto j = pageData({{&p, "uneven.spmd"}})["programs"][0];
  CHECK(j["weights"][0]["rank_shapes"] == nlohmann::json::parse("[[2,4],[2,4],[2,4],[0,4]]"));
  const auto& classes = j["memory"]["rank_classes"];
  REQUIRE(classes.size() == 2);
  CHECK(classes[0]["ranks"] == nlohmann::json::parse("[[0,2]]"));
  CHECK(classes[0]["static"]["parameters"] == 32);
  CHECK(classes[1]["ranks"] == nlohmann::json::parse("[[3,3]]"));
  CHECK(classes[1]["static"]["parameters"] == 0);
  CHECK(modulePath(j, j["weights"][0]["module"]) == "lin");
}

TEST_CASE("comparison: placements, collectives and bytes that differ", "[explain]") {
  auto a = compileOrFail("mlp", "fsdp", {8});
  auto b = compileOrFail("mlp", std::string(SPMD_SOURCE_DIR) + "/schemas/examples/mlp_tp.json", {8});
  auto j = pageData({{&a.program, "fsdp.spmd"}, {&b.program, "tp.spmd"}});
  REQUIRE(j["programs"].size() == 2);
  const auto& d = j["diff"];
  bool fc2Changed = false;  // fsdp shards rows, Megatron's row-parallel fc2 columns
  for (const auto& p : d["placements"])
    if (p["fqn"] == "fc2.weight")
      fc2Changed = p["a"] == nlohmann::json::array({"S(0)"}) && p["b"] == nlohmann::json::array({"S(1)"});
  CHECK(fc2Changed);
  bool gatherRemoved = false;  // fsdp's weight gathers
  for (const auto& c : d["collectives"]["removed"]) gatherRemoved |= c["kind"] == "all_gather";
  CHECK(gatherRemoved);
  CHECK(!d["collectives"]["added"].empty());  // tp's all-reduce of fc2's output
  auto same = pageData({{&a.program, "a.spmd"}, {&a.program, "b.spmd"}})["diff"];
  CHECK(same["placements"].empty());
  CHECK(same["collectives"]["added"].empty());
  CHECK(same["collectives"]["removed"].empty());
}

TEST_CASE("a spmd-run --profile shows beside the estimate; one of another mesh is refused", "[explain]") {
  auto r = compileOrFail("mlp", "dp", {2});
  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  std::string ok = write("p.json", R"({"format": 1, "program": "mlp.spmd", "mesh": [2], "ranks": [)"
                                   R"({"rank": 0, "peak_bytes": 1000, "step_ms": 1.5, "bytes_sent": 64},)"
                                   R"({"rank": 1, "peak_bytes": 2000, "step_ms": 1.25, "bytes_sent": 64}]})");
  auto profile = explain::readProfile({ok}, r.program);
  if (!profile) FAIL(profile.status().message());
  auto p = pageData({{&r.program, "mlp.spmd", &*profile}})["programs"][0];
  REQUIRE(p.contains("measured"));
  CHECK(p["measured"]["files"] == nlohmann::json::array({"p.json"}));
  REQUIRE(p["measured"]["ranks"].size() == 2);
  CHECK(p["measured"]["ranks"][0]["peak_bytes"] == 1000);
  CHECK(p["measured"]["ranks"][1]["peak_bytes"] == 2000);
  CHECK(p["measured"]["ranks"][1]["step_ms"] == 1.25);
  CHECK_FALSE(pageData({{&r.program, "mlp.spmd"}})["programs"][0].contains("measured"));

  auto refused = [&](const std::string& path) {
    auto bad = explain::readProfile({path}, r.program);
    REQUIRE_FALSE(bad.hasValue());
    CHECK(bad.status().message().find('\n') == std::string::npos);
    CHECK(bad.status().message().rfind(path + ": ", 0) == 0);
    return bad.status().message();
  };
  std::string mesh4 = write("m4.json", R"({"format": 1, "mesh": [4], "ranks": []})");
  CHECK_THAT(refused(mesh4), Catch::Contains("measured on mesh 4, but the program's mesh is 2"));
  CHECK_THAT(refused(write("bad.json", "{\"format\": 1,")), Catch::Contains("not valid JSON"));
  std::string half = write("half.json", R"({"format": 1, "mesh": [2], "ranks": [)"
                                        R"({"rank": 0, "peak_bytes": 1, "step_ms": 1, "bytes_sent": 0}]})");
  CHECK_THAT(refused(half), Catch::Contains("rank 1 of 2 is missing"));
}
