// --schema auto: the exhaustive optimum of the cost model on small graphs,
// never worse than the presets and the hand-written Megatron schemas on
// llama, the three memory-budget regimes.
#include "AutoTestUtil.h"
#include "support/Strings.h"

using namespace spmd;
using spmd::testing::autoOrFail;
using spmd::testing::costOf;
using spmd::testing::examplePath;
using spmd::testing::modelPath;

namespace {

// The cheapest step time over every assignment of the groups' options,
// compiled and modeled one by one (independently of the solver's search).
double exhaustiveOptimum(const std::string& m, const sharding::Mesh& mesh,
                         const schema::PlacementSchema* pins, bool gather, int64_t* count) {
  auto archive = pt2::readArchive(modelPath(m), {.loadWeights = false});
  REQUIRE(archive.hasValue());
  auto groups =
      autoshard::buildGroups(archive->program, mesh, autoshard::pinnedNames(archive->program, pins), gather);
  std::vector<size_t> c(groups.size(), 0);
  double best = 1e30;
  *count = 0;
  while (true) {
    auto cost = costOf(m, autoshard::schemaFor(groups, c, mesh, pins), mesh.shape());
    ++*count;
    if (cost) best = std::min(best, cost->stepSeconds());
    size_t i = 0;
    for (; i < groups.size(); ++i) {
      if (++c[i] < groups[i].options.size()) break;
      c[i] = 0;
    }
    if (i == groups.size()) return best;
  }
}

// gpt_block with only the six matmul weights free (norms and biases
// replicated, x split over the batch): small enough to enumerate.
schema::PlacementSchema gptBlockPins() {
  schema::PlacementSchema pins;
  pins.source = "pins";
  for (const char* m : {"ln*", "*bias"}) pins.params.push_back({.match = m});
  schema::PlacementRule x{.match = "x"};
  x.byAxis = {{"x", sharding::Placement::shard(0)}};
  pins.inputs.push_back(x);
  return pins;
}

}  // namespace

TEST_CASE("auto finds the exhaustive optimum of mlp on 2 and 4 ranks, by enumeration and by local search") {
  for (int64_t n : {2, 4}) {
    INFO("mesh " << n);
    auto mesh = *sharding::Mesh::create({n});
    int64_t count = 0;
    double optimum = exhaustiveOptimum("mlp", mesh, nullptr, true, &count);
    CHECK(count > 100);  // every layout of 5 tensors, gathered variants too
    auto r = autoOrFail("mlp", {n}, {});
    CHECK(r.method == "exhaustive");
    CHECK(r.chosen.cost.stepSeconds() == Approx(optimum).epsilon(1e-12));
    autoshard::AutoOptions local;
    local.exhaustiveLimit = 0;
    auto l = autoOrFail("mlp", {n}, {}, local);
    CHECK(l.method == "local search on the quick model, 4 best compiled");
    CHECK(l.quickEvaluations > 0);
    CHECK(l.evaluations <= 4 + 2);  // the 4 finalists, then dp and fsdp for the report
    CHECK(l.chosen.cost.stepSeconds() == Approx(optimum).epsilon(1e-12));
    local.finalists = 0;  // every layout the search visits compiled
    auto every = autoOrFail("mlp", {n}, {}, local);
    CHECK(every.method == "local search");
    CHECK(every.quickEvaluations == 0);
    CHECK(every.chosen.cost.stepSeconds() == Approx(optimum).epsilon(1e-12));
    CHECK(every.evaluations < count);
  }
}

TEST_CASE("auto finds the exhaustive optimum of gpt_block's matmul weights on 2 and 4 ranks") {
  schema::PlacementSchema pins = gptBlockPins();
  for (int64_t n : {2, 4}) {
    INFO("mesh " << n);
    auto mesh = *sharding::Mesh::create({n});
    int64_t count = 0;
    double optimum = exhaustiveOptimum("gpt_block", mesh, &pins, false, &count);
    CHECK(count == 729);  // 3 layouts (R, S(0), S(1)) of 6 weights
    autoshard::AutoOptions o;
    o.pins = &pins;
    o.allowGather = false;
    auto r = autoOrFail("gpt_block", {n}, {}, o);
    CHECK(r.chosen.cost.stepSeconds() == Approx(optimum).epsilon(1e-12));
    o.exhaustiveLimit = 0;
    auto l = autoOrFail("gpt_block", {n}, {}, o);
    INFO("local search reached " << l.chosen.cost.stepSeconds() << " s, optimum " << optimum << " s");
    CHECK(l.chosen.cost.stepSeconds() == Approx(optimum).epsilon(1e-12));
  }
}

TEST_CASE(
    "on llama and llama_train at 4 and 2x2, auto costs no more than dp, fsdp and the Megatron schemas") {
  struct Case {
    std::string model, optimizer;
    std::vector<int64_t> mesh;
    std::vector<std::string> axes;
    std::string handWritten;
  };
  const Case cases[] = {{"llama", "", {4}, {"tp"}, "llama_tp.json"},
                        {"llama", "", {2, 2}, {"dp", "tp"}, "llama_dp_tp.json"},
                        {"llama_train", "adamw", {4}, {"tp"}, "llama_tp.json"},
                        {"llama_train", "adamw", {2, 2}, {"dp", "tp"}, "llama_dp_tp.json"}};
  for (const Case& c : cases) {
    INFO(c.model << " on " << c.mesh.size() << "-D mesh");
    autoshard::AutoOptions o;
    o.compile.optimizer.kind = c.optimizer;
    o.timeLimitSeconds = 8;
    auto r = autoOrFail(c.model, c.mesh, c.axes, o);
    double chosen = r.chosen.cost.stepSeconds();
    // The chosen schema compiles to the cost autoShard reports.
    auto again = costOf(c.model, r.chosen.schema, c.mesh, c.optimizer);
    REQUIRE(again.has_value());
    CHECK(again->stepSeconds() == Approx(chosen).epsilon(1e-12));
    int compared = 0;
    for (const std::string s : {std::string("dp"), std::string("fsdp"), examplePath(c.handWritten)}) {
      auto schema = schema::loadSchemaOrPreset(s);
      REQUIRE(schema.hasValue());
      if (schema->preset != schema::Preset::None) schema->meshAxes = c.axes;
      auto cost = costOf(c.model, *schema, c.mesh, c.optimizer);
      if (!cost) continue;  // dp and fsdp split a batch of 2: not on 4 ranks
      ++compared;
      INFO(s << ": " << cost->stepSeconds() << " s, auto " << chosen << " s");
      CHECK(chosen <= cost->stepSeconds() * (1 + 1e-12));
    }
    CHECK(compared >= 1);
  }
}

TEST_CASE("memory budgets: unlimited picks the fastest; below dp shards parameters; too small is an error") {
  autoshard::AutoOptions o;
  o.compile.optimizer.kind = "adamw";
  auto dp = costOf("llama_train", *schema::presetSchema("dp"), {2}, "adamw");
  auto fsdp = costOf("llama_train", *schema::presetSchema("fsdp"), {2}, "adamw");
  REQUIRE((dp && fsdp));
  REQUIRE(fsdp->peakBytes < dp->peakBytes);

  auto unlimited = autoOrFail("llama_train", {2}, {}, o);
  for (const auto& a : unlimited.alternatives)
    CHECK(unlimited.chosen.cost.stepSeconds() <= a.cost.stepSeconds());
  CHECK(unlimited.chosen.cost.stepSeconds() <= dp->stepSeconds());

  o.memoryBudget = dp->peakBytes - 1;
  auto belowDp = autoOrFail("llama_train", {2}, {}, o);
  CHECK(belowDp.chosen.cost.peakBytes <= *o.memoryBudget);
  int shardedParams = 0;
  for (const auto& [match, option] : belowDp.choices)
    if (match != "tokens" && match != "labels" && option != "[R]") ++shardedParams;
  CHECK(shardedParams > 0);

  o.memoryBudget = fsdp->peakBytes - 1;
  auto belowFsdp = autoshard::autoShard(modelPath("llama_train"), [&] {
    autoshard::AutoOptions x = o;
    x.mesh = *sharding::Mesh::create({2});
    return x;
  }());
  if (belowFsdp) {
    CHECK(belowFsdp->chosen.cost.peakBytes <= *o.memoryBudget);
  } else {
    CHECK(belowFsdp.status().message().find("no layout fits the memory budget") != std::string::npos);
  }

  o.memoryBudget = 1024;
  o.mesh = *sharding::Mesh::create({2});
  auto none = autoshard::autoShard(modelPath("llama_train"), o);
  REQUIRE_FALSE(none.hasValue());
  CHECK(none.status().message().find("--schema auto: no layout fits the memory budget of 1,024 B/rank: the "
                                     "leanest layout found needs ") == 0);
}

TEST_CASE("byte sizes: units and errors") {
  CHECK(*parseByteSize("--memory-budget", "40GiB") == 40LL << 30);
  CHECK(*parseByteSize("--memory-budget", "1.5GB") == 1500000000LL);
  CHECK(*parseByteSize("--memory-budget", "512MiB") == 512LL << 20);
  CHECK(*parseByteSize("--memory-budget", "1000") == 1000);
  auto bad = parseByteSize("--memory-budget", "40 parsecs");
  REQUIRE_FALSE(bad.hasValue());
  CHECK(bad.status().message().find("--memory-budget 40 parsecs: expected a positive size") == 0);
  CHECK_FALSE(parseByteSize("--memory-budget", "-1GiB").hasValue());
}
