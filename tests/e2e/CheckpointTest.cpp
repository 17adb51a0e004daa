// Checkpoints that cannot lose or silently corrupt training: resuming with a
// batch folder continues bit-exactly, and every damaged, incomplete or
// foreign checkpoint is refused with one clear line (never an abort).
#include <nlohmann/json.hpp>

#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "runtime/Checkpoint.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::adamw;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::readBytes;
using spmd::testing::runCommand;
using spmd::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kRun = SPMD_RUN_PATH;

// The loss log without its timings: "{"step": 0, "loss": 1.25" per line.
std::string lossesOf(const std::string& path) {
  std::istringstream in(readBytes(path));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.find(", \"step_ms\"")) + "\n";
  return out;
}

// A folder of two mlp_train batches: the archive's inputs, and its rows reversed.
std::string batchFolder(const TempDir& dir) {
  std::string folder = dir.file("batches");
  fs::create_directories(folder);
  auto in = runtime::readTensors(modelDir("mlp_train") + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::TensorMap flipped;
  for (const auto& [name, t] : *in) flipped.emplace(name, t.flip({0}).contiguous());
  REQUIRE(runtime::writeTensors(folder + "/a.safetensors", *in).isOk());
  REQUIRE(runtime::writeTensors(folder + "/b.safetensors", flipped).isOk());
  return folder;
}

// Trains mlp_train under fsdp on 2 simulated ranks; returns the error or "".
std::string trainThreaded(const std::string& program, int steps, const std::string& save,
                          const std::string& resume) {
  auto p = program::readProgram(program);
  REQUIRE(p.hasValue());
  auto in = runtime::readTensors(modelDir("mlp_train") + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::RankOptions opts;
  opts.steps = steps;
  opts.save = save;
  opts.resume = resume;
  auto r = runtime::runThreaded(*p, *in, opts);
  return r ? std::string() : r.status().message();
}

nlohmann::json readJson(const std::string& path) { return nlohmann::json::parse(readBytes(path)); }
void writeJson(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

}  // namespace

TEST_CASE("resuming with a batch folder continues from the saved step's batch, bit for bit") {
  TempDir dir;
  compileTo("mlp_train", "fsdp", {2}, dir.file("p.spmd"), adamw(0.0));
  std::string run = kRun + " -n 2 -q " + dir.file("p.spmd") + " --inputs " + batchFolder(dir);
  auto whole = runCommand(run + " --steps 4 --loss-log " + dir.file("whole.jsonl"));
  INFO(whole.stderrText);
  REQUIRE(whole.exitCode == 0);
  std::string ckpt = dir.file("ckpt");
  auto first = runCommand(run + " --steps 3 --save " + ckpt + " --loss-log " + dir.file("part.jsonl"));
  INFO(first.stderrText);
  REQUIRE(first.exitCode == 0);
  CHECK(readBytes(ckpt + "/latest") == "step-3\n");
  auto rest = runCommand(run + " --steps 1 --resume " + ckpt + " --loss-log " + dir.file("part.jsonl"));
  INFO(rest.stderrText);
  REQUIRE(rest.exitCode == 0);
  std::string want = lossesOf(dir.file("whole.jsonl"));
  CHECK(std::count(want.begin(), want.end(), '\n') == 4);
  CHECK(lossesOf(dir.file("part.jsonl")) == want);
}

TEST_CASE("a damaged, incomplete or foreign checkpoint is refused with one line naming what is wrong") {
  TempDir dir;
  compileTo("mlp_train", "fsdp", {2}, dir.file("p.spmd"), adamw(0.0));
  REQUIRE(trainThreaded(dir.file("p.spmd"), 1, dir.file("good"), "").empty());
  std::string good = dir.file("good") + "/step-1";
  REQUIRE(fs::exists(good + "/index.json"));
  const std::string fqn = "mlp.fc1.weight";
  auto weightOf = [&](nlohmann::json& index) -> nlohmann::json& {
    for (auto& w : index["weights"])
      if (w["fqn"] == fqn) return w;
    FAIL("no " << fqn);
    return index;
  };
  using Edit = std::function<void(const std::string&, nlohmann::json&)>;
  std::vector<std::tuple<std::string, Edit, std::string>> cases = {
      {"bad spec", [&](auto&, auto& j) { weightOf(j)["spec"] = {"S(x)"}; },
       "weight 'mlp.fc1.weight': \"spec\""},
      {"bad mesh", [](auto&, auto& j) { j["mesh"]["shape"] = {0}; },
       "mesh \"shape\" must hold integers >= 1"},
      {"step null", [](auto&, auto& j) { j["step"] = nullptr; },
       "\"step\" must be a non-negative integer, not null"},
      {"no weights", [](auto&, auto& j) { j.erase("weights"); }, "\"weights\" must be a non-empty list"},
      {"short weights", [](auto&, auto& j) { j["weights"].erase(j["weights"].size() - 1); },
       "of this program is not in the checkpoint"},
      {"missing shard", [](auto& d, auto&) { fs::remove(d + "/rank1.safetensors"); },
       "rank1.safetensors: missing: every rank file must be reachable"},
      {"swapped shards",
       [](auto& d, auto&) {
         fs::rename(d + "/rank0.safetensors", d + "/tmp");
         fs::rename(d + "/rank1.safetensors", d + "/rank0.safetensors");
         fs::rename(d + "/tmp", d + "/rank1.safetensors");
       },
       "checksum mismatch: the file is damaged or is another rank's"},
      {"bit flip",
       [](auto& d, auto&) {
         std::string bytes = readBytes(d + "/rank1.safetensors");
         bytes[bytes.size() - 3] ^= 0x10;
         std::ofstream(d + "/rank1.safetensors", std::ios::binary) << bytes;
       },
       "rank1.safetensors: tensor 'optim.step': checksum mismatch"},
      {"region", [&](auto&, auto& j) { weightOf(j)["shards"][1]["region"][0][0] = 0; },
       "shard 1: \"region\""},
      {"NaN shard",
       [&](auto& d, auto& j) {
         auto t = runtime::readTensors(d + "/rank0.safetensors");
         t->at(fqn).fill_(std::nan(""));
         REQUIRE(runtime::writeTensors(d + "/rank0.safetensors", *t).isOk());
         weightOf(j)["shards"][0]["checksum"] =
             runtime::shardChecksum(t->at(fqn).data_ptr(), t->at(fqn).nbytes());
       },
       "rank0.safetensors: tensor 'mlp.fc1.weight' holds NaN or Inf values"},
  };
  int n = 0;
  for (auto [name, edit, message] : cases) {
    INFO(name);
    std::string bad = dir.file("bad" + std::to_string(n++));
    fs::copy(good, bad);
    nlohmann::json index = readJson(bad + "/index.json");
    edit(bad, index);
    writeJson(bad + "/index.json", index);
    std::string err = trainThreaded(dir.file("p.spmd"), 1, "", bad);
    CHECK_THAT(err, Catch::Contains(message));
    // spmd-run: the launcher refuses a bad index or a missing rank file
    // before starting workers, the workers a bad shard; --consolidate says
    // the same in one line
    // (exit 2) and writes nothing.
    auto r = runCommand(kRun + " -q -n 2 " + dir.file("p.spmd") + " --resume " + bad + " --inputs " +
                        modelDir("mlp_train") + "/inputs.safetensors");
    CHECK(r.exitCode != 0);
    CHECK_THAT(r.stderrText, Catch::Contains(message));
    // All but a shard's bytes (checksum, NaN) are found before any worker
    // starts, missing rank files included: one line, exit 2.
    if (name != "swapped shards" && name != "bit flip" && name != "NaN shard") {
      CHECK(r.exitCode == 2);
      CHECK_THAT(r.stderrText, Catch::StartsWith("error: "));
      CHECK(std::count(r.stderrText.begin(), r.stderrText.end(), '\n') == 1);
    }
    r = runCommand(kRun + " --consolidate " + bad + " --output " + dir.file("full.safetensors"));
    CHECK(r.exitCode == 2);
    if (name == "short weights") message = "which the index does not list";
    CHECK_THAT(r.stderrText, Catch::StartsWith("error: ") && Catch::Contains(message));
    CHECK(std::count(r.stderrText.begin(), r.stderrText.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir.file("full.safetensors")));
  }
}

TEST_CASE("a NaN loss is logged as null, and NaN weights are not saved: latest stays on the last good step") {
  TempDir dir;
  compileTo("mlp_train", "fsdp", {2}, dir.file("p.spmd"), adamw(0.0));
  auto in = runtime::readTensors(modelDir("mlp_train") + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  runtime::TensorMap nan = *in;
  for (auto& [name, t] : nan)
    if (t.is_floating_point()) t = at::full_like(t, std::nan(""));
  REQUIRE(runtime::writeTensors(dir.file("nan.safetensors"), nan).isOk());
  std::string ckpt = dir.file("ckpt"), log = dir.file("losses.jsonl");
  std::string run = kRun + " -n 2 -q " + dir.file("p.spmd") + " --save " + ckpt + " --loss-log " + log;
  auto good = runCommand(run + " --inputs " + modelDir("mlp_train") + "/inputs.safetensors");
  INFO(good.stderrText);
  REQUIRE(good.exitCode == 0);
  auto bad = runCommand(run + " --resume " + ckpt + " --inputs " + dir.file("nan.safetensors"));
  CHECK(bad.exitCode == 1);
  CHECK_THAT(bad.stderrText, Catch::Contains("holds NaN or Inf values: not saved"));
  CHECK(readBytes(ckpt + "/latest") == "step-1\n");
  CHECK_FALSE(fs::exists(ckpt + "/step-2/index.json"));
  std::string text = readBytes(log);
  CHECK_THAT(text, Catch::StartsWith("{\"step\": 0, \"loss\": 0.") &&
                       Catch::Contains("\n{\"step\": 1, \"loss\": null, \"step_ms\": "));
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) CHECK_NOTHROW(nlohmann::json::parse(line));
}

TEST_CASE("one pruning rule for --save and --save-dcp: the newest --keep step folders stay") {
  TempDir dir;
  std::string root = dir.file("ckpt");
  auto folder = [&](const std::string& name, bool complete) {
    fs::create_directories(root + "/" + name);
    if (complete) std::ofstream(root + "/" + name + "/done") << "1";
  };
  folder("step-2", true);
  folder("step-10", true);
  folder("step-3-1", true);
  folder("step-3", true);
  folder("step-4", false);   // a save that never finished, older than the current one
  folder("step-12", false);  // unfinished but newer: not this save's to remove
  folder("step-x", true);    // not a step folder
  folder("step-11", true);   // the current save
  std::ofstream(root + "/step-1") << "a file, not a folder";
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // --save: every step folder counts, by (N, k): 12 and 10 are the newest others.
  CHECK(sorted(runtime::stepFoldersToPrune(root, "step-11", 3)) ==
        std::vector<std::string>{"step-2", "step-3", "step-3-1", "step-4"});
  CHECK(sorted(runtime::stepFoldersToPrune(root, "step-11", 1)) ==
        std::vector<std::string>{"step-10", "step-12", "step-2", "step-3", "step-3-1", "step-4"});
  CHECK(runtime::stepFoldersToPrune(root, "step-11", 0).empty());
  CHECK(runtime::stepFoldersToPrune(root, "step-11", 7).empty());
  // --save-dcp: only complete folders count; the older unfinished one goes too.
  auto complete = [](const std::string& path) { return fs::exists(path + "/done"); };
  CHECK(sorted(runtime::stepFoldersToPrune(root, "step-11", 3, complete)) ==
        std::vector<std::string>{"step-2", "step-3", "step-4"});
  CHECK(sorted(runtime::stepFoldersToPrune(root, "step-11", 6, complete)) ==
        std::vector<std::string>{"step-4"});
  CHECK(runtime::stepFoldersToPrune(dir.file("missing"), "step-1", 1).empty());
}
