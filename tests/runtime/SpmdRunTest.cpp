// The spmd-run tool, run as a process: exit codes, "error: <file>: <what>"
// messages on stderr, and no output file after a failure.
#include <ATen/ATen.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include "../TestCatch.h"

#include <torch/version.h>
#include <iostream>
#include "runtime/BuildInfo.h"
#include "runtime/TensorIO.h"

using namespace spmd;
using namespace spmd::runtime;
namespace fs = std::filesystem;

namespace {

const std::string kModels = SPMD_TESTDATA_DIR "/pt2/";

/// A scratch folder removed at scope exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("spmd-run-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs spmd-run with `args` (already shell-quoted where needed).
// `env`: assignments put before the command (e.g. "CUDA_VISIBLE_DEVICES=").
Result spmdRun(const TempDir& dir, const std::string& args, const std::string& env = "") {
  const std::string out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + "'" SPMD_RUN_BINARY "' " + args + " >'" +
                          out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

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
  const std::string out = dir / "out.safetensors";
  Result r = spmdRun(dir, model("mlp") + " --inputs " + quoted(kModels + "mlp/inputs.safetensors") +
                              " --output " + quoted(out));
  INFO(r.err);
  REQUIRE(r.code == 0);
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
  const std::string out = dir / "out.safetensors";
  const std::string outArg = " --output " + quoted(out);
  Result r;

  SECTION("an input of the wrong shape") {
    const std::string bad = dir / "bad.safetensors";
    writeInputs(bad, {{"input.0", at::zeros({32, 65})}});
    r = spmdRun(dir, model("mlp") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.code == 2);
    CHECK(r.err == "error: " + bad + ": input 'x' dim 1 is 65, but the program expects 64 (f32[32, 64])\n");
  }
  SECTION("a sequence longer than the program allows") {
    const std::string bad = dir / "long.safetensors";
    writeInputs(bad, {{"input.0", at::zeros({1, 65}, at::kLong)}});
    r = spmdRun(dir, model("llama_dynamic") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.code == 2);
    CHECK(r.err ==
          "error: " + bad + ": input 'tokens' dim 1 is 65, but the program allows 2..64 (symbol s27)\n");
  }
  SECTION("a missing input") {
    const std::string bad = dir / "partial.safetensors";
    writeInputs(bad, {{"input.0", at::zeros({32, 64})}});
    r = spmdRun(dir, model("mlp_train") + " --inputs " + quoted(bad) + outArg);
    CHECK(r.code == 2);
    CHECK(r.err == "error: " + bad + ": missing input 'target' (input.1)\n");
  }
  SECTION("an inputs file that does not exist") {
    const std::string missing = dir / "missing.safetensors";
    r = spmdRun(dir, model("mlp") + " --inputs " + quoted(missing) + outArg);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("error: " + missing + ": "));
  }
  SECTION("a model that is not an archive") {
    const std::string junk = dir / "junk.pt2";
    std::ofstream(junk) << "not a zip";
    r = spmdRun(dir, quoted(junk) + outArg);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("error: " + junk + ": "));
  }
  SECTION("a bad --log-level, or SPMD_LOG_LEVEL") {
    const std::string levels = ": unknown log level; expected trace, debug, info, warn, error or off\n";
    r = spmdRun(dir, model("mlp") + " --log-level loud" + outArg);
    CHECK(r.code == 2);
    CHECK(r.err == "error: --log-level loud" + levels);
    r = spmdRun(dir, model("mlp") + outArg, "SPMD_LOG_LEVEL=loud");
    CHECK(r.code == 2);
    CHECK(r.err == "error: environment variable SPMD_LOG_LEVEL=loud" + levels);
  }
  SECTION("no model at all") {
    r = spmdRun(dir, outArg);
    CHECK(r.code == 2);
    CHECK(r.err == "error: name a program (.pt2 or .spmd), or --consolidate a checkpoint (see --help)\n");
  }
  CHECK(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(!fs::exists(out));
}

TEST_CASE("spmd-run fails with exit code 1 when the output cannot be written") {
  TempDir dir;
  const std::string out = dir / "no-such-dir/out.safetensors";
  Result r = spmdRun(dir, model("mlp") + " --inputs " + quoted(kModels + "mlp/inputs.safetensors") +
                              " --output " + quoted(out));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("error: " + out + ": "));
  CHECK(!fs::exists(out));
}

TEST_CASE("--version names the LibTorch and whether the NCCL path is compiled") {
  TempDir dir;
  Result r = spmdRun(dir, "--version");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains(std::string("LibTorch ") + TORCH_VERSION));
#ifdef SPMD_WITH_NCCL
  CHECK_THAT(r.out, Catch::Contains("(CUDA), NCCL path compiled"));
#else
  CHECK_THAT(r.out, Catch::Contains("no NCCL path"));
#endif
  std::cout << "built: " << r.out;
}

TEST_CASE("--device cuda where no GPU can be used is one clean error") {
  // Every GPU hidden (CUDA_VISIBLE_DEVICES empty), so this runs on a GPU machine too.
  TempDir dir;
  Result r =
      spmdRun(dir, model("mlp") + " --device cuda --inputs " + quoted(kModels + "mlp/inputs.safetensors"),
              "CUDA_VISIBLE_DEVICES=");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("error: --device cuda: "));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
