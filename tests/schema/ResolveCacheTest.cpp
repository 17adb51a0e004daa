// resolvePlacements with a ResolveCache gives what it gives without one, for
// random schemas against real archives, one cache serving every schema of a
// program in turn (the way auto-sharding's search uses it).
//
//   llama_train, mesh 2x2, {"preset": "fsdp", "params": [{"match":
//   "*layers.*.wq.weight", "placements": {"b": "S(1)"}}]} -> the same specs,
//   notes and warnings, or the same error, with and without the cache
#include "../TestCatch.h"

#include <random>

#include "pt2/Archive.h"
#include "schema/Resolve.h"

using namespace spmd::schema;
namespace ir = spmd::ir;

namespace {

// A glob for `name`: itself, a digit run as '*', a prefix with '*', or one
// that matches nothing.
std::string globFor(const std::string& name, std::mt19937& rng) {
  switch (rng() % 5) {
    case 0:
      return name;
    case 1: {
      std::string out;
      for (char c : name)
        if (c < '0' || c > '9')
          out += c;
        else if (out.empty() || out.back() != '*')
          out += '*';
      return out;
    }
    case 2:
      return name.substr(0, rng() % (name.size() + 1)) + "*";
    case 3:
      return "*" + name.substr(name.size() / 2);
    default:
      return name + ".nothing";
  }
}

std::string placement(std::mt19937& rng, bool partial) {
  const char* choices[] = {"R", "S(0)", "S(1)", "S(-1)", "S(2)", "P"};
  return choices[rng() % (partial ? 6 : 5)];
}

// A random schema over `names` (parameter FQNs) and `inputs` (user input
// names), as JSON text.
std::string randomSchema(const std::vector<std::string>& names, const std::vector<std::string>& inputs,
                         std::mt19937& rng) {
  const bool twoD = rng() % 2 == 0;
  std::string s = R"({"version": 1, "mesh": {"shape": )" +
                  std::string(twoD ? "[2, 2], \"axes\": [\"a\", \"b\"]" : "[2], \"axes\": [\"a\"]") + "}";
  const char* presets[] = {"dp", "fsdp", "hsdp"};
  if (rng() % 3 == 0) s += std::string(", \"preset\": \"") + presets[rng() % (twoD ? 3 : 2)] + "\"";
  auto rules = [&](const std::vector<std::string>& from, bool params) {
    std::string out = "[";
    for (size_t k = 0, n = rng() % 6; k < n && !from.empty(); ++k) {
      out += k ? ", " : "";
      out += R"({"match": ")" + globFor(from[rng() % from.size()], rng) + R"(", "placements": {"a": ")" +
             placement(rng, !params) + "\"";
      if (twoD) out += R"(, "b": ")" + placement(rng, !params) + "\"";
      out += "}";
      if (rng() % 3 == 0) out += R"(, "optional": true)";
      if (rng() % 4 == 0) out += R"(, "where_divisible": true)";
      if (params && rng() % 3 == 0) out += R"(, "gather": true)";
      out += "}";
    }
    return out + "]";
  };
  s += ", \"params\": " + rules(names, true) + ", \"inputs\": " + rules(inputs, false);
  s += rng() % 2 ? R"(, "outputs": "replicate"})" : R"(, "outputs": "any"})";
  return s;
}

}  // namespace

TEST_CASE("a ResolveCache changes nothing but the time: random schemas, real archives", "[schema][resolve]") {
  int resolvedCount = 0, refused = 0;
  for (const char* model : {"mlp_train", "llama_train", "tied_lm", "gpt_block", "moe", "cnn_train"}) {
    auto archive = spmd::pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + model + "/model.pt2",
                                          {.loadWeights = false});
    INFO(model << ": " << archive.status().message());
    REQUIRE(archive.hasValue());
    const ir::ExportedProgram& p = archive->program;
    std::vector<std::string> names, inputs;
    for (const auto& in : p.signature.inputs)
      (in.kind == ir::InputKind::UserInput ? inputs : names)
          .push_back(in.kind == ir::InputKind::UserInput ? in.value->name() : in.target);
    ResolveCache cache(p);
    std::mt19937 rng(2026);
    for (int k = 0; k < 150; ++k) {
      std::string text = randomSchema(names, inputs, rng);
      INFO(text);
      auto schema = parsePlacementSchema(text, "s.json");
      REQUIRE(schema.hasValue());
      auto plain = resolvePlacements(*schema, p, std::nullopt);
      auto cached = resolvePlacements(*schema, p, std::nullopt, &cache);
      REQUIRE(plain.hasValue() == cached.hasValue());
      if (!plain) {
        CHECK(cached.status().message() == plain.status().message());
        ++refused;
        continue;
      }
      ++resolvedCount;
      CHECK(cached->mesh.str() == plain->mesh.str());
      CHECK(cached->inputs == plain->inputs);
      CHECK(cached->gathered == plain->gathered);
      CHECK(cached->outputs == plain->outputs);
      CHECK(cached->notes == plain->notes);
      CHECK(cached->warnings == plain->warnings);
    }
  }
  // Both paths are exercised: schemas that resolve and schemas refused.
  CHECK(resolvedCount > 100);
  CHECK(refused > 100);
}
