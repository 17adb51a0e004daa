// spmd-run as a user runs it: N worker processes over c10d/Gloo on this
// machine, checked against PyTorch's outputs, and every fault it must turn
// into one clear error and a non-zero exit within seconds.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "program/Format.h"
#include "runtime/Checkpoint.h"

using namespace spmd;
using spmd::testing::checkOutputs;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::runCommand;
using spmd::testing::TempDir;

namespace {

const std::string kRun = SPMD_RUN_PATH;

std::string inputsOf(const std::string& m) { return modelDir(m) + "/inputs.safetensors"; }

}  // namespace

TEST_CASE("Megatron llama on 8 worker processes matches PyTorch, and --verify says so") {
  TempDir dir;
  compileTo("llama", "schemas/examples/llama_tp.json", {8}, dir.file("llama.spmd"));
  auto r =
      runCommand(kRun + " -n 8 " + dir.file("llama.spmd") + " --inputs " + inputsOf("llama") + " --output " +
                 dir.file("out.safetensors") + " --verify " + modelDir("llama") + "/model.pt2");
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.stdoutText, Catch::Contains("spmd-run: 8 ranks"));
  CHECK_THAT(r.stdoutText, Catch::Contains("verify output.0"));
  auto got = runtime::readTensors(dir.file("out.safetensors"));
  auto exp = runtime::readTensors(modelDir("llama") + "/expected.safetensors");
  REQUIRE(got.hasValue());
  REQUIRE(exp.hasValue());
  checkOutputs(*got, *exp, 1e-5);
}

TEST_CASE("spmd-run -q prints nothing on success") {
  TempDir dir;
  compileTo("mlp", "dp", {2}, dir.file("mlp.spmd"));
  auto quiet = runCommand(kRun + " -q -n 2 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("mlp"));
  INFO(quiet.stderrText);
  REQUIRE(quiet.exitCode == 0);
  CHECK(quiet.stdoutText.empty());
  CHECK(quiet.stderrText.empty());
}

TEST_CASE("--log-level debug reaches the workers; each line carries its rank once") {
  TempDir dir;
  compileTo("mlp", "dp", {2}, dir.file("mlp.spmd"));
  std::string run = kRun + " -n 2 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("mlp");
  auto r = runCommand(run + " --log-level debug");
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.stderrText, Catch::Contains("[rank 0] debug: worker: "));
  CHECK_THAT(r.stderrText, Catch::Contains("[rank 1] debug: worker: "));
  CHECK(r.stderrText.find("] [rank ") == std::string::npos);
  auto plain = runCommand(run);
  REQUIRE(plain.exitCode == 0);
  CHECK(plain.stderrText.find("debug:") == std::string::npos);
}

TEST_CASE("a train step under fsdp on 2 workers writes the loss and every gradient") {
  TempDir dir;
  compileTo("mlp_train", "fsdp", {2}, dir.file("p.spmd"));
  auto r = runCommand(kRun + " -n 2 -q " + dir.file("p.spmd") + " --inputs " + inputsOf("mlp_train") +
                      " --output " + dir.file("out.safetensors"));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  auto got = runtime::readTensors(dir.file("out.safetensors"));
  auto exp = runtime::readTensors(modelDir("mlp_train") + "/expected.safetensors");
  REQUIRE(got.hasValue());
  checkOutputs(*got, *exp, 1e-5);
}

TEST_CASE("a custom op: the schema brings its rule, --load-library its kernel; outputs match PyTorch") {
  TempDir dir;
  compileTo("custom_op", "testdata/schemas/custom_op_dp.json", {2}, dir.file("c.spmd"));
  std::string run = kRun + " -n 2 " + dir.file("c.spmd") + " --inputs " + inputsOf("custom_op") +
                    " --output " + dir.file("out.safetensors");
  auto r = runCommand(run + " --load-library " + SPMD_TEST_OPS + " --verify " + modelDir("custom_op") +
                      "/model.pt2");
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  // The batch stays split through the op: only the output's gather (half
  // of f32[8, 16]) is sent.
  CHECK_THAT(r.stdoutText, Catch::Contains(", 256 B sent per rank"));
  auto got = runtime::readTensors(dir.file("out.safetensors"));
  auto exp = runtime::readTensors(modelDir("custom_op") + "/expected.safetensors");
  REQUIRE(got.hasValue());
  REQUIRE(exp.hasValue());
  checkOutputs(*got, *exp, 1e-5);
  // Without the library the op is unknown to the workers; a library that is
  // not one is refused before anything starts.
  auto missing = runCommand(run);
  CHECK(missing.exitCode != 0);
  CHECK_THAT(missing.stderrText, Catch::Contains("spmdtest"));
  auto bad = runCommand(run + " --load-library " + dir.file("c.spmd"));
  CHECK(bad.exitCode == 2);
  CHECK_THAT(bad.stderrText, Catch::Contains("cannot load the op library"));
}

TEST_CASE("faults before launch: mesh size, corrupt program, wrong inputs, busy port") {
  TempDir dir;
  compileTo("mlp", "schemas/examples/mlp_tp.json", {2}, dir.file("mlp.spmd"));
  std::string out = dir.file("out.safetensors");
  auto r = runCommand(kRun + " -n 4 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("mlp") + " --output " +
                      out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::Contains("needs 2 ranks, but -n 4 starts 4; pass -n 2"));

  std::string bytes = spmd::testing::readBytes(dir.file("mlp.spmd"));
  std::ofstream(dir.file("cut.spmd"), std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  r = runCommand(kRun + " -n 2 " + dir.file("cut.spmd") + " --inputs " + inputsOf("mlp") + " --output " +
                 out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::StartsWith("error: " + dir.file("cut.spmd") + ": "));

  r = runCommand(kRun + " -n 2 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("llama") + " --output " +
                 out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::Contains("input 'x' has shape [2, 16], the program expects f32[32, 64]"));

  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(s, 1);
  std::string port = std::to_string(ntohs(addr.sin_port));
  r = runCommand(kRun + " -n 2 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("mlp") + " --master-port " +
                 port + " --output " + out);
  ::close(s);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::Contains("port " + port + " is in use"));
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("faults before launch: an input of the wrong dtype, --verify given expected outputs") {
  // Each is one line and exit 2 from the launcher; no worker starts (a
  // worker's error would read "[rank 0] error: ...").
  TempDir dir;
  compileTo("mlp", "dp", {2}, dir.file("mlp.spmd"));
  std::string out = dir.file("out.safetensors");
  auto in = runtime::readTensors(inputsOf("mlp"));
  REQUIRE(in.hasValue());
  runtime::TensorMap asInt;
  for (const auto& [name, t] : *in) asInt.emplace(name, t.to(at::kLong));
  std::string bad = dir.file("int.safetensors");
  REQUIRE(runtime::writeTensors(bad, asInt).isOk());
  auto r = runCommand(kRun + " -n 2 " + dir.file("mlp.spmd") + " --inputs " + bad + " --output " + out);
  CHECK(r.exitCode == 2);
  CHECK(r.stderrText ==
        "error: " + bad + ": input 'x' has dtype i64, the program expects f32 (f32[32, 64])\n");
  CHECK_FALSE(std::filesystem::exists(out));

  // --verify takes the .pt2; a file of expected outputs is --verify-against's.
  r = runCommand(kRun + " -n 2 " + dir.file("mlp.spmd") + " --inputs " + inputsOf("mlp") + " --output " +
                 out + " --verify " + modelDir("mlp") + "/expected.safetensors");
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::StartsWith("error: " + modelDir("mlp") + "/expected.safetensors: ") &&
                               Catch::Contains("use --verify-against"));
  CHECK(std::count(r.stderrText.begin(), r.stderrText.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("a killed worker stops the run within seconds, naming the rank; no output is written") {
  TempDir dir;
  compileTo("llama", "schemas/examples/llama_tp.json", {2}, dir.file("victim.spmd"));
  std::string out = dir.file("out.safetensors");
  auto start = std::chrono::steady_clock::now();
  // The run repeats the program for a long time; a watcher kills one worker
  // once it runs ("[-]-worker" matches workers, not the watcher's own line).
  std::string pattern = "'[-]-worker " + dir.file("victim.spmd") + "'";
  std::string watcher = "(for i in $(seq 100); do p=$(pgrep -f " + pattern +
                        " | tail -n 1); [ -n \"$p\" ] && sleep 1 && kill -9 $p && break; sleep 0.1; done) & ";
  auto r = runCommand(watcher + kRun + " -n 2 " + dir.file("victim.spmd") + " --inputs " + inputsOf("llama") +
                      " --repeat 20000 --timeout 10 --output " + out);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.exitCode != 0);
  CHECK_THAT(r.stderrText, Catch::Contains("was killed by signal 9 (SIGKILL)"));
  CHECK(seconds < 30);
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(runCommand("pgrep -f " + pattern).stdoutText.empty());
}

TEST_CASE("training: a worker killed mid-run stops it within seconds; the last checkpoint stays intact") {
  TempDir dir;
  passes::OptimizerOptions adamw;
  adamw.kind = "adamw";
  compileTo("mlp_train", "fsdp", {2}, dir.file("train.spmd"), adamw);
  std::string ckpt = dir.file("ckpt");
  std::string common = kRun + " -n 2 -q " + dir.file("train.spmd") + " --inputs " + inputsOf("mlp_train");
  auto r = runCommand(common + " --steps 2 --save " + ckpt + " --loss-log " + dir.file("losses.jsonl"));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  std::string log = spmd::testing::readBytes(dir.file("losses.jsonl"));
  CHECK_THAT(log, Catch::StartsWith("{\"step\": 0, \"loss\": "));
  CHECK_THAT(log, Catch::Contains("{\"step\": 1, \"loss\": "));
  CHECK(spmd::testing::readBytes(ckpt + "/latest") == "step-2\n");
  std::string index = spmd::testing::readBytes(ckpt + "/step-2/index.json");
  CHECK_THAT(index, Catch::Contains("\"step\": 2"));

  std::string pattern = "'[-]-worker " + dir.file("train.spmd") + "'";
  std::string watcher = "(for i in $(seq 100); do p=$(pgrep -f " + pattern +
                        " | tail -n 1); [ -n \"$p\" ] && sleep 1 && kill -9 $p && break; sleep 0.1; done) & ";
  auto start = std::chrono::steady_clock::now();
  r = runCommand(watcher + common + " --steps 1000000 --resume " + ckpt + " --save " + ckpt);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.exitCode != 0);
  CHECK_THAT(r.stderrText, Catch::Contains("was killed by signal 9 (SIGKILL)"));
  CHECK(seconds < 15);
  CHECK(spmd::testing::readBytes(ckpt + "/step-2/index.json") == index);
  CHECK(runtime::consolidateCheckpoint(ckpt, dir.file("full.safetensors")).isOk());
}

TEST_CASE("a flipped weight byte is refused before any worker starts, naming the weight; no output") {
  TempDir dir;
  compileTo("mlp", "dp", {2}, dir.file("mlp.spmd"));
  std::string bytes = spmd::testing::readBytes(dir.file("mlp.spmd"));
  uint64_t jsonLength = 0;
  std::memcpy(&jsonLength, bytes.data() + 16, 8);
  auto lp = program::readProgram(dir.file("mlp.spmd"));
  REQUIRE(lp.hasValue());
  const program::WeightEntry& w = lp->program().weights.front();
  size_t at = program::dataSectionOffset(jsonLength) + w.shards.front().offset + w.shards.front().bytes / 2;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  std::ofstream(dir.file("flipped.spmd"), std::ios::binary) << bytes;
  std::string out = dir.file("out.safetensors");
  auto r = runCommand(kRun + " -n 2 " + dir.file("flipped.spmd") + " --inputs " + inputsOf("mlp") +
                      " --output " + out);
  CHECK(r.exitCode == 2);
  std::string expected = dir.file("flipped.spmd") + ": weight '" + w.fqn +
                         "' blob [-1] does not match its checksum: the file is damaged: recompile or copy "
                         "it again";
  CHECK_THAT(r.stderrText, Catch::Contains(expected));
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("the summary prints the measured memory beside the compiler's prediction") {
  TempDir dir;
  compileTo("llama", "fsdp", {2}, dir.file("llama.spmd"));
  auto r = runCommand(kRun + " -n 2 " + dir.file("llama.spmd") + " --inputs " + inputsOf("llama"));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.stdoutText, Catch::Contains("  memory per rank (max): state "));
  CHECK_THAT(r.stdoutText, Catch::Contains(" B (predicted "));
  CHECK_THAT(r.stdoutText, Catch::Contains("RSS growth "));
}

TEST_CASE("--profile writes each rank's measured peak memory, step time and bytes sent") {
  TempDir dir;
  compileTo("llama", "schemas/examples/llama_tp.json", {2}, dir.file("llama.spmd"));
  auto r = runCommand(kRun + " -q -n 2 " + dir.file("llama.spmd") + " --inputs " + inputsOf("llama") +
                      " --profile " + dir.file("p.json"));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(spmd::testing::readBytes(dir.file("p.json")));
  CHECK(j["format"] == 1);
  CHECK(j["program"] == "llama.spmd");
  CHECK(j["mesh"] == nlohmann::json::array({2}));
  REQUIRE(j["ranks"].size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& e = j["ranks"][static_cast<size_t>(rank)];
    CHECK(e["rank"] == rank);
    CHECK(e["peak_bytes"].get<int64_t>() > 0);
    CHECK(e["peak_bytes"].get<int64_t>() < (int64_t{1} << 30));
    CHECK(e["state_bytes"].get<int64_t>() > 0);
    CHECK(e["state_bytes"].get<int64_t>() <= e["peak_bytes"].get<int64_t>());
    CHECK(e["rss_growth_bytes"].get<int64_t>() >= 0);
    CHECK(e["step_ms"].get<double>() > 0);
    CHECK(e["load_ms"].get<double>() >= 0);
    CHECK(e["bytes_sent"].get<int64_t>() > 0);
  }
}
