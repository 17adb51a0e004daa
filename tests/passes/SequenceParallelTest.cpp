// Sequence parallelism (passes/SequenceParallel.h) compiled on the llama
// test models, without execution: the exact collectives Megatron-SP issues
// per block, forward and backward, at tp 2 and 4, and the refusals.
#include <fstream>
#include <map>
#include "../TestCatch.h"

#include "../TestUtil.h"
#include "ir/Collectives.h"
#include "passes/ActivationMemory.h"
#include "passes/Pipeline.h"
#include "passes/SequenceParallel.h"
#include "program/Dump.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

using namespace spmd;
using spmd::testing::TempDir;

namespace {

std::string model(const std::string& m) {
  return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m + "/model.pt2";
}
std::string example(const std::string& e) { return std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + e; }

Expected<passes::CompileResult> compileModel(const std::string& m, const std::string& schema,
                                             std::vector<int64_t> mesh) {
  auto archive = pt2::readArchive(model(m));
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::move(mesh);
  return passes::compile(*archive, *s, opts);
}

passes::CompileResult compileOrFail(const std::string& m, const std::string& schema,
                                    std::vector<int64_t> mesh) {
  auto r = compileModel(m, schema, std::move(mesh));
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

/// Collectives by kind ("all_gather"): count and bytes per rank.
struct Tally {
  int count = 0;
  int64_t bytes = 0;
  bool operator==(const Tally&) const = default;
};
std::map<std::string, Tally> tally(const program::Program& p) {
  std::map<std::string, Tally> out;
  for (const auto& c : p.collectives) {
    ++out[c.kind].count;
    out[c.kind].bytes += c.bytesPerRank;
  }
  return out;
}

}  // namespace

TEST_CASE("sequence parallelism finds llama's residual stream, block outputs and norm outputs") {
  auto archive = pt2::readArchive(model("llama"));
  REQUIRE(archive.hasValue());
  auto plan = passes::findSequenceParallelPlan(archive->program.graph, std::nullopt);
  REQUIRE(plan.hasValue());
  auto names = [](const std::vector<ir::Value*>& vs) {
    std::vector<std::string> out;
    for (const ir::Value* v : vs) out.push_back(v->name());
    return out;
  };
  // embedding and the four residual adds; the adds' block outputs; the
  // normed activations the linears read (two per layer and the final norm).
  CHECK(names(plan->stream) == std::vector<std::string>{"embedding", "add_4", "add_6", "add_11", "add_13"});
  CHECK(names(plan->blockOutputs) == std::vector<std::string>{"view_19", "view_25", "view_45", "view_51"});
  CHECK(names(plan->normOutputs) ==
        std::vector<std::string>{"mul_1", "mul_11", "mul_15", "mul_25", "mul_29"});
  CHECK(plan->seqDim == 1);
  CHECK(plan->seqDimHow == "the dim as long as the attention's keys (16)");
}

TEST_CASE(
    "llama forward under SP: two reduce-scatters and two all-gathers per block instead of two all-reduces") {
  // Per block: the row-parallel outputs (wo, w2) reduce-scattered onto the
  // sequence shards, the two normed activations all-gathered before the
  // column-parallel linears; plus the final norm's output gathered for the
  // replicated LM head. Same bytes per block as plain TP's all-reduces.
  for (int64_t n : {2, 4}) {
    INFO("tp " << n);
    auto tp = tally(compileOrFail("llama", example("llama_tp.json"), {n}).program);
    auto sp = tally(compileOrFail("llama", example("llama_tp_sp.json"), {n}).program);
    REQUIRE(tp.size() == 1);
    CHECK(tp["all_reduce"].count == 4);
    REQUIRE(sp.size() == 2);
    CHECK(sp["reduce_scatter"].count == 4);
    CHECK(sp["all_gather"].count == 5);
    int64_t act = 2 * 16 * 64 * 4;  // one [2, 16, 64] f32 activation
    int64_t ring = act * (n - 1) / n;
    CHECK(sp["reduce_scatter"].bytes == 4 * ring);
    CHECK(sp["all_gather"].bytes == 5 * ring);
    CHECK(sp["reduce_scatter"].bytes + sp["all_gather"].bytes - ring == tp["all_reduce"].bytes);
  }
}

TEST_CASE("llama_train under SP: the forward's pattern and its mirror image in the backward") {
  // llama_train_t214 (torch 2.14's export) spells the embedding's backward
  // with clamped indices; the same collectives come out.
  // Backward per block: the residual gradient all-gathered before each
  // row-parallel linear's backward, the normed activations' gradients
  // reduce-scattered; the embedding's output gradient all-gathered (the
  // backward of scattering it); the five norm weights' gradients, now sums
  // over sequence shards, all-reduced (one bucket).
  for (const std::string m : {"llama_train", "llama_train_t214"})
    for (int64_t n : {2, 4}) {
      INFO(m << " at tp " << n);
      auto tp = tally(compileOrFail(m, example("llama_tp.json"), {n}).program);
      auto sp = tally(compileOrFail(m, example("llama_tp_sp.json"), {n}).program);
      CHECK(tp["all_reduce"].count == 8);
      REQUIRE(sp.size() == 3);
      CHECK(sp["reduce_scatter"].count == 4 + 4);
      CHECK(sp["all_gather"].count == 5 + 4 + 1);
      CHECK(sp["all_reduce"].count == 1);
      int64_t ring = 2 * 16 * 64 * 4 * (n - 1) / n;
      CHECK(sp["reduce_scatter"].bytes == 8 * ring);
      CHECK(sp["all_gather"].bytes == 10 * ring);
      CHECK(sp["all_reduce"].bytes == 2 * (5 * 64 * 4) * (n - 1) / n);
    }
}

TEST_CASE("SP from a tp_plan's sequence_parallel style compiles as the sequence_parallel key") {
  TempDir dir;
  std::string plan = dir.file("plan.json"), key = dir.file("key.json");
  std::ofstream(plan) << R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
      "tp_plan": {"layers.*.w[qkv13]": "colwise", "layers.*.w[o2]": "rowwise",
                  "layers.*.attn_norm": "sequence_parallel", "norm": "sequence_parallel"}})js";
  std::ofstream(key) << R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
      "sequence_parallel": {"axis": "tp", "dim": 1},
      "tp_plan": {"layers.*.w[qkv13]": "colwise", "layers.*.w[o2]": "rowwise"}})js";
  auto a = compileOrFail("llama_train", plan, {2});
  auto b = compileOrFail("llama_train", key, {2});
  CHECK(tally(a.program) == tally(b.program));
  CHECK(a.program.graph.graph.nodes().size() == b.program.graph.graph.nodes().size());
  auto spNote = [](const std::vector<std::string>& notes) {
    for (const std::string& n : notes)
      if (n.starts_with("sequence parallelism")) return n;
    return std::string("no sequence parallelism note");
  };
  CHECK_THAT(spNote(a.notes),
             Catch::StartsWith("sequence parallelism on 'tp' (tp_plan/layers.*.attn_norm): 5 "
                               "residual-stream values and 4 block outputs sharded on dim 1"));
  CHECK_THAT(spNote(b.notes), Catch::Contains("sharded on dim 1 (given)"));
}

TEST_CASE("SP on a 2x2 dp x tp mesh keeps the batch sharded over dp") {
  TempDir dir;
  std::string s = dir.file("s.json");
  std::ofstream(s) << R"js({"version": 1, "mesh": {"shape": [2, 2], "axes": ["dp", "tp"]},
      "sequence_parallel": "tp",
      "params": [{"match": "*layers.*.w[qkv13].weight", "placements": {"tp": "S(0)"}},
                 {"match": "*layers.*.w[o2].weight", "placements": {"tp": "S(1)"}}],
      "inputs": [{"match": "*", "placements": {"dp": "S(0)"}}]})js";
  auto r = compileOrFail("llama", s, {2, 2});
  int tpCollectives = 0;
  for (const auto& c : r.program.collectives) {
    INFO(c.kind << " " << c.value << " " << c.from << " -> " << c.to);
    if (c.axis == "dp") {  // only the logits' batch, for the replicated output
      CHECK(c.kind == "all_gather");
      CHECK(c.from == "[S(0), R]");
      continue;
    }
    ++tpCollectives;
    CHECK(c.from.rfind("[S(0), ", 0) == 0);  // the batch stays split over dp
    CHECK((c.to == "[S(0), S(1)]" || c.to == "[S(0), R]"));
  }
  CHECK(tpCollectives == 4 + 5);
}

TEST_CASE("SP refuses what it cannot do, naming the schema and the fix") {
  TempDir dir;
  auto error = [&](const std::string& m, const std::string& text, std::vector<int64_t> mesh) {
    std::string s = dir.file("s.json");
    std::ofstream(s, std::ios::trunc) << text;
    auto r = compileModel(m, s, std::move(mesh));
    REQUIRE_FALSE(r);
    return r.status().message();
  };
  std::string s = dir.file("s.json");
  CHECK_THAT(
      error("llama", R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
                                  "sequence_parallel": "sp"})js",
            {2}),
      Catch::EndsWith(s + ": /sequence_parallel: the mesh 2 (tp) has no axis 'sp' (axes: tp); name the "
                          "tensor-parallel axis"));
  CHECK_THAT(error("mlp", R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
                                "sequence_parallel": "tp"})js",
                   {2}),
             Catch::Contains(s + ": /sequence_parallel: sequence parallelism: found no transformer block") &&
                 Catch::EndsWith("to run tensor parallelism without it"));
  CHECK_THAT(error("llama", R"js({"version": 1, "mesh": {"shape": [2], "axes": ["tp"]},
                                  "sequence_parallel": {"axis": "tp", "dim": 2}})js",
                   {2}),
             Catch::Contains("dim 2 is not a sequence dim of the residual stream %embedding f32[2, 16, 64]"));
  // A sequence that does not divide is no refusal: it splits as torch.chunk
  // (dim 0 of size 2 over 4: 1, 1, 0, 0; tests/e2e/hf_llama_sp_lp.py --seq 7
  // checks the numbers).
  std::ofstream(s, std::ios::trunc) << R"js({"version": 1, "mesh": {"shape": [4], "axes": ["tp"]},
                                  "sequence_parallel": {"axis": "tp", "dim": 0}})js";
  CHECK(compileModel("llama", s, {4}).hasValue());
}

TEST_CASE(
    "saved activations: SP keeps less of llama_train's forward for its backward; no loss, nothing counted") {
  // scripts/sp_activation_table.py --check (ctest sp_activation_table) checks
  // the exact per-layer figures of a GPT block against a term-by-term count.
  for (int64_t n : {2, 4}) {
    INFO("tp " << n);
    auto tp =
        passes::estimateSavedActivations(compileOrFail("llama_train", example("llama_tp.json"), {n}).program);
    auto sp = passes::estimateSavedActivations(
        compileOrFail("llama_train", example("llama_tp_sp.json"), {n}).program);
    CHECK(tp.trainStep);
    CHECK(sp.savedBytes < tp.savedBytes);
    CHECK(sp.savedBytes > 0);
  }
  auto fwd =
      passes::estimateSavedActivations(compileOrFail("llama", example("llama_tp_sp.json"), {2}).program);
  CHECK_FALSE(fwd.trainStep);
  CHECK(fwd.savedBytes == 0);
}
