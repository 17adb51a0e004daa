// Sequence parallelism (schemas/examples/llama_tp_sp.json) executed on
// simulated ranks (threads talking through Gloo): the forward's outputs,
// a train step's loss and every gradient match PyTorch's eager ones, and
// 5 AdamW steps give one worker's losses.
#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::checkOutputs;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

namespace {

const char* kSp = "schemas/examples/llama_tp_sp.json";

/// Runs `model` compiled under `schema` on `mesh` for `steps` steps (AdamW
/// when steps > 1) on testdata's `inputs` file; returns the outputs of the
/// last step and the losses.
runtime::RankResult run(const std::string& model, const std::string& schema, std::vector<int64_t> mesh,
                        int steps = 1, const std::string& inputs = "inputs") {
  TempDir dir;
  passes::OptimizerOptions adamw;
  if (steps > 1) {
    adamw.kind = "adamw";
    adamw.lr = 1e-2;
    adamw.weightDecay = 1e-2;
  }
  compileTo(model, schema, std::move(mesh), dir.file("p.spmd"), adamw);
  auto program = program::readProgram(dir.file("p.spmd"));
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir(model) + "/" + inputs + ".safetensors");
  REQUIRE(in.hasValue());
  runtime::RankOptions opts;
  opts.steps = steps;
  auto r = runtime::runThreaded(*program, *in, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

}  // namespace

TEST_CASE("SP: llama's logits and llama_train's loss and gradients match eager at tp 2 and 4") {
  for (const std::string m : {"llama", "llama_train"})
    for (int64_t n : {2, 4}) {
      INFO(m << " at tp " << n);
      auto exp = runtime::readTensors(modelDir(m) + "/expected.safetensors");
      REQUIRE(exp.hasValue());
      checkOutputs(run(m, kSp, {n}).outputs, *exp, 1e-5);
    }
}

TEST_CASE("SP: llama_dynamic's symbolic sequence sharded, at sizes it was not traced at") {
  // Batch 1 x sequence 64, 3 x 24, 5 x 2 (one position per rank).
  for (const std::string tag : {"b1s64", "b3s24", "b5s2"}) {
    INFO(tag);
    auto exp = runtime::readTensors(modelDir("llama_dynamic") + "/expected_" + tag + ".safetensors");
    REQUIRE(exp.hasValue());
    checkOutputs(run("llama_dynamic", kSp, {2}, 1, "inputs_" + tag).outputs, *exp, 1e-5);
  }
}

TEST_CASE("SP: 5 AdamW steps of llama_train at tp 2 and 4 give one worker's losses") {
  auto one = run("llama_train", "dp", {1}, 5).losses;
  REQUIRE(one.size() == 5);
  for (int64_t n : {2, 4}) {
    auto sp = run("llama_train", kSp, {n}, 5).losses;
    REQUIRE(sp.size() == one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("tp " << n << " step " << i << ": " << sp[i] << " vs " << one[i]);
      CHECK(std::abs(sp[i] - one[i]) <= 1e-5 * std::abs(one[i]));
    }
  }
}
