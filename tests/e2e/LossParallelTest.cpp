// Loss parallelism end to end: llama_train with a column-parallel lm_head
// (testdata/schemas/llama_loss_parallel.json) keeps its logits sharded on
// the vocabulary through the cross-entropy: no all-gather of the
// [tokens, vocab] logits, the report says so, and loss and gradients match
// PyTorch's (one step) and one worker's losses (5 AdamW steps) on tp 2 and 4.
#include <algorithm>

#include "../TestUtil.h"
#include "../rules/RuleTestUtil.h"
#include "E2eUtil.h"
#include "passes/ExpandLossParallel.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::adamw;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

namespace {

const char* kSchema = "testdata/schemas/llama_loss_parallel.json";

passes::CompileResult compileLlama(const std::string& schemaPath, std::vector<int64_t> mesh) {
  auto archive = pt2::readArchive(modelDir("llama_train") + "/model.pt2");
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(std::string(SPMD_SOURCE_DIR) + "/" + schemaPath);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::move(mesh);
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

runtime::RankResult run(const std::string& schema, std::vector<int64_t> mesh, int steps) {
  TempDir dir;
  compileTo("llama_train", schema, std::move(mesh), dir.file("p.spmd"), adamw());
  auto program = program::readProgram(dir.file("p.spmd"));
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir("llama_train") + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::RankOptions opts;
  opts.steps = steps;
  auto r = runtime::runThreaded(*program, *in, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

}  // namespace

TEST_CASE("loss parallel: llama_train's logits stay vocab-sharded through the cross-entropy",
          "[e2e][loss_parallel]") {
  for (int64_t tp : {2, 4}) {
    INFO("tp " << tp);
    passes::CompileResult r = compileLlama(kSchema, {tp});
    const auto& cs = r.program.collectives;
    // The logits f32[32, 256] (view_54) and the log-probabilities are never gathered.
    CHECK(std::none_of(cs.begin(), cs.end(), [](const program::CollectiveRecord& c) {
      return c.kind == "all_gather" && (c.value == "view_54" || c.value == "_log_softmax");
    }));
    CHECK(std::none_of(cs.begin(), cs.end(), [](const auto& c) { return c.kind == "all_gather"; }));
    // The backward's one-hot row sum (sum_3) is computed, not all-reduced.
    CHECK(std::none_of(cs.begin(), cs.end(), [](const auto& c) { return c.value == "sum_3"; }));
    // Forward: a max and a sum all-reduce of f32[32, 1] (128 B); the pick's pending sum.
    auto lossParallel = std::count_if(cs.begin(), cs.end(), [](const program::CollectiveRecord& c) {
      return c.consumer.find("loss parallel") != std::string::npos;
    });
    CHECK(lossParallel == 2);
    bool noted = std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
      return n.find("loss parallel: node %_log_softmax") != std::string::npos &&
             n.find("on the class shards over tp") != std::string::npos;
    });
    CHECK(noted);
  }
  // Without the lm_head sharded nothing changes: no note, the usual layout.
  passes::CompileResult plain = compileLlama("testdata/schemas/llama_vocab_tp.json", {2});
  CHECK(std::none_of(plain.notes.begin(), plain.notes.end(),
                     [](const std::string& n) { return n.find("loss parallel") != std::string::npos; }));
}

TEST_CASE("loss parallel: the first step's loss and gradients match PyTorch's on tp 2 and 4",
          "[e2e][loss_parallel]") {
  auto exp = runtime::readTensors(modelDir("llama_train") + "/expected.safetensors");
  REQUIRE(exp.hasValue());
  for (int64_t tp : {2, 4}) {
    INFO("tp " << tp);
    spmd::testing::checkOutputs(run(kSchema, {tp}, 1).outputs, *exp, 1e-5);
  }
}

TEST_CASE("loss parallel: 5 AdamW steps give one worker's losses on tp 2 and 4", "[e2e][loss_parallel]") {
  std::vector<double> one = run("dp", {1}, 5).losses;
  REQUIRE(one.size() == 5);
  for (int64_t tp : {2, 4}) {
    std::vector<double> got = run(kSchema, {tp}, 5).losses;
    REQUIRE(got.size() == one.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("tp " << tp << " step " << i << ": " << got[i] << " vs " << one[i]);
      CHECK(std::abs(got[i] - one[i]) <= 1e-5 * std::abs(one[i]));
    }
  }
}

TEST_CASE("loss parallel: the report says why vocab-sharded logits are gathered", "[e2e][loss_parallel]") {
  using spmd::testing::TestGraph;
  auto mesh = sharding::Mesh::create({2}, {"tp"});
  REQUIRE(mesh.hasValue());
  auto notesOf = [&](const TestGraph& g) {
    spmd::testing::Placements p(g.program(), {{"x", "S(1)"}}, 2);
    return passes::lossParallelNotes(g.program(), p.result(), *mesh);
  };
  {
    // The undecomposed nll_loss_forward: not handled on shards, the note says how to export.
    TestGraph g;
    ir::Value* x = g.input("x", {8, 16});
    ir::Value* t = g.input("t", {8}, ir::ScalarType::Long);
    g.node("aten.nll_loss_forward.default",
           {{"self", ir::Argument::tensor(x)},
            {"target", ir::Argument::tensor(t)},
            {"reduction", ir::Argument::integer(1)},
            {"ignore_index", ir::Argument::integer(-100)}},
           {{"loss", {}}, {"tw", {}}});
    auto notes = notesOf(g);
    REQUIRE(notes.size() == 1);
    CHECK(
        notes[0] ==
        "loss parallel: node %n0 (aten.nll_loss_forward.default) on %x f32[8, 16] [S(1)]: not applied, the "
        "logits are gathered on tp: spmdc computes loss parallelism on the decomposed form "
        "(aten._log_softmax.default, then aten.gather.default or the decomposed nll); export the train step "
        "with core ATen decompositions (ExportedProgram.run_decompositions())");
  }
  {
    TestGraph g;
    ir::Value* x = g.input("x", {8, 16});
    g.node("aten._log_softmax.default",
           {{"self", ir::Argument::tensor(x)},
            {"dim", ir::Argument::integer(-1)},
            {"half_to_float", ir::Argument::boolean(false)}},
           {{"y", {8, 16}}});
    auto notes = notesOf(g);
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("log-softmax on the class shards over tp") != std::string::npos);
  }
}
