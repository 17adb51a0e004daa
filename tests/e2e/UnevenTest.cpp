// Uneven shards (torch.chunk: chunk ceil(n/k), trailing ranks hold fewer
// rows or none) end to end: test models compiled with dims that do not
// divide their mesh axes, executed on simulated ranks (threads talking
// through Gloo), match PyTorch's eager outputs, losses and gradients.
//
//   mlp under dp on 3 ranks: batch 32 -> 11, 11, 10
//   gpt_block under dp on 3 ranks: batch 4 -> 2, 2, 0 (an empty shard)
//   llama under tp on 3 ranks: vocab 256 -> 86, 86, 84; FFN 128 -> 43, 43, 42
//   a GroupNorm CNN under dp on 3 ranks: batch 8 -> 3, 3, 2 (native_group_norm's N per rank)
#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "program/Dump.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::checkOutputs;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

namespace {

struct Case {
  std::string model, schema;
  std::vector<int64_t> mesh;
};

/// Compiles, runs on simulated ranks and compares with eager; returns the dump.
std::string runCase(const Case& c, const passes::OptimizerOptions& optimizer = {}) {
  INFO(c.model << " under " << c.schema);
  TempDir dir;
  std::string path = dir.file("p.spmd");
  compileTo(c.model, c.schema, c.mesh, path, optimizer);
  auto program = program::readProgram(path);
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir(c.model) + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  auto exp = runtime::readTensors(modelDir(c.model) + "/expected.safetensors");
  REQUIRE(exp.hasValue());
  auto r = runtime::runThreaded(*program, *in);
  if (!r) FAIL(r.status().message());
  checkOutputs(r->outputs, *exp, 1e-5);
  return program::dumpProgram(program->program());
}

/// Losses of `steps` AdamW steps of `model` under `schema` on `mesh`, saving
/// to or resuming from a checkpoint folder.
std::vector<double> train(const std::string& model, const std::string& schema, std::vector<int64_t> mesh,
                          int steps, const std::string& save = "", const std::string& resume = "") {
  TempDir dir;
  passes::OptimizerOptions adamw;
  adamw.kind = "adamw";
  adamw.lr = 1e-2;
  adamw.weightDecay = 1e-2;
  compileTo(model, schema, mesh, dir.file("p.spmd"), adamw);
  auto program = program::readProgram(dir.file("p.spmd"));
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir(model) + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::RankOptions opts;
  opts.steps = steps;
  opts.save = save;
  opts.resume = resume;
  auto r = runtime::runThreaded(*program, *in, opts);
  if (!r) FAIL(r.status().message());
  return r->losses;
}

void checkSameLosses(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE("uneven batches under dp: 32 over 3, 4 over 3 (an empty shard), 2 over 3", "[uneven]") {
  std::string dump = runCase({"mlp", "dp", {3}});
  CHECK_THAT(dump, Catch::Contains("per rank [11, 64] [11, 64] [10, 64]  padding 256 bytes"));
  CHECK_THAT(dump, Catch::Contains("spmd.all_gather(self=%addmm_1, axis=\"x\", dim=0, *, size=32"));
  runCase({"gpt_block", "dp", {3}});
  runCase({"llama", "dp", {3}});
}

TEST_CASE("uneven batches in train steps: the mean loss divides by the global batch", "[uneven]") {
  runCase({"mlp_train", "dp", {3}});
  runCase({"llama_train", "dp", {3}});
}

TEST_CASE("nn.GroupNorm shards its batch: native_group_norm's N is each rank's own count", "[uneven]") {
  // pipe_cnn.PipeCNN (8 conv + nn.GroupNorm blocks), batch 8: 3, 3, 2 on 3
  // ranks (N a per-rank size), 4 and 4 on 2 (N=4); eager's loss and gradients.
  std::string uneven = runCase({"../pipeline/cnn_pipe_train", "dp", {3}});
  CHECK_THAT(uneven, Catch::Contains(
                         "aten.native_group_norm.default(input=%convolution, weight=%p_layers_0_norm_weight, "
                         "bias=%p_layers_0_norm_bias, N=%local_size"));
  std::string even = runCase({"../pipeline/cnn_pipe_train", "dp", {2}});
  CHECK_THAT(even, Catch::Contains("N=4, C=8, HxW=256, group=4"));
  for (const std::string* dump : {&uneven, &even})  // the batch stays sharded: nothing is gathered
    CHECK_THAT(*dump, !Catch::Contains("spmd.all_gather"));
}

TEST_CASE("nested uneven batches: 32 over 3 then 2, and over 2 then 3", "[uneven]") {
  runCase({"mlp", "dp", {3, 2}});
  runCase({"mlp", "dp", {2, 3}});
  runCase({"mlp_train", "dp", {3, 2}});
}

TEST_CASE("uneven tensor parallelism: hidden 256 over 3, vocabulary 256 over 3", "[uneven]") {
  std::string dump = runCase({"mlp", "schemas/examples/mlp_tp.json", {3}});
  CHECK_THAT(dump, Catch::Contains("weight fc1.weight  [S(0)] f32[256, 64] -> [86, 64]"));
  CHECK_THAT(dump, Catch::Contains("per rank [86, 64] [86, 64] [84, 64]  padding 512 bytes"));
  runCase({"llama", "testdata/schemas/llama_uneven_tp.json", {3}});
  runCase({"llama_train", "testdata/schemas/llama_uneven_tp.json", {3}});
}

TEST_CASE("padded reduce-scatter and all-to-all over uneven shards", "[uneven]") {
  std::string scatter = runCase({"mlp", "testdata/schemas/mlp_uneven_scatter.json", {3}});
  CHECK_THAT(scatter, Catch::Contains("spmd.reduce_scatter("));
  std::string a2a = runCase({"mlp", "testdata/schemas/mlp_uneven_alltoall.json", {3}});
  CHECK_THAT(a2a, Catch::Contains("spmd.all_to_all("));
  CHECK_THAT(a2a, Catch::Contains("size=32"));
}

TEST_CASE("AdamW on uneven shards matches one worker; checkpoints save and load uneven shards", "[uneven]") {
  // fc1 [256, 64] over 3 ranks: 86, 86, 84 rows of weights and of AdamW's states.
  std::vector<double> one = train("mlp_train", "dp", {1}, 5);
  checkSameLosses(train("mlp_train", "schemas/examples/mlp_tp.json", {3}, 5), one);
  checkSameLosses(train("mlp_train", "dp", {3}, 5), one);
  // 3 steps saved from uneven shards, resumed on the same layout and on an even one.
  TempDir dir;
  std::vector<double> first = train("mlp_train", "schemas/examples/mlp_tp.json", {3}, 3, dir.file("ckpt"));
  for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{3}, std::vector<int64_t>{2}}) {
    std::vector<double> joined = first;
    std::vector<double> rest =
        train("mlp_train", "schemas/examples/mlp_tp.json", mesh, 2, "", dir.file("ckpt"));
    joined.insert(joined.end(), rest.begin(), rest.end());
    checkSameLosses(joined, one);
  }
  // And saved from an even layout, resumed on an uneven one.
  TempDir even;
  std::vector<double> start = train("mlp_train", "schemas/examples/mlp_tp.json", {2}, 3, even.file("ckpt"));
  std::vector<double> rest =
      train("mlp_train", "schemas/examples/mlp_tp.json", {3}, 2, "", even.file("ckpt"));
  start.insert(start.end(), rest.begin(), rest.end());
  checkSameLosses(start, one);
}

TEST_CASE("a symbolic dim that does not divide at run time is one clear error, not a hang", "[uneven]") {
  // Dynamic dims still shard evenly only (s52 // 2 in the program).
  TempDir dir;
  compileTo("llama_dynamic", "dp", {2}, dir.file("p.spmd"));
  auto program = program::readProgram(dir.file("p.spmd"));
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir("llama_dynamic") + "/inputs_b3s24.safetensors");
  REQUIRE(in.hasValue());
  auto r = runtime::runThreaded(*program, *in);
  REQUIRE_FALSE(r.hasValue());
  CHECK_THAT(r.status().message(),
             Catch::Contains("dim 0 of size 3 does not divide evenly over mesh axis 'x' of size 2"));
}
