// End to end: every model in testdata/pt2 runs on the CPU and matches the
// eager PyTorch results in its expected*.safetensors, for every output,
// loss, gradient and buffer mutation stored there.
#include <ATen/ATen.h>

#include <filesystem>
#include "../TestCatch.h"

#include "pt2/Archive.h"
#include "runtime/OpLibrary.h"
#include "runtime/Runner.h"
#include "runtime/TensorIO.h"
#include "runtime/Weights.h"

using namespace spmd;
using namespace spmd::runtime;

namespace {

const std::string kModels = SPMD_TESTDATA_DIR "/pt2/";
/// Expected tensors whose entries are all this small are zero up to rounding.
constexpr double kNumericallyZero = 1e-6;

ProgramRunner load(const std::string& model) {
  Expected<pt2::Archive> archive = pt2::readArchive(kModels + model + "/model.pt2");
  INFO(archive.status().message());
  REQUIRE(archive.hasValue());
  Expected<ProgramRunner> runner = ProgramRunner::create(*archive);
  INFO(runner.status().message());
  REQUIRE(runner.hasValue());
  return std::move(runner).value();
}

TensorMap read(const std::string& path) {
  Expected<TensorMap> t = readTensors(path);
  INFO(t.status().message());
  REQUIRE(t.hasValue());
  return std::move(t).value();
}

/// ||got - expected|| / ||expected|| (the absolute norm when expected is 0).
double relativeError(const at::Tensor& got, const at::Tensor& expected) {
  at::Tensor g = got.to(at::kDouble), e = expected.to(at::kDouble);
  const double diff = (g - e).norm().item<double>();
  const double norm = e.norm().item<double>();
  return norm > 0 ? diff / norm : diff;
}

/// Runs `inputsFile` and compares with every tensor of `expectedFile`.
void checkRun(ProgramRunner& runner, const std::string& dir, const std::string& inputsFile,
              const std::string& expectedFile, double tolerance) {
  Expected<TensorMap> got = runner.run(read(dir + inputsFile));
  INFO(got.status().message());
  REQUIRE(got.hasValue());
  const TensorMap expected = read(dir + expectedFile);
  REQUIRE(!expected.empty());
  for (const auto& [name, want] : expected) {
    INFO(dir << expectedFile << ": " << name);
    auto it = got->find(name);
    REQUIRE(it != got->end());
    CHECK(it->second.scalar_type() == want.scalar_type());
    REQUIRE(it->second.sizes() == want.sizes());
    if (want.numel() > 0 && want.abs().max().item<double>() <= kNumericallyZero) {
      // Zero up to float32 rounding (cnn_train's conv bias gradients: batch
      // norm follows the conv, so they vanish mathematically): a relative
      // error is meaningless there, both sides must just be rounding noise.
      CHECK(it->second.abs().max().item<double>() <= 10 * kNumericallyZero);
      continue;
    }
    CHECK(relativeError(it->second, want) <= tolerance);
  }
}

std::string runError(ProgramRunner& runner, const TensorMap& inputs) {
  Expected<TensorMap> got = runner.run(inputs);
  REQUIRE(!got.hasValue());
  return got.status().message();
}

}  // namespace

TEST_CASE("every model matches eager PyTorch") {
  std::vector<std::string> models;
  for (const auto& entry : std::filesystem::directory_iterator(kModels))
    if (std::filesystem::exists(entry.path() / "model.pt2"))
      models.push_back(entry.path().filename().string());
  std::sort(models.begin(), models.end());
  REQUIRE(models.size() >= 15);
  // custom_op's kernel comes from a library, as spmd-run --load-library loads it.
  Status loaded = runtime::loadOpLibrary(SPMD_TEST_OPS);
  INFO(loaded.message());
  REQUIRE(loaded.isOk());
  for (const std::string& model : models) {
    DYNAMIC_SECTION(model) {
      const double tolerance = model.rfind("llama_deep", 0) == 0 ? 1e-4 : 1e-5;
      ProgramRunner runner = load(model);
      checkRun(runner, kModels + model + "/", "inputs.safetensors", "expected.safetensors", tolerance);
    }
  }
}

TEST_CASE("llama_dynamic runs at every size in range and refuses others") {
  ProgramRunner runner = load("llama_dynamic");
  const std::string dir = kModels + "llama_dynamic/";
  for (const char* tag : {"b3s24", "b1s64", "b5s2"}) {
    INFO(tag);
    checkRun(runner, dir, std::string("inputs_") + tag + ".safetensors",
             std::string("expected_") + tag + ".safetensors", 1e-5);
  }
  checkRun(runner, dir, "inputs.safetensors", "expected.safetensors", 1e-5);
  CHECK(runError(runner, {{"input.0", at::zeros({1, 65}, at::kLong)}}) ==
        "input 'tokens' dim 1 is 65, but the program allows 2..64 (symbol s27)");
  CHECK(runError(runner, {{"tokens", at::zeros({2, 1}, at::kLong)}}) ==
        "input 'tokens' dim 1 is 1, but the program allows 2..64 (symbol s27)");
}

TEST_CASE("inputs that do not fit are refused, naming the input") {
  ProgramRunner llama = load("llama");
  CHECK(llama.userInputNames() == std::vector<std::string>{"tokens"});
  CHECK(runError(llama, {{"input.0", at::zeros({2, 17}, at::kLong)}}) ==
        "input 'tokens' dim 1 is 17, but the program expects 16 (i64[2, 16])");
  CHECK(runError(llama, {{"tokens", at::zeros({2, 16}, at::kFloat)}}) ==
        "input 'tokens' has dtype f32, but the program expects i64 (i64[2, 16])");
  CHECK(runError(llama, {{"tokens", at::zeros({32}, at::kLong)}}) ==
        "input 'tokens' has rank 1, but the program expects rank 2 (i64[2, 16])");
  CHECK(runError(llama, {}) == "missing input 'tokens' (input.0)");
  CHECK(runError(llama,
                 {{"input.0", at::zeros({2, 16}, at::kLong)}, {"tokens", at::zeros({2, 16}, at::kLong)}}) ==
        "input 'tokens' is given twice, as 'input.0' and 'tokens'");
  CHECK(runError(llama, {{"input.1", at::zeros({2, 16}, at::kLong)}}) ==
        "unknown input 'input.1'; the program takes input.0 (tokens)");

  ProgramRunner train = load("llama_train");
  CHECK(train.userInputNames() == std::vector<std::string>{"tokens", "labels"});
  CHECK(runError(train, {{"input.0", at::zeros({2, 16}, at::kLong)}}) == "missing input 'labels' (input.1)");
}

TEST_CASE("tied weights share memory; weights alias the archive") {
  Expected<pt2::Archive> archive = pt2::readArchive(kModels + "mlp/model.pt2");
  REQUIRE(archive.hasValue());
  Expected<TensorMap> weights = loadWeights(*archive, c10::kCPU);
  REQUIRE(weights.hasValue());
  const pt2::TensorPayload* payload = archive->payload("fc1.weight");
  REQUIRE(payload != nullptr);
  const at::Tensor& w = weights->at("fc1.weight");
  CHECK(w.sizes() == at::IntArrayRef(payload->sizes));
  CHECK(w.data_ptr() == static_cast<const void*>(payload->storage->data()));
  // Two payloads on one Storage (as tied weights are) alias one buffer.
  pt2::Archive tied;
  tied.weights["a"] = *payload;
  tied.weights["b"] = *payload;
  tied.weights["b"].fqn = "b";
  tied.weights["b"].sizes = {64};
  tied.weights["b"].strides = {1};
  tied.weights["b"].storageOffset = 64;
  Expected<TensorMap> tiedWeights = loadWeights(tied, c10::kCPU);
  REQUIRE(tiedWeights.hasValue());
  CHECK(at::equal(tiedWeights->at("b"), tiedWeights->at("a")[1]));
  CHECK(tiedWeights->at("a").storage().is_alias_of(tiedWeights->at("b").storage()));
}

TEST_CASE("a symbolic scalar user input is given as a one-element tensor") {
  ir::ExportedProgram p;
  ir::Value* x = *p.graph.addValue("x", ir::ValueKind::Tensor);
  x->mutableType().dtype = ir::ScalarType::Float;
  x->mutableType().sizes = {6};
  ir::Value* n = *p.graph.addValue("n", ir::ValueKind::SymInt);
  ir::Value* view = *p.graph.addValue("view", ir::ValueKind::Tensor);
  p.graph.addInput(x);
  p.graph.addInput(n);
  (void)*p.graph.addNode(
      "view", "aten.view.default",
      {{"self", ir::Argument::tensor(x)}, {"size", ir::Argument::symInts({n, nullptr}, {0, -1})}},
      {ir::Argument::tensor(view)});
  p.graph.addOutput(ir::Argument::tensor(view));
  for (ir::Value* v : {x, n}) {
    ir::InputSpec s;
    s.value = v;
    s.name = v->name();
    p.signature.inputs.push_back(s);
  }
  p.signature.outputs.push_back({ir::OutputKind::UserOutput, ir::Argument::tensor(view), ""});
  Expected<ProgramRunner> runner = ProgramRunner::create(p, {});
  INFO(runner.status().message());
  REQUIRE(runner.hasValue());
  at::Tensor tx = at::arange(6, at::kFloat);
  Expected<TensorMap> out = runner->run({{"x", tx}, {"input.1", at::scalar_tensor(3, at::kLong)}});
  INFO(out.status().message());
  REQUIRE(out.hasValue());
  CHECK(at::equal(out->at("output.0"), tx.view({3, 2})));
  CHECK(runError(*runner, {{"x", tx}, {"n", at::ones({2}, at::kLong)}}) ==
        "input 'n' is a scalar, but the tensor given has 2 elements");
}
