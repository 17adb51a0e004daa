// Pipeline parallelism end to end: train steps cut into stages, run on
// simulated ranks with point-to-point sends, give one device's loss and
// gradients (expected.safetensors, from PyTorch eager) under pp alone and
// with dp, fsdp and Megatron TP inside the stages, for GPipe and 1F1B; the
// verifier refuses a schedule that deadlocks; bad requests are one line.
// Each rank holds only its stage's weights, and stage 0's measured
// activation peak is m microbatches' under GPipe, pp under 1F1B.
#include <map>
#include <vector>

#include "PipelineTestUtil.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "pipeline/StageGraphs.h"
#include "pipeline/Verify.h"
#include "program/PipelineText.h"
#include "program/ProgramJson.h"
#include "program/Reader.h"
#include "program/Writer.h"
#include "runtime/TensorIO.h"
#include "runtime/Worker.h"
#include "schema/PlacementSchema.h"

using namespace spmd;
using spmd::testing::modelDir;
using spmd::testing::TempDir;
using namespace spmd::testing::pipeline_e2e;

namespace {

int64_t bytesOf(const ir::Value& v) {
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

// Bytes of stage 0's gradient accumulators (one per parameter it owns).
int64_t accumulatorBytes(const program::Program& p) {
  int64_t out = 0;
  for (const auto& n : p.graph.graph.nodes())
    if (pipeline::isAccumulation(p, *n) && p.pipeline->places[static_cast<size_t>(n->index())].stage == 0)
      out += bytesOf(*n->outputValues()[0]);
  return out;
}

// Bytes one microbatch's forward on stage 0 leaves for its backward: the
// storages of the values its backward reads (a view counts as the tensor it
// views; views of weights and inputs cost nothing).
int64_t stashBytes(const program::Program& p) {
  auto g = pipeline::stageGraphs(p, 0);
  REQUIRE(g.hasValue());
  std::set<const ir::Value*> roots;
  for (const std::string& name : g->forward.outputs) {
    const ir::Value* v = p.graph.graph.findValue(name);
    bool stashed = false;
    for (const ir::Node* u : v->users()) {
      const program::PipelinePlace& at = p.pipeline->places[static_cast<size_t>(u->index())];
      stashed |= at.stage == 0 && at.phase == program::PipelinePlace::Phase::Backward;
    }
    while (stashed && v->producer() && passes::isViewOp(v->producer()->target()))
      v = v->producer()->inputValues().at(0);
    if (stashed && v->producer()) roots.insert(v);
  }
  int64_t out = 0;
  for (const ir::Value* v : roots) out += bytesOf(*v);
  return out;
}

}  // namespace

TEST_CASE("pipelined train steps give one device's loss and gradients") {
  struct Case {
    std::string model, schema;
  };
  std::vector<Case> cases = {
      {"llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "schedule": "1f1b"})")},
      {"llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "schedule": "gpipe"})")},
      {"llama_train", schemaText("[2, 2]", R"(["pp", "tp"])", R"({"microbatches": 2})", kLlamaTp)},
      {"mlp_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 4, "stages": ["mlp.fc2"]})")},
      {"mlp_train", schemaText("[2, 2]", R"(["pp", "dp"])", R"({"microbatches": 4, "stages": ["mlp.fc2"]})",
                               R"("preset": "dp", )")},
      {"mlp_train", schemaText("[2, 2]", R"(["pp", "dp"])",
                               R"({"microbatches": 2, "stages": ["mlp.fc2"], "schedule": "gpipe"})",
                               R"("preset": "fsdp", )")},
      {"resmlp_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 4})")},
      {"../pipeline/llama_pipe_train",
       schemaText("[2, 2]", R"(["pp", "dp"])",
                  R"({"microbatches": 2, "stages": 2, "schedule": "interleaved-1f1b", "virtual_stages": 2})",
                  R"("preset": "fsdp", )")},
      // Interleaved 1F1B with dp, and with Megatron TP, inside the stages (4 workers).
      {"../pipeline/llama_pipe_train",
       schemaText("[2, 2]", R"(["pp", "dp"])",
                  R"({"microbatches": 4, "stages": 2, "schedule": "interleaved-1f1b", "virtual_stages": 2})",
                  R"("preset": "dp", )")},
      {"../pipeline/llama_pipe_train",
       schemaText("[2, 2]", R"(["pp", "tp"])",
                  R"({"microbatches": 4, "stages": 2, "schedule": "interleaved-1f1b", "virtual_stages": 2})",
                  kLlamaTp)},
  };
  for (const auto& c : cases) {
    INFO(c.model << " " << c.schema);
    runtime::RankResult r = compileAndRun(c.model, c.schema);
    auto expected = runtime::readTensors(modelDir(c.model) + "/expected.safetensors");
    REQUIRE(expected.hasValue());
    spmd::testing::checkOutputs(r.outputs, *expected, 1e-5);
    REQUIRE(r.losses.size() == 1);
    CHECK(std::abs(r.losses[0] - expected->at("loss").item<double>()) <= 1e-5);
  }
}

TEST_CASE("four stages of a 32-layer Llama give one device's gradients") {
  runtime::RankResult r = compileAndRun(
      "llama_deep_train", schemaText("[4]", R"(["pp"])", R"({"microbatches": 2, "stages": 4})"));
  auto expected = runtime::readTensors(modelDir("llama_deep_train") + "/expected.safetensors");
  REQUIRE(expected.hasValue());
  spmd::testing::checkOutputs(r.outputs, *expected, 1e-5);
}

TEST_CASE("each pipeline rank loads only the weights its stage reads") {
  TempDir dir;
  program::LoadedProgram program = compileToProgram(
      "llama_deep_train", schemaText("[4]", R"(["pp"])", R"({"microbatches": 2, "stages": 4})"),
      dir.file("p.spmd"));
  int64_t total = 0;
  for (const auto& w : program.program().weights) {
    int64_t n = ir::elementSize(w.dtype);
    for (int64_t d : w.localShape) n *= d;
    total += n;
  }
  std::vector<runtime::RankResult> ranks = runRanks(program, "llama_deep_train", {});
  REQUIRE(ranks.size() == 4);
  // What each rank held before its first step (MemoryMeter): its weights,
  // plus its copies of the two tiny token batches (4 x 256 bytes).
  int64_t held = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    int64_t state = ranks[r].memory.stateBytes;
    INFO("rank " << r << " held " << state << " of the model's " << total << " bytes");
    // Eight of the 32 layers each, plus the embedding (stage 0) or the
    // final norm and head (stage 3): nowhere near the whole model.
    CHECK(state > total / 8);
    CHECK(state < total * 4 / 10);
    held += state;
  }
  // Every weight on exactly one stage (up to the input batches).
  CHECK(held >= total);
  CHECK(held <= total + 4 * 4096);
  auto expected = runtime::readTensors(modelDir("llama_deep_train") + "/expected.safetensors");
  REQUIRE(expected.hasValue());
  spmd::testing::checkOutputs(ranks[0].outputs, *expected, 1e-5);
}

TEST_CASE("five AdamW steps through 1F1B stages give one worker's losses and weights") {
  checkAdamwSteps("llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2})"), 5);
}

// fsdp inside the stages: a bias's shard is read by the microbatches (its
// all-gather) and by AdamW's step; both must compile and match.
TEST_CASE("five AdamW steps of pp x fsdp give one worker's losses and weights") {
  for (const std::string schedule : {"1f1b", "gpipe"})
    checkAdamwSteps(
        "mlp_train",
        schemaText("[2, 2]", R"(["pp", "dp"])",
                   R"({"microbatches": 2, "stages": ["mlp.fc2"], "schedule": ")" + schedule + R"("})",
                   R"("preset": "fsdp", )"),
        5);
}

namespace {

// llama_pipe_train (8 layers) on 2 pipeline ranks of 2 virtual stages each.
std::string interleavedSchema(int64_t microbatches = 4, const std::string& rest = "") {
  return schemaText("[2]", R"(["pp"])",
                    R"({"microbatches": )" + std::to_string(microbatches) +
                        R"(, "stages": 2, "schedule": "interleaved-1f1b", "virtual_stages": 2})",
                    rest);
}

}  // namespace

TEST_CASE("interleaved 1F1B over 2 ranks of 2 virtual stages gives eager's gradients and AdamW steps") {
  TempDir dir;
  program::LoadedProgram program = compileToProgram(kPipeModel, interleavedSchema(), dir.file("p.spmd"));
  const program::PipelinePlan& plan = *program.program().pipeline;
  REQUIRE(plan.virtualStages == 2);
  REQUIRE(plan.actions.size() == 2);
  for (const auto& list : plan.actions) CHECK(list.size() == 2 * 2 * 4);
  // Layers 0-1 with the embedding on virtual stage 0, 6-7 with the head on 3.
  std::set<int64_t> used;
  for (const auto& place : plan.places) used.insert(place.stage);
  CHECK(used == std::set<int64_t>{-1, 0, 1, 2, 3});
  CHECK_THAT(program::scheduleTable(plan),
             Catch::StartsWith("rank 0: 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 "));
  std::vector<runtime::RankResult> ranks = runRanks(program, kPipeModel, {});
  auto expected = runtime::readTensors(modelDir(kPipeModel) + "/expected.safetensors");
  REQUIRE(expected.hasValue());
  spmd::testing::checkOutputs(ranks[0].outputs, *expected, 1e-5);
  REQUIRE(ranks[0].losses.size() == 1);
  CHECK(std::abs(ranks[0].losses[0] - expected->at("loss").item<double>()) <= 1e-5);
  // 2 microbatches: 4 (or 8) sum each gradient in another order than one
  // worker, which 3 AdamW steps amplify to 1.7e-5 (1F1B alike).
  checkAdamwSteps(kPipeModel, interleavedSchema(2), 3);
}

TEST_CASE("the verifier refuses an interleaved schedule that deadlocks; bad interleaved requests") {
  auto r = compileWith(kPipeModel, interleavedSchema());
  if (!r) FAIL(r.status().message());
  program::Program& p = r->program;
  CHECK(pipeline::verifyPipeline(p).isOk());
  // Rank 0 runs virtual stage 2's first forward before stage 0's: it waits
  // for rank 1's stage 1, which waits for rank 0's stage 0.
  auto& list = p.pipeline->actions[0];
  auto at = std::find(list.begin(), list.end(),
                      program::PipelineAction{program::PipelineAction::Kind::Forward, 0, 2});
  REQUIRE(at != list.end());
  std::rotate(list.begin(), at, at + 1);
  Status st = pipeline::verifyPipeline(p);
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Contains("deadlocks: rank 0 waits at 2F0 for 1F0 of stage 1 (rank 1); "
                                           "rank 1 waits at 1F0 for 0F0 of stage 0 (rank 0)"));
  // An action on a stage of another rank.
  list.front().stage = 1;
  CHECK_THAT(pipeline::verifyPipeline(p).message(), Catch::Contains("stage 1 does not run on rank 0"));
  auto error = [](const std::string& schema) {
    auto bad = compileWith(kPipeModel, schema);
    REQUIRE_FALSE(bad.hasValue());
    CHECK(bad.status().message().find('\n') == std::string::npos);
    return bad.status().message();
  };
  // PyTorch's ScheduleInterleaved1F1B refuses 5 microbatches on 2 ranks too.
  CHECK_THAT(error(interleavedSchema(5)), Catch::Contains("5 microbatches do not fit"));
  CHECK_THAT(error(schemaText("[2]", R"(["pp"])", R"({"microbatches": 4, "virtual_stages": 2})")),
             Catch::Contains("needs \"schedule\": \"interleaved-1f1b\""));
  CHECK_THAT(
      error(schemaText(
          "[2]", R"(["pp"])",
          R"({"microbatches": 4, "stages": ["model.layers.4"], "schedule": "interleaved-1f1b", "virtual_stages": 2})")),
      Catch::Contains(
          "1 module boundaries make 2 stages, but the mesh's 'pp' axis has 2 ranks of 2 virtual stages"));
}

TEST_CASE("the pipeline verifier refuses a schedule that deadlocks, naming stages and actions") {
  auto r = compileWith("llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2})"));
  REQUIRE(r.hasValue());
  using Kind = program::PipelineAction::Kind;
  program::Program& p = r->program;
  CHECK(pipeline::verifyPipeline(p).isOk());
  // Stage 0 waits for B0 from stage 1, which waits for F1 from stage 0.
  p.pipeline->actions[0] = {{Kind::Forward, 0}, {Kind::Backward, 0}, {Kind::Forward, 1}, {Kind::Backward, 1}};
  p.pipeline->actions[1] = {{Kind::Forward, 0}, {Kind::Forward, 1}, {Kind::Backward, 0}, {Kind::Backward, 1}};
  Status st = pipeline::verifyPipeline(p);
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Contains("deadlocks: stage 0 waits at B0 for B0 of stage 1; "
                                           "stage 1 waits at F1 for F1 of stage 0"));
  // A plan that skips a microbatch's backward, or runs it first.
  p.pipeline->actions[1] = {{Kind::Forward, 0}, {Kind::Forward, 1}, {Kind::Backward, 0}};
  CHECK_THAT(pipeline::verifyPipeline(p).message(), Catch::Contains("does not run"));
  p.pipeline->actions[1] = {{Kind::Backward, 0}, {Kind::Forward, 0}, {Kind::Forward, 1}, {Kind::Backward, 1}};
  CHECK_THAT(pipeline::verifyPipeline(p).message(),
             Catch::Contains("stage 1 action B0 comes before the forward"));
  // The plan survives the program's JSON.
  auto json = program::programToJsonText(p);
  REQUIRE(json.hasValue());
  auto back = program::programFromJson(*json);
  REQUIRE(back.hasValue());
  CHECK(back->pipeline == p.pipeline);
}

TEST_CASE("zero-bubble splits each backward into I and W and gives eager's gradients") {
  std::string zb = R"({"microbatches": 2, "schedule": "zero-bubble"})";
  auto r = compileWith("llama_train", schemaText("[2]", R"(["pp"])", zb));
  if (!r) FAIL(r.status().message());
  program::Program& p = r->program;
  CHECK(pipeline::verifyPipeline(p).isOk());
  // PyTorch's ScheduleInterleavedZeroBubble on one stage per rank (ZB-H1).
  CHECK(program::scheduleTable(*p.pipeline) ==
        "stage 0: F0 F1 I0 W0 I1 W1\n"
        "stage 1: F0 I0 F1 I1 W0 W1\n");
  // Stage 1's I sends the gradient back; its W makes every weight gradient.
  std::vector<bool> input = pipeline::inputGradientNodes(p, 1);
  int64_t inI = 0, inW = 0;
  for (const auto& n : p.graph.graph.nodes()) {
    const auto& at = p.pipeline->places[static_cast<size_t>(n->index())];
    if (at.stage != 1 || at.phase != program::PipelinePlace::Phase::Backward) continue;
    (input[static_cast<size_t>(n->index())] ? inI : inW) += 1;
    for (const ir::Value* v : n->outputValues())
      for (const ir::Node* u : v->users())
        if (pipeline::isAccumulation(p, *u)) CHECK_FALSE(input[static_cast<size_t>(n->index())]);
  }
  CHECK(inI > 0);
  CHECK(inW > 0);
  // pp alone, and fsdp inside the stages.
  std::vector<std::pair<std::string, std::string>> cases = {
      {"llama_train", schemaText("[2]", R"(["pp"])", zb)},
      {"mlp_train", schemaText("[2, 2]", R"(["pp", "dp"])",
                               R"({"microbatches": 2, "stages": ["mlp.fc2"], "schedule": "zero-bubble"})",
                               R"("preset": "fsdp", )")}};
  for (const auto& [model, schema] : cases) {
    INFO(model << " " << schema);
    runtime::RankResult out = compileAndRun(model, schema);
    auto expected = runtime::readTensors(modelDir(model) + "/expected.safetensors");
    REQUIRE(expected.hasValue());
    spmd::testing::checkOutputs(out.outputs, *expected, 1e-5);
  }
  // 2 ranks of 2 virtual stages (ScheduleInterleavedZeroBubble's layout).
  std::string interleaved = interleavedSchema(4);
  interleaved.replace(interleaved.find("interleaved-1f1b"), 16, "zero-bubble");
  runtime::RankResult out = compileAndRun(kPipeModel, interleaved);
  auto expected = runtime::readTensors(modelDir(kPipeModel) + "/expected.safetensors");
  REQUIRE(expected.hasValue());
  spmd::testing::checkOutputs(out.outputs, *expected, 1e-5);
}

TEST_CASE("the verifier refuses a zero-bubble order that deadlocks or runs W before I") {
  using Kind = program::PipelineAction::Kind;
  auto r = compileWith("llama_train",
                       schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "schedule": "zero-bubble"})"));
  REQUIRE(r.hasValue());
  program::Program& p = r->program;
  CHECK(pipeline::verifyPipeline(p).isOk());
  // Stage 0 waits for stage 1's I0 (in its W0: the first stage's I has no
  // input gradient to make), which waits for stage 0's F1.
  p.pipeline->actions[0] = {{Kind::Forward, 0}, {Kind::Input, 0}, {Kind::Weight, 0},
                            {Kind::Forward, 1}, {Kind::Input, 1}, {Kind::Weight, 1}};
  p.pipeline->actions[1] = {{Kind::Forward, 0}, {Kind::Forward, 1}, {Kind::Input, 0},
                            {Kind::Weight, 0},  {Kind::Input, 1},   {Kind::Weight, 1}};
  CHECK_THAT(pipeline::verifyPipeline(p).message(),
             Catch::Contains("deadlocks: stage 0 waits at W0 for I0 of stage 1; "
                             "stage 1 waits at F1 for F1 of stage 0"));
  p.pipeline->actions[1] = {{Kind::Forward, 0}, {Kind::Weight, 0}, {Kind::Input, 0},
                            {Kind::Forward, 1}, {Kind::Input, 1},  {Kind::Weight, 1}};
  CHECK_THAT(pipeline::verifyPipeline(p).message(),
             Catch::Contains("stage 1 action W0 comes before the input gradients of its microbatch (I0)"));
  p.pipeline->actions[1][1] = {Kind::Backward, 0};
  CHECK_THAT(pipeline::verifyPipeline(p).message(),
             Catch::Contains("stage 1 action B0: zero-bubble runs I and W actions, not B"));
  // The plan survives the program's JSON (I and W in its text).
  auto json = program::programToJsonText(p);
  REQUIRE(json.hasValue());
  auto back = program::programFromJson(*json);
  REQUIRE(back.hasValue());
  CHECK(back->pipeline == p.pipeline);
}

TEST_CASE("bad pipeline requests are one line naming what to change") {
  auto error = [](const std::string& model, const std::string& schema) {
    auto r = compileWith(model, schema);
    REQUIRE_FALSE(r.hasValue());
    CHECK(r.status().message().find('\n') == std::string::npos);
    return r.status().message();
  };
  CHECK_THAT(error("llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 4})")),
             Catch::Contains("input 'tokens' has 2 rows"));
  CHECK_THAT(error("llama_train", schemaText("[2]", R"(["dp"])", R"({"microbatches": 2})")),
             Catch::Contains("has no axis 'pp'"));
  CHECK_THAT(error("llama_train",
                   schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "stages": ["model.nope"]})")),
             Catch::Contains("stage boundary 'model.nope': no parameter"));
  CHECK_THAT(error("llama_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "stages": 4})")),
             Catch::Contains("\"stages\": 4 but axis 'pp' has size 2"));
  CHECK_THAT(error("llama_train", schemaText("[4]", R"(["pp"])", R"({"microbatches": 2})")),
             Catch::Contains("4 stages, but the model has 2 layers under 'model.layers'"));
  CHECK_THAT(error("mlp", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "stages": ["fc2"]})")),
             Catch::Contains("no loss output"));
  CHECK_THAT(
      error("cnn_train", schemaText("[2]", R"(["pp"])", R"({"microbatches": 2, "stages": ["net.conv2"]})")),
      Catch::Contains("across the microbatches"));
}

// Stage 0's peak activation bytes A: its measured peak (MemoryMeter) less
// what it held before the first step (weights, input batches) and its
// gradient accumulators. GPipe runs every forward first, so at its peak it
// holds all m microbatches' stashes (X bytes each, from the program's
// types) plus one backward's temporaries T; 1F1B's stage 0 runs pp - 1
// warm-up forwards and then alternates, so it holds at most pp stashes plus
// the same T. With T = A_gpipe - m X (at most one microbatch's worth), 1F1B
// must keep A_1f1b - T <= (pp + 1/2) X, i.e. (pp + 1/2) / m of GPipe's
// stashes; and with T left in, A_1f1b <= (pp + 1) / m of A_gpipe.
TEST_CASE("1F1B keeps at most pp microbatches of activations alive on stage 0, GPipe all of them") {
  const std::string model = "../pipeline/llama_pipe_train";
  const int64_t m = 8;
  for (int64_t pp : {2, 4}) {
    std::map<std::string, int64_t> peak;
    int64_t micro = 0;
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      TempDir dir;
      program::LoadedProgram program =
          compileToProgram(model,
                           schemaText("[" + std::to_string(pp) + "]", R"(["pp"])",
                                      R"({"microbatches": 8, "stages": )" + std::to_string(pp) +
                                          R"(, "schedule": ")" + schedule + R"("})"),
                           dir.file("p.spmd"));
      std::vector<runtime::RankResult> ranks = runRanks(program, model, {});
      const runtime::RankMemory& mem = ranks[0].memory;
      peak[schedule] = mem.peakBytes - mem.stateBytes - accumulatorBytes(program.program());
      micro = stashBytes(program.program());
      auto expected = runtime::readTensors(modelDir(model) + "/expected.safetensors");
      REQUIRE(expected.hasValue());
      spmd::testing::checkOutputs(ranks[0].outputs, *expected, 1e-5);
    }
    INFO("pp " << pp << ": stage 0 activation peak GPipe " << peak["gpipe"] << " B, 1F1B " << peak["1f1b"]
               << " B; one microbatch's stash " << micro << " B");
    // GPipe: m microbatches' stashes, plus one backward's temporaries.
    CHECK(peak["gpipe"] >= m * micro);
    CHECK(peak["gpipe"] <= (m + 1) * micro);
    int64_t temporaries = peak["gpipe"] - m * micro;
    CHECK(peak["1f1b"] >= pp * micro);
    CHECK(2 * (peak["1f1b"] - temporaries) <= (2 * pp + 1) * micro);
    CHECK(peak["1f1b"] * m <= (pp + 1) * peak["gpipe"]);
  }
}
