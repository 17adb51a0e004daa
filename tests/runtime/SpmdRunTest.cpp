// The spmd-run tool, run as a process: exit codes, "error: <file>: <what>"
// messages on stderr, and no output file after a failure.
#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "../TestCatch.h"
#include "SpmdRunUtil.h"
#include "runtime/BuildInfo.h"
#include "runtime/TensorIO.h"
#include "support/Version.h"

using namespace spmd;
using namespace spmd::runtime;
using spmd::testing::RunResult;
using spmd::testing::spmdRun;
using spmd::testing::TempDir;

namespace {

const std::string kModels = SPMD_TESTDATA_DIR "/pt2/";

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string model(const std::string& name) { return quoted(kModels + name + "/model.pt2"); }

void writeInputs(const std::string& path, const TensorMap& tensors) {
  Status st = writeTensors(path, tensors);
  INFO(st.message());
  REQUIRE(st.isOk());
}

}  // namespace

TEST_CASE("spmd-run runs a model and writes its outputs") {
  TempDir dir;
  const std::string out = dir.file("out.safetensors");
  RunResult r = spmdRun(model("mlp") + " --inputs " + quoted(kModels + "mlp/inputs.safetensors") +
                        " --output " + quoted(out));
  INFO(r.stderrText);
  REQUIRE(r.exitCode == 0);
  Expected<TensorMap> got = readTensors(out);
  Expected<TensorMap> want = readTensors(kModels + "mlp/expected.safetensors");
  REQUIRE(got.hasValue());
  REQUIRE(want.hasValue());
  REQUIRE(got->size() == 1);
  const at::Tensor& g = got->at("output.0");
  const at::Tensor& w = want->at("output.0");
  CHECK((g - w).norm().item<double>() <= 1e-5 * w.norm().item<double>());
}

TEST_CASE("spmd-run refuses bad input with exit code 2 and leaves no output") {
  TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const std::string outArg = " --output " + quoted(out);
  RunResult r;

  SECTION("an input of the wrong shape") {
    const std::string bad = dir.file("bad.safetensors");
    writeInputs(bad, {{"input.0", at::zeros({32, 65})}});
    r = spmdRun(model("mlp") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText ==
          "error: " + bad + ": input 'x' dim 1 is 65, but the program expects 64 (f32[32, 64])\n");
  }
  SECTION("a sequence longer than the program allows") {
    const std::string bad = dir.file("long.safetensors");
    writeInputs(bad, {{"input.0", at::zeros({1, 65}, at::kLong)}});
    r = spmdRun(model("llama_dynamic") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText ==
          "error: " + bad + ": input 'tokens' dim 1 is 65, but the program allows 2..64 (symbol s27)\n");
  }
  SECTION("a missing input") {
    const std::string bad = dir.file("partial.safetensors");
    writeInputs(bad, {{"input.0", at::zeros({32, 64})}});
    r = spmdRun(model("mlp_train") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText == "error: " + bad + ": missing input 'target' (input.1)\n");
  }
  SECTION("an inputs file that does not exist") {
    const std::string missing = dir.file("missing.safetensors");
    r = spmdRun(model("mlp") + " --inputs " + quoted(missing) + outArg);
    CHECK(r.exitCode == 2);
    CHECK_THAT(r.stderrText, Catch::StartsWith("error: " + missing + ": "));
  }
  SECTION("a model that is not an archive") {
    const std::string junk = dir.file("junk.pt2");
    std::ofstream(junk) << "not a zip";
    r = spmdRun(quoted(junk) + outArg);
    CHECK(r.exitCode == 2);
    CHECK_THAT(r.stderrText, Catch::StartsWith("error: " + junk + ": "));
  }
  SECTION("a bad --log-level, or SPMD_LOG_LEVEL") {
    const std::string levels = ": unknown log level; expected trace, debug, info, warn, error or off\n";
    r = spmdRun(model("mlp") + " --log-level loud" + outArg);
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText == "error: --log-level loud" + levels);
    r = spmdRun(model("mlp") + outArg, "SPMD_LOG_LEVEL=loud");
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText == "error: environment variable SPMD_LOG_LEVEL=loud" + levels);
  }
  SECTION("no model at all") {
    r = spmdRun(outArg);
    CHECK(r.exitCode == 2);
    CHECK(r.stderrText ==
          "error: name a program (.pt2 or .spmd), or --consolidate a checkpoint (see --help)\n");
  }
  CHECK(!r.stderrText.empty());
  CHECK(r.stderrText.find('\n') == r.stderrText.size() - 1);
  CHECK(!std::filesystem::exists(out));
}

TEST_CASE("spmd-run fails with exit code 1 when the output cannot be written") {
  TempDir dir;
  const std::string out = dir.file("no-such-dir/out.safetensors");
  RunResult r = spmdRun(model("mlp") + " --inputs " + quoted(kModels + "mlp/inputs.safetensors") +
                        " --output " + quoted(out));
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.stderrText, Catch::StartsWith("error: " + out + ": "));
  CHECK(!std::filesystem::exists(out));
}

TEST_CASE("--version names the LibTorch and whether the NCCL path is compiled") {
  RunResult r = spmdRun("--version");
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.stdoutText, Catch::StartsWith("spmd-run " + std::string(kVersion) + ", "));
  CHECK_THAT(r.stdoutText, Catch::Contains(std::string("LibTorch ") + TORCH_VERSION));
#ifdef SPMD_WITH_NCCL
  CHECK_THAT(r.stdoutText, Catch::Contains("(CUDA), NCCL path compiled"));
#else
  CHECK_THAT(r.stdoutText, Catch::Contains("no NCCL path"));
#endif
  std::cout << "built: " << r.stdoutText;
}

TEST_CASE("--device cuda where no GPU can be used is one clean error") {
  // Every GPU hidden (CUDA_VISIBLE_DEVICES empty), so this runs on a GPU machine too.
  RunResult r =
      spmdRun(model("mlp") + " --device cuda --inputs " + quoted(kModels + "mlp/inputs.safetensors"),
              "CUDA_VISIBLE_DEVICES=");
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.stderrText, Catch::StartsWith("error: --device cuda: "));
  CHECK(std::count(r.stderrText.begin(), r.stderrText.end(), '\n') == 1);
}
