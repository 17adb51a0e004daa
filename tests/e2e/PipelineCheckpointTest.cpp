// Checkpoints of pipelined runs: each stage's ranks save its weights and
// optimizer states into one checkpoint whose index has the mesh without the
// pipeline, so that a pipelined run resumes it under the same layout, a run
// without pipeline (fsdp) resumes it too, and a pipelined run resumes a
// plain checkpoint. Training N steps at once and k + (N - k) steps through a
// checkpoint give the same losses and final weights and optimizer states.
#include "../TestUtil.h"
#include "E2eUtil.h"
#include "runtime/Checkpoint.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::adamw;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::runCommand;
using spmd::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kRun = SPMD_RUN_PATH;

// Compiles model `m` under the schema JSON text `schemaJson` into `out`.
void compileSchemaText(const std::string& m, const std::string& schemaJson, const std::string& out,
                       const passes::OptimizerOptions& optimizer) {
  auto s = schema::parsePlacementSchema(schemaJson, "schema.json");
  if (!s) FAIL(s.status().message());
  passes::CompileOptions opts;
  opts.optimizer = optimizer;
  spmd::testing::compileSchemaTo(m, *s, opts, out);
}

// mlp_train cut after fc1 into 2 stages of 2 fsdp ranks, 4 microbatches.
const char* kPipelined = R"({"version": 1, "mesh": {"shape": [2, 2], "axes": ["pp", "dp"]}, "preset": "fsdp",
  "pipeline": {"axis": "pp", "stages": ["mlp.fc2"], "schedule": "1f1b", "microbatches": 4}})";

struct Run {
  std::vector<double> losses;
  runtime::TensorMap saved;  // the checkpoint written after the last step, consolidated
};

// Two batches: the archive's inputs and its rows reversed (so that a resume
// must continue at the right batch).
std::vector<runtime::TensorMap> batches() {
  auto in = runtime::readTensors(modelDir("mlp_train") + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::TensorMap flipped;
  for (const auto& [name, t] : *in) flipped.emplace(name, t.flip({0}).contiguous());
  return {*in, flipped};
}

// Trains `program` for `steps` steps (resuming `resume` unless empty) and
// saves to `save`.
Run train(const std::string& program, int steps, const std::string& save, const std::string& resume = "") {
  auto p = program::readProgram(program);
  REQUIRE(p.hasValue());
  std::vector<runtime::TensorMap> in = batches();
  runtime::RankOptions opts;
  opts.steps = steps;
  opts.moreBatches = {in[1]};
  opts.save = save;
  opts.resume = resume;
  auto r = runtime::runThreaded(*p, in[0], opts);
  if (!r) FAIL(r.status().message());
  auto saved = runtime::consolidatedTensors(save);
  if (!saved) FAIL(saved.status().message());
  return {r->losses, std::move(*saved)};
}

// `first`'s losses then `second`'s are `whole`'s, and `second` saved what
// `whole` did (every weight and optimizer state), all within 1e-6.
void checkSame(const Run& first, const Run& second, const Run& whole) {
  std::vector<double> losses = first.losses;
  losses.insert(losses.end(), second.losses.begin(), second.losses.end());
  REQUIRE(losses.size() == whole.losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    INFO("step " << i << ": " << losses[i] << " vs " << whole.losses[i]);
    CHECK(std::abs(losses[i] - whole.losses[i]) <= 1e-6 * std::abs(whole.losses[i]));
  }
  REQUIRE(second.saved.size() == whole.saved.size());
  spmd::testing::checkOutputs(second.saved, whole.saved, 1e-6);
}

}  // namespace

TEST_CASE("pipelined checkpoints resume under the same pipeline, without it, and from a plain run") {
  TempDir dir;
  std::string pp = dir.file("pp.spmd"), fsdp = dir.file("fsdp.spmd");
  compileSchemaText("mlp_train", kPipelined, pp, adamw());
  compileTo("mlp_train", "fsdp", {2}, fsdp, adamw());
  Run ppWhole = train(pp, 4, dir.file("pp-whole"));
  Run ppHalf = train(pp, 2, dir.file("pp-half"));
  Run fsdpWhole = train(fsdp, 4, dir.file("fsdp-whole"));
  Run fsdpHalf = train(fsdp, 2, dir.file("fsdp-half"));
  CHECK(ppWhole.losses.back() < ppWhole.losses.front());

  // The index is a plain one over the stage's mesh; each stage wrote its files.
  auto index = runtime::readCheckpointIndex(dir.file("pp-half"));
  REQUIRE(index.hasValue());
  CHECK(index->step == 2);
  CHECK(index->mesh.numRanks() == 2);
  std::string folder = dir.file("pp-half/step-2");
  for (const char* f : {"rank0-stage0", "rank1-stage0", "rank0-stage1", "rank1-stage1"})
    CHECK(fs::exists(folder + "/" + f + ".safetensors"));
  // The saved state is the uninterrupted plain run's after 2 steps.
  Run plainHalf{{}, fsdpHalf.saved};
  spmd::testing::checkOutputs(ppHalf.saved, plainHalf.saved, 1e-6);

  SECTION("pp -> pp") { checkSame(ppHalf, train(pp, 2, dir.file("pp-pp"), dir.file("pp-half")), ppWhole); }
  SECTION("pp -> fsdp") {
    checkSame(ppHalf, train(fsdp, 2, dir.file("pp-fsdp"), dir.file("pp-half")), fsdpWhole);
  }
  SECTION("fsdp -> pp") {
    checkSame(fsdpHalf, train(pp, 2, dir.file("fsdp-pp"), dir.file("fsdp-half")), ppWhole);
  }
}

TEST_CASE(
    "spmd-run saves (--save, --save-dcp) and resumes a pipelined run; a foreign checkpoint is one line, exit "
    "2") {
  TempDir dir;
  std::string pp = dir.file("pp.spmd"), fsdp = dir.file("fsdp.spmd"), other = dir.file("other.spmd");
  compileSchemaText("mlp_train", kPipelined, pp, adamw());
  compileTo("mlp_train", "fsdp", {2}, fsdp, adamw());
  compileTo("llama_train", "fsdp", {2}, other, adamw());
  std::string inputs = " --inputs " + modelDir("mlp_train") + "/inputs.safetensors";
  auto saved = runCommand(kRun + " -n 4 -q " + pp + inputs + " --steps 2 --save " + dir.file("ckpt"));
  INFO(saved.stderrText);
  REQUIRE(saved.exitCode == 0);
  auto plain = runCommand(kRun + " -n 2 -q " + fsdp + inputs + " --steps 1 --resume " + dir.file("ckpt"));
  INFO(plain.stderrText);
  CHECK(plain.exitCode == 0);
  auto piped = runCommand(kRun + " -n 4 -q " + pp + inputs + " --steps 1 --resume " + dir.file("ckpt") +
                          " --save " + dir.file("ckpt"));
  INFO(piped.stderrText);
  CHECK(piped.exitCode == 0);
  CHECK(fs::exists(dir.file("ckpt/step-3/rank1-stage1.safetensors")));

  // A checkpoint of another model, and --save-dcp.
  auto llama = runCommand(kRun + " -n 2 -q " + other + " --inputs " + modelDir("llama_train") +
                          "/inputs.safetensors --steps 1 --save " + dir.file("llama"));
  REQUIRE(llama.exitCode == 0);
  auto foreign = runCommand(kRun + " -n 4 -q " + pp + inputs + " --resume " + dir.file("llama"));
  CHECK(foreign.exitCode == 2);
  CHECK_THAT(foreign.stderrText, Catch::Contains("is not in the checkpoint"));
  CHECK(std::count(foreign.stderrText.begin(), foreign.stderrText.end(), '\n') == 1);
  // --save-dcp: one DCP folder for all stages (checked against torch in dcp_vs_torch), which the run
  // without the pipeline resumes.
  auto dcp = runCommand(kRun + " -n 4 -q " + pp + inputs + " --save-dcp " + dir.file("dcp"));
  INFO(dcp.stderrText);
  REQUIRE(dcp.exitCode == 0);
  CHECK(fs::exists(dir.file("dcp/.metadata")));
  CHECK(fs::exists(dir.file("dcp/__3_0.distcp")));
  auto fromDcp =
      runCommand(kRun + " -n 2 -q " + fsdp + inputs + " --steps 1 --resume-dcp " + dir.file("dcp"));
  INFO(fromDcp.stderrText);
  CHECK(fromDcp.exitCode == 0);
}
