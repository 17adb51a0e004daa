// Random placement schemas, differential against PyTorch: every output,
// loss and gradient of a test model compiled under a random but valid
// layout and run on simulated ranks must equal the eager result.
//
//   seed 17: llama_train on a 2x1x2 mesh (a0, a1, a2):
//     model.layers.0.wq.weight  {a0: S(1), a2: S(0,sf=2)}
//     tokens                    {a0: S(0), a2: S(0)}   (nested: dim 0 over two axes)
//     x (a float input)         {a1: P(sum)}           (a pending sum)
//     -> compile, run 4 ranks over Gloo, compare loss and 22 gradients
//
// Each case draws a model, a mesh of 1 to 3 axes (sizes 1, 2, 4; at most 8
// ranks) and, per parameter, buffer and input, per axis R, S(d) or a
// strided S(d,sf=k) (and P(sum) for float inputs), keeping only shards that
// divide. SPMD_RANDOM_LAYOUTS sets the number of cases (CI runs a few
// dozen; scripts/random-layouts.sh runs thousands),
// SPMD_RANDOM_SEED the first seed; a failure prints its seed and schema, and
// SPMD_RANDOM_SEED=<seed> SPMD_RANDOM_LAYOUTS=1 reruns exactly that case.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <random>

#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "runtime/Worker.h"

using namespace spmd;
using spmd::testing::modelDir;
using spmd::testing::TempDir;

namespace {

const char* kModels[] = {
    "mlp", "mlp_train", "gpt_block", "gpt_block_sdpa",   "gpt_block_fused", "llama",       "llama_train",
    "cnn", "cnn_train", "moe",       "llama_train_t214", "resmlp",          "resmlp_train"};

int64_t envInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

struct References {
  runtime::TensorMap inputs, expected;
};

/// A model's inputs and eager outputs, read once.
References& references(const std::string& m) {
  static std::map<std::string, References> cache;
  auto it = cache.find(m);
  if (it != cache.end()) return it->second;
  auto in = runtime::readTensors(modelDir(m) + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  auto exp = runtime::readTensors(modelDir(m) + "/expected.safetensors");
  REQUIRE(exp.hasValue());
  return cache.emplace(m, References{std::move(*in), std::move(*exp)}).first->second;
}

/// A random mesh: 1 to 3 axes of sizes 1, 2 or 4, at most 8 ranks.
std::vector<int64_t> randomMesh(std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  int64_t axes = 1 + static_cast<int64_t>(rng() % 3), ranks = 1;
  for (int64_t a = 0; a < axes; ++a) {
    std::vector<int64_t> sizes;
    for (int64_t s : {1, 2, 2, 4})
      if (ranks * s <= 8) sizes.push_back(s);
    int64_t s = sizes[rng() % sizes.size()];
    shape.push_back(s);
    ranks *= s;
  }
  return shape;
}

/// Random placements of one tensor of `shape`, by axis name; shards divide.
nlohmann::json randomPlacements(std::mt19937_64& rng, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& mesh, bool partial) {
  nlohmann::json out = nlohmann::json::object();
  // Per dim: what the earlier axes left of it (size) in how many equal runs
  // (strided shards leave several); a later split must take whole runs or
  // pieces of one run (as sharding::checkEvenlyDivisible demands).
  std::vector<int64_t> size = shape, runs(shape.size(), 1);
  auto fits = [&](size_t d, int64_t n, int64_t sf) {
    if (size[d] % (n * sf) != 0) return false;
    if (sf > 1) return runs[d] == 1;
    int64_t piece = size[d] / n, run = size[d] / runs[d];
    return piece % run == 0 || run % piece == 0;
  };
  for (size_t a = 0; a < mesh.size(); ++a) {
    uint64_t roll = rng() % 10;
    std::string name = "a" + std::to_string(a);
    if (roll < 4) continue;  // R
    if (roll == 9 && partial) {
      out[name] = "P(sum)";
      continue;
    }
    std::vector<size_t> dims;
    for (size_t d = 0; d < shape.size(); ++d)
      if (fits(d, mesh[a], 1)) dims.push_back(d);
    if (dims.empty()) continue;
    size_t d = dims[rng() % dims.size()];
    // Sometimes strided, as a fused QKV weight is: S(d,sf=k) views what is
    // left of dim d as [k, rest] and splits rest.
    int64_t sf = roll == 8 ? int64_t{2} + static_cast<int64_t>(rng() % 2) : 1;
    if (sf > 1 && !fits(d, mesh[a], sf)) sf = 1;
    int64_t piece = size[d] / mesh[a], run = size[d] / runs[d];
    runs[d] = sf > 1 ? (mesh[a] == 1 ? 1 : sf) : (piece % run == 0 ? piece / run : 1);
    size[d] = piece;
    out[name] = "S(" + std::to_string(d) + (sf > 1 ? ",sf=" + std::to_string(sf) : "") + ")";
  }
  return out;
}

std::vector<int64_t> staticShape(const ir::Value& v) {
  std::vector<int64_t> shape;
  for (const auto& d : v.type().sizes) shape.push_back(d.value());
  return shape;
}

/// The schema of case `seed` for model `m`.
nlohmann::json randomSchema(uint64_t seed, const ir::ExportedProgram& p) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> mesh = randomMesh(rng);
  nlohmann::json axes = nlohmann::json::array();
  for (size_t a = 0; a < mesh.size(); ++a) axes.push_back("a" + std::to_string(a));
  nlohmann::json params = nlohmann::json::array(), inputs = nlohmann::json::array();
  for (const ir::InputSpec& in : p.signature.inputs) {
    if (in.value == nullptr || !in.value->isTensor()) continue;
    bool user = in.kind == ir::InputKind::UserInput;
    if (!user && in.kind != ir::InputKind::Parameter && in.kind != ir::InputKind::Buffer) continue;
    ir::ScalarType t = in.value->type().dtype;
    // Stored weights are whole (R or S); a user input may also come as a
    // pending sum (rank 0 holds it, the others zeros).
    bool partial = user && (t == ir::ScalarType::Float || t == ir::ScalarType::Double);
    nlohmann::json placements = randomPlacements(rng, staticShape(*in.value), mesh, partial);
    if (placements.empty()) continue;
    (user ? inputs : params)
        .push_back({{"match", user ? in.value->name() : in.target}, {"placements", placements}});
  }
  return {{"version", 1},
          {"mesh", {{"shape", mesh}, {"axes", axes}}},
          {"params", params},
          {"inputs", inputs},
          {"outputs", "replicate"}};
}

/// Runs one case; returns "" when every output matches eager, else why not.
std::string runCase(uint64_t seed, const std::string& m) {
  References& md = references(m);
  auto archive = pt2::readArchive(modelDir(m) + "/model.pt2");  // compile takes it over
  if (!archive) return "read failed: " + archive.status().message();
  nlohmann::json schemaJson = randomSchema(seed, archive->program);
  std::string text = schemaJson.dump();
  auto schema = schema::parsePlacementSchema(text, "random");
  if (!schema) return "schema refused: " + schema.status().message() + "\n  " + text;
  auto r = passes::compile(*archive, *schema, {});
  if (!r) return "compile refused: " + r.status().message() + "\n  " + text;
  TempDir dir;
  program::ArchiveWeightSource weights(*archive);
  Status st = program::writeProgram(dir.file("p.spmd"), r->program, weights);
  if (!st.isOk()) return "write failed: " + st.message();
  auto program = program::readProgram(dir.file("p.spmd"));
  if (!program) return "read failed: " + program.status().message();
  auto out = runtime::runThreaded(*program, md.inputs);
  if (!out) return "run failed: " + out.status().message() + "\n  " + text;
  std::string bad;
  for (const auto& [name, exp] : md.expected) {
    auto it = out->outputs.find(name);
    if (it == out->outputs.end()) {
      bad += " " + name + " missing;";
      continue;
    }
    if (it->second.sizes() != exp.sizes()) {
      bad += " " + name + " has the wrong shape;";
      continue;
    }
    double err = exp.abs().max().item<double>() <= 1e-6 ? it->second.abs().max().item<double>() * 1e-1
                                                        : spmd::testing::relativeError(it->second, exp);
    if (!(err <= 1e-5)) bad += " " + name + " off by " + std::to_string(err) + ";";
  }
  return bad.empty() ? "" : "mismatch:" + bad + "\n  " + text;
}

}  // namespace

TEST_CASE("random layouts match eager PyTorch on every output and gradient") {
  int64_t count = envInt("SPMD_RANDOM_LAYOUTS", 40);
  auto first = static_cast<uint64_t>(envInt("SPMD_RANDOM_SEED", 1));
  int64_t failures = 0;
  std::map<std::string, int64_t> perModel;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t seed = first + static_cast<uint64_t>(i);
    std::string m = kModels[seed % std::size(kModels)];
    std::string why = runCase(seed, m);
    ++perModel[m];
    if (why.empty()) continue;
    ++failures;
    std::cout << "FAIL seed " << seed << " (" << m << "): " << why << std::endl;
  }
  std::cout << "random layouts: " << count << " cases from seed " << first << ", " << failures << " failed (";
  for (const auto& [m, n] : perModel) std::cout << " " << m << " " << n;
  std::cout << " )" << std::endl;
  CHECK(failures == 0);
}
