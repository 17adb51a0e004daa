// Train steps: the optimizer compiled into the program, K steps feeding the
// updated weights back, on simulated ranks. Every layout gives the losses of
// one worker, the loss goes down, and a resumed run continues bit-exactly.
#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "passes/Report.h"
#include "runtime/Checkpoint.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::adamw;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

namespace {

struct Run {
  std::vector<double> losses;
  runtime::TensorMap outputs;
};

Run train(const std::string& model, const std::string& schema, std::vector<int64_t> mesh, int steps,
          const std::string& save = "", const std::string& resume = "", int saveEvery = 0) {
  TempDir dir;
  compileTo(model, schema, mesh, dir.file("p.spmd"), adamw());
  auto program = program::readProgram(dir.file("p.spmd"));
  REQUIRE(program.hasValue());
  auto in = runtime::readTensors(modelDir(model) + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::RankOptions opts;
  opts.steps = steps;
  opts.save = save;
  opts.resume = resume;
  opts.saveEvery = saveEvery;
  auto r = runtime::runThreaded(*program, *in, opts);
  if (!r) FAIL(r.status().message());
  return {r->losses, r->outputs};
}

void checkSameLosses(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE(
    "5 AdamW steps: dp and fsdp on 2 ranks, hsdp on 2x2, Megatron on 4 and (llama) 2x2 dp x tp, give one "
    "worker's losses") {
  for (const std::string model : {"mlp_train", "llama_train"}) {
    INFO(model);
    Run one = train(model, "dp", {1}, 5);
    REQUIRE(one.losses.size() == 5);
    for (size_t i = 1; i < one.losses.size(); ++i) CHECK(one.losses[i] < one.losses[i - 1]);
    checkSameLosses(train(model, "dp", {2}, 5).losses, one.losses);
    checkSameLosses(train(model, "fsdp", {2}, 5).losses, one.losses);
    checkSameLosses(train(model, "hsdp", {2, 2}, 5).losses, one.losses);
    if (model == "mlp_train")
      checkSameLosses(train(model, "schemas/examples/mlp_tp.json", {4}, 5).losses, one.losses);
    if (model == "llama_train") {
      checkSameLosses(train(model, "schemas/examples/llama_tp.json", {4}, 5).losses, one.losses);
      checkSameLosses(train(model, "schemas/examples/llama_dp_tp.json", {2, 2}, 5).losses, one.losses);
    }
  }
}

TEST_CASE("the first step's loss and gradients match PyTorch's") {
  Run r = train("llama_train", "fsdp", {2}, 1);
  auto exp = runtime::readTensors(modelDir("llama_train") + "/expected.safetensors");
  REQUIRE(exp.hasValue());
  spmd::testing::checkOutputs(r.outputs, *exp, 1e-5);
}

TEST_CASE("resuming after step 3 gives the losses of an uninterrupted run, bit for bit") {
  TempDir dir;
  std::string ckpt = dir.file("ckpt");
  Run whole = train("llama_train", "fsdp", {2}, 5);
  Run first = train("llama_train", "fsdp", {2}, 3, ckpt);
  REQUIRE(spmd::testing::readBytes(ckpt + "/latest") == "step-3\n");
  REQUIRE(std::filesystem::exists(ckpt + "/step-3/index.json"));
  REQUIRE(std::filesystem::exists(ckpt + "/step-3/rank1.safetensors"));
  Run rest = train("llama_train", "fsdp", {2}, 2, "", ckpt);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
  REQUIRE(joined.size() == whole.losses.size());
  for (size_t i = 0; i < joined.size(); ++i) CHECK(joined[i] == whole.losses[i]);
  // A consolidated checkpoint holds every parameter and state at full size.
  REQUIRE(runtime::consolidateCheckpoint(ckpt, dir.file("full.safetensors")).isOk());
  auto full = runtime::readTensors(dir.file("full.safetensors"));
  REQUIRE(full.hasValue());
  CHECK(full->at("model.layers.0.wq.weight").sizes() == c10::IntArrayRef({64, 64}));
  CHECK(full->at("optim.model.layers.0.wq.weight.exp_avg").sizes() == c10::IntArrayRef({64, 64}));
  CHECK(full->at("optim.step").item<float>() == 3.0f);
}

TEST_CASE(
    "a checkpoint resumes under another mesh and layout: fsdp on 4 -> Megatron on 2, fsdp on 2 -> 2x2") {
  // 3 steps under fsdp, 2 more under another mesh and layout: the losses of
  // 5 uninterrupted steps (to the tolerance of layouts that sum in another
  // order). llama_train's batch of 2 cannot be split 4 ways.
  struct Case {
    std::string model;
    std::vector<int64_t> fsdpMesh;
    std::string schema;
    std::vector<int64_t> mesh;
  };
  for (const Case& c : {Case{"mlp_train", {4}, "schemas/examples/mlp_tp.json", {2}},
                        Case{"llama_train", {2}, "schemas/examples/llama_dp_tp.json", {2, 2}},
                        Case{"llama_train", {2}, "dp", {1}}}) {
    INFO(c.model << " under " << c.schema);
    TempDir dir;
    Run whole = train(c.model, "fsdp", c.fsdpMesh, 5);
    Run first = train(c.model, "fsdp", c.fsdpMesh, 3, dir.file("ckpt"));
    Run rest = train(c.model, c.schema, c.mesh, 2, "", dir.file("ckpt"));
    std::vector<double> joined = first.losses;
    joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
    checkSameLosses(joined, whole.losses);
  }
}

TEST_CASE("saving every step keeps the newest 2 step folders; latest names the newest complete one") {
  TempDir dir;
  std::string ckpt = dir.file("ckpt");
  Run whole = train("mlp_train", "fsdp", {2}, 4, ckpt, "", 1);
  std::vector<std::string> folders;
  for (const auto& e : std::filesystem::directory_iterator(ckpt)) folders.push_back(e.path().filename());
  std::sort(folders.begin(), folders.end());
  CHECK(folders == std::vector<std::string>{"latest", "step-3", "step-4"});
  CHECK(spmd::testing::readBytes(ckpt + "/latest") == "step-4\n");
  // Resuming from an older step folder and saving again never overwrites
  // the complete step-4: the new one is step-4-1, and it becomes latest.
  Run again = train("mlp_train", "fsdp", {2}, 1, ckpt, ckpt + "/step-3");
  REQUIRE(again.losses.size() == 1);
  CHECK(again.losses[0] == whole.losses[3]);
  CHECK(spmd::testing::readBytes(ckpt + "/latest") == "step-4-1\n");
  CHECK(std::filesystem::exists(ckpt + "/step-4/index.json"));
  CHECK_FALSE(std::filesystem::exists(ckpt + "/step-3"));
  // A folder left by a save that crashed before its index is not a checkpoint.
  std::filesystem::create_directories(ckpt + "/step-9");
  CHECK_THAT(runtime::consolidateCheckpoint(ckpt + "/step-9", dir.file("x.safetensors")).message(),
             Catch::Contains("not a checkpoint"));
  CHECK(runtime::consolidateCheckpoint(ckpt, dir.file("x.safetensors")).isOk());
}

TEST_CASE("strided layouts train, checkpoint and consolidate like one worker") {
  // Hidden units split Megatron-style but strided (each rank holds a piece
  // of both halves of fc1's rows): weights are cut from the archive in runs,
  // and a consolidated checkpoint puts the runs back where they belong.
  TempDir dir;
  Run one = train("mlp_train", "dp", {1}, 3, dir.file("one"));
  Run strided = train("mlp_train", "testdata/schemas/mlp_train_strided.json", {2}, 3, dir.file("strided"));
  checkSameLosses(strided.losses, one.losses);
  REQUIRE(runtime::consolidateCheckpoint(dir.file("one"), dir.file("one.safetensors")).isOk());
  REQUIRE(runtime::consolidateCheckpoint(dir.file("strided"), dir.file("strided.safetensors")).isOk());
  auto a = runtime::readTensors(dir.file("one.safetensors"));
  auto b = runtime::readTensors(dir.file("strided.safetensors"));
  REQUIRE(a.hasValue());
  REQUIRE(b.hasValue());
  REQUIRE(a->size() == b->size());
  for (const auto& [fqn, t] : *a) {
    REQUIRE(b->count(fqn));
    INFO(fqn << ": max abs difference " << (b->at(fqn) - t).abs().max().item<double>());
    CHECK(at::allclose(b->at(fqn), t, 1e-4, 1e-5));  // summation order differs; a misplaced run is O(0.1)
  }
}

TEST_CASE("fsdp divides parameter and optimizer-state bytes by the number of ranks") {
  auto archive = pt2::readArchive(modelDir("llama_train") + "/model.pt2");
  REQUIRE(archive.hasValue());
  int64_t total = 0, replicated = 0;
  auto s = schema::presetSchema("fsdp");
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  opts.optimizer = adamw();
  auto r = passes::compile(*archive, *s, opts);
  REQUIRE(r.hasValue());
  for (const auto& w : r->program.weights) {
    int64_t n = ir::elementSize(w.dtype);
    for (int64_t d : w.globalShape) n *= d;
    total += n;
    if (w.spec.isReplicated()) replicated += n;
  }
  auto mem = passes::estimateMemory(r->program);
  // Sharded tensors split in half; what fsdp cannot shard (dim 0 not
  // divisible, the step counter) stays whole.
  CHECK(mem.paramBytes == (total - replicated) / 2 + replicated);
  CHECK(replicated * 20 < total);
}
