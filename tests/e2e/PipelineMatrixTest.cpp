// Pipeline parallelism on the issue's mesh matrix, several AdamW steps
// (pp 4, pp x dp, pp x fsdp, pp x tp against one worker), the same with
// SGD to show that what differs is rounding, and --schema auto choosing a
// pipeline over a pp axis against eager. Each case is hidden ([.]) and run
// by its own ctest entry (e2e_pipeline_matrix, _rounding, _auto).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "PipelineTestUtil.h"
#include "autoshard/AutoShard.h"

using namespace spmd;
using spmd::testing::modelDir;
using spmd::testing::TempDir;
using namespace spmd::testing::pipeline_e2e;

namespace {

// Steps of `model` under `schemaJson` with SGD (which, unlike Adam, does
// not amplify rounding) give one worker's losses and weights within 1 ulp
// (of the loss, of each weight's largest element), and the last step's
// gradients within 8 (measured: 6.6; each partial sum over microbatches,
// dp ranks or tp shards rounds once more): what the pipelined AdamW steps
// differ by is the order of those sums.
void checkOnlyRounding(const std::string& model, const std::string& schemaJson, int steps) {
  INFO(model << " " << schemaJson << " with SGD");
  passes::OptimizerOptions sgd;
  sgd.kind = "sgd";
  sgd.lr = 0.05;
  auto [piped, single] = pipedAndSingle(model, schemaJson, steps, sgd);
  const double ulp = std::numeric_limits<float>::epsilon();
  for (size_t i = 0; i < piped.losses.size(); ++i) {
    INFO("step " << i << ": " << piped.losses[i] << " vs " << single.losses[i]);
    CHECK(std::abs(piped.losses[i] - single.losses[i]) <= ulp * std::abs(single.losses[i]));
  }
  CHECK(piped.losses.back() < piped.losses.front());
  for (const auto& [name, want] : single.outputs) {
    INFO("output " << name);
    REQUIRE(piped.outputs.count(name));
    double scale = want.abs().max().item<double>();
    double diff = (piped.outputs.at(name).to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
    bool weight = name.starts_with("parameter.");
    INFO((weight ? "weight" : "gradient") << ": " << diff / (ulp * scale) << " ulp");
    CHECK(diff <= (weight ? 1 : 8) * ulp * scale);
  }
}

std::string pipeSchema(const std::string& inner, const std::string& schedule) {
  std::string pipe = R"({"microbatches": 2, "stages": 2, "schedule": ")" + schedule + "\"" +
                     (schedule == "1f1b" ? "}" : R"(, "virtual_stages": 2})");
  std::string axes = inner == "tp" ? R"(["pp", "tp"])" : R"(["pp", "dp"])";
  std::string rest = inner == "tp" ? kLlamaTp : R"("preset": ")" + inner + R"(", )";
  return schemaText("[2, 2]", axes, pipe, rest);
}

}  // namespace

// The meshes of the issue's matrix beyond pp 2 alone (above; against
// torch.distributed.pipelining and eager in pipeline_vs_torch): 3 AdamW
// steps of llama_pipe_train on 4 workers, pp 2 x dp 2 and pp 2 x Megatron
// tp 2 under 1F1B (2 stages of 4 layers) and interleaved 1F1B (2 ranks of
// 2 virtual stages), pp 2 x fsdp 2 under interleaved 1F1B (1F1B: mlp_train
// above), 2 microbatches; and pp 4 (1F1B, 4 microbatches: PyTorch's
// Schedule1F1B takes no fewer than its stages). The losses match one
// worker's within 1e-5, the weights within 1e-4, not 1e-5: a gradient
// summed over 4 pieces (2 microbatches x 2 dp ranks, 4 microbatches) or
// over tp shards rounds otherwise than one worker's, and Adam, which
// divides by the root of the squared gradient, amplifies that to at most
// 2.4e-5 after 3 steps (1F1B and interleaved alike, bit for bit). That
// rounding is all: the next test case. pp x dp with an optimizer used to
// be refused: the backward's seed reads the loss before its all-reduce
// over dp, which the placer did not take for the loss, so a weight's
// gradient landed on the next stage. Hidden ([.]): ctest runs it alone as
// e2e_pipeline_matrix, to keep each ctest entry under a minute.
const std::vector<std::string>& matrixSchemas() {
  static const std::vector<std::string> schemas = {
      schemaText("[4]", R"(["pp"])", R"({"microbatches": 4, "stages": 4})"),
      pipeSchema("dp", "1f1b"),
      pipeSchema("tp", "1f1b"),
      pipeSchema("dp", "interleaved-1f1b"),
      pipeSchema("fsdp", "interleaved-1f1b"),
      pipeSchema("tp", "interleaved-1f1b")};
  return schemas;
}

TEST_CASE("three AdamW steps on pp 4, pp x dp, pp x fsdp and pp x tp give one worker's losses and weights",
          "[.][matrix]") {
  for (const std::string& schema : matrixSchemas()) checkAdamwSteps(kPipeModel, schema, 3, 1e-4);
}

// The same meshes under 1F1B with SGD: one worker's losses and weights
// within 1 ulp, so the AdamW drift above is summation order only. Hidden:
// ctest's e2e_pipeline_rounding.
TEST_CASE("SGD steps on pp 4, pp x dp and pp x tp differ from one worker's by rounding only",
          "[.][rounding]") {
  for (size_t i = 0; i < 3; ++i) checkOnlyRounding(kPipeModel, matrixSchemas()[i], 3);
}

// --schema auto with a pipeline axis (autoshard/PipelineSearch.h):
// llama_pipe_train on 2 x 1 ranks (axes pp, dp) under a per-rank budget
// that no layout without a pipeline meets, even recomputing every layer
// (nor on 2 data-parallel ranks), picks a 1F1B pipeline over pp, the
// microbatch count that fits (8 of 2, 4, 8: the activations in flight
// shrink with it), says why in its summary, and the program it chose
// gives eager's loss and gradients, its measured peak within the budget
// and the modeled peak within 10% of it. Without a pp axis nothing changes.
// Hidden: ctest's e2e_pipeline_auto.
TEST_CASE("schema auto pipelines over a pp axis when only a pipeline fits the budget", "[.][auto]") {
  const std::string model = "../pipeline/llama_pipe_train";
  autoshard::AutoOptions o;
  o.mesh = *sharding::Mesh::create({2, 1}, {"pp", "dp"});
  o.memoryBudget = 2'700'000;
  o.isolate = false;
  auto r = autoshard::autoShard(modelDir(model) + "/model.pt2", o);
  if (!r) FAIL(r.status().message());
  REQUIRE(r->chosen.schema.pipeline.has_value());
  CHECK(r->chosen.schema.pipeline->schedule == "1f1b");
  CHECK(r->chosen.schema.pipeline->microbatches == 8);
  CHECK(r->chosen.cost.peakBytes <= *o.memoryBudget);
  REQUIRE(r->pipelineTried.size() == 4);  // no pipeline, then 2, 4, 8 microbatches
  CHECK(r->pipelineTried[0].microbatches == 0);
  CHECK(r->pipelineTried[0].error.find("no layout fits the memory budget") != std::string::npos);
  const autoshard::PipelineTried& eight = r->pipelineTried[3];
  CHECK(eight.bubble == Approx(1.0 / 9));  // (p - 1) / (m + p - 1)
  CHECK(eight.p2pBytesPerStep > 0);
  std::string summary;
  for (const std::string& line : autoshard::autoSummaryLines(*r, o.memoryBudget)) summary += line + "\n";
  INFO(summary);
  CHECK(summary.find("1f1b pipeline, 8 microbatches (chosen)") != std::string::npos);
  CHECK(summary.find("bubble 11.1%") != std::string::npos);
  CHECK(summary.find("no pipeline: --schema auto: no layout fits") != std::string::npos);

  // The same budget on 2 ranks without a pp axis: refused as before.
  autoshard::AutoOptions flat = o;
  flat.mesh = *sharding::Mesh::create({2}, {"dp"});
  auto none = autoshard::autoShard(modelDir(model) + "/model.pt2", flat);
  REQUIRE_FALSE(none.hasValue());
  CHECK(none.status().message().find("no layout fits the memory budget") != std::string::npos);
  flat.memoryBudget.reset();
  auto plain = autoshard::autoShard(modelDir(model) + "/model.pt2", flat);
  REQUIRE(plain.hasValue());
  CHECK(plain->pipelineTried.empty());
  CHECK_FALSE(plain->chosen.schema.pipeline.has_value());

  TempDir dir;
  program::LoadedProgram program =
      compileToProgram(model, autoshard::schemaJson(r->chosen.schema, ""), dir.file("p.spmd"));
  std::vector<runtime::RankResult> ranks = runRanks(program, model, {});
  auto expected = runtime::readTensors(modelDir(model) + "/expected.safetensors");
  REQUIRE(expected.hasValue());
  spmd::testing::checkOutputs(ranks[0].outputs, *expected, 1e-5);
  REQUIRE(ranks[0].losses.size() == 1);
  CHECK(std::abs(ranks[0].losses[0] - expected->at("loss").item<double>()) <= 1e-5);
  int64_t measured = 0;
  for (const auto& rank : ranks) {
    UNSCOPED_INFO("rank peak " << rank.memory.peakBytes << " B, state " << rank.memory.stateBytes << " B");
    measured = std::max(measured, rank.memory.peakBytes);
  }
  INFO("modeled peak " << r->chosen.cost.peakBytes << " B, measured " << measured << " B");
  // Modeled 2,478,976 B, measured 2,556,996 B on rank 0 (1,748,490 and
  // 1,818,324 on rank 1): the model is 3-4% low, within the budget's margin.
  CHECK(measured <= *o.memoryBudget);
  CHECK(std::abs(measured - r->chosen.cost.peakBytes) <= measured / 10);
}
