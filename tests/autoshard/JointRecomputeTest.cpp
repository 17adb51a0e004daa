// Layout and recomputation chosen together (JointRecompute.h): the front of
// layouts priced, the order and the stop, the error; on
// testdata/recompute's Llama train step (module paths kept), the budget
// regimes of autoShard at 2 and 2x2 ranks.
#include "AutoTestUtil.h"
#include "autoshard/JointRecompute.h"
#include "program/Dump.h"
#include "support/Strings.h"

using namespace spmd;
using autoshard::Evaluated;
using autoshard::JointCandidate;

namespace {

// A layout named `name` whose step is `ms` milliseconds and peak `peak` B.
JointCandidate layout(const std::string& name, double ms, int64_t peak) {
  JointCandidate c;
  c.choice = {static_cast<size_t>(ms)};
  c.seen.name = name;
  c.seen.cost.computeSeconds = ms * 1e-3;
  c.seen.cost.peakBytes = peak;
  return c;
}

std::vector<std::string> names(const std::vector<JointCandidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.seen.name);
  return out;
}

std::vector<std::string> names(const std::vector<Evaluated>& es) {
  std::vector<std::string> out;
  for (const auto& e : es) out.push_back(e.name);
  return out;
}

// Prices as the joint search would with made-up recomputation: a layout
// over `budget` recomputes, adding `extraMs` and cutting its peak by
// `saved` bytes (fits or not as that falls).
autoshard::JointPrice madeUp(int64_t budget, double extraMs, int64_t saved) {
  return [=](const JointCandidate& c) -> Expected<Evaluated> {
    Evaluated e = c.seen;
    e.fits = e.cost.peakBytes <= budget;
    if (e.fits) return e;
    e.plain = e.cost;
    e.cost.computeSeconds += extraMs * 1e-3;
    e.cost.peakBytes -= saved;
    e.fits = e.cost.peakBytes <= budget;
    return e;
  };
}

}  // namespace

TEST_CASE("joint recompute: the front keeps layouts nothing beats on both step and peak, fastest first") {
  auto front =
      autoshard::paretoFront({layout("x", 1.5, 7000), layout("fsdp", 1.4, 5000), layout("dp", 1.0, 9000),
                              layout("tp", 1.2, 6000), layout("tp-fat", 1.2, 6500)});
  CHECK(names(front) == std::vector<std::string>{"dp", "tp", "fsdp"});
}

TEST_CASE(
    "joint recompute: replicate + recompute beats shard + save when it is faster, and the search stops") {
  auto order =
      autoshard::paretoFront({layout("dp", 1.0, 9000), layout("tp", 1.2, 6000), layout("fsdp", 1.4, 5000)});
  // Budget 8000: dp recomputes (9000 -> 7000, +0.1 ms) and fits at 1.1 ms;
  // tp's plain step (1.2 ms) is already slower: not priced.
  auto out = autoshard::chooseJointly(order, madeUp(8000, 0.1, 2000), 4);
  REQUIRE(out.best);
  CHECK(out.best->name == "dp");
  CHECK(out.best->plain);
  CHECK(out.best->cost.peakBytes == 7000);
  CHECK(names(out.tried) == std::vector<std::string>{"dp"});
  // Recomputation costs 0.5 ms: tp (fits as it is, 1.2 ms) wins; fsdp is
  // not priced (1.4 ms plain).
  out = autoshard::chooseJointly(order, madeUp(8000, 0.5, 2000), 4);
  REQUIRE(out.best);
  CHECK(out.best->name == "tp");
  CHECK_FALSE(out.best->plain);
  REQUIRE(out.second);
  CHECK(out.second->name == "dp");
  CHECK(names(out.tried) == std::vector<std::string>{"dp", "tp"});
  // Budget 5500: dp recomputed (7000) does not fit, tp recomputed (4000,
  // 1.3 ms) does; fsdp, fitting as it is, is slower plain (1.4 ms): not
  // priced.
  out = autoshard::chooseJointly(order, madeUp(5500, 0.1, 2000), 4);
  REQUIRE(out.best);
  CHECK(out.best->name == "tp");
  CHECK(out.best->plain);
  CHECK(names(out.tried) == std::vector<std::string>{"dp", "tp"});
  // Recomputation costs 0.3 ms: tp at 1.5 ms, and fsdp (1.4 ms as it is)
  // is priced and wins.
  out = autoshard::chooseJointly(order, madeUp(5500, 0.3, 2000), 4);
  REQUIRE(out.best);
  CHECK(out.best->name == "fsdp");
  CHECK_FALSE(out.best->plain);
  CHECK(names(out.tried) == std::vector<std::string>{"dp", "tp", "fsdp"});
}

TEST_CASE("joint recompute: with none fitting by the limit the leanest is priced; the error names them all") {
  auto order =
      autoshard::paretoFront({layout("dp", 1.0, 9000), layout("tp", 1.2, 6000), layout("fsdp", 1.4, 5000)});
  auto out = autoshard::chooseJointly(order, madeUp(3500, 0.1, 1000), 1);
  CHECK_FALSE(out.best);
  CHECK(names(out.tried) == std::vector<std::string>{"dp", "fsdp"});
  Status st = autoshard::noJointFit(3500, "model.layers.*", out.tried);
  CHECK(
      st.message() ==
      "--schema auto: no layout fits the memory budget of 3,500 B/rank, even recomputing model.layers.*: the "
      "smallest peak found is 4,000 B/rank (fsdp); tried dp 8,000 B recomputed (9,000 B without), fsdp 4,000 "
      "B "
      "recomputed (5,000 B without); raise --memory-budget or use a larger mesh");
}

TEST_CASE("joint recompute: a layout whose weights alone exceed the budget is named so in the error") {
  Evaluated dp = layout("dp", 1.0, 9000).seen, fsdp = layout("fsdp", 1.4, 5000).seen;
  dp.cost.paramBytes = 4000;  // over the budget: not recomputed
  fsdp.cost.paramBytes = 2000;
  fsdp.plain = fsdp.cost;
  fsdp.cost.peakBytes = 4500;
  Status st = autoshard::noJointFit(3500, "model.layers.*", {dp, fsdp});
  CHECK(
      st.message() ==
      "--schema auto: no layout fits the memory budget of 3,500 B/rank, even recomputing model.layers.*: the "
      "smallest peak found is 4,500 B/rank (fsdp); tried dp 9,000 B (weights and optimizer states alone "
      "4,000 B), fsdp 4,500 B recomputed (5,000 B without); raise --memory-budget or use a larger mesh");
}

TEST_CASE("joint recompute: the glob is the layer stack of a train step whose ops name their modules") {
  auto read = [](const std::string& path) {
    auto a = pt2::readArchive(path, {.loadWeights = false});
    REQUIRE(a.hasValue());
    return std::move(*a);
  };
  auto paths = read(std::string(SPMD_TESTDATA_DIR) + "/recompute/llama_train_paths/model.pt2");
  CHECK(autoshard::recomputeGlob(paths.program) == std::optional<std::string>("model.layers.*"));
  // torch.export's joint route keeps no module paths; a forward has no loss.
  CHECK_FALSE(autoshard::recomputeGlob(read(spmd::testing::modelPath("llama_train")).program));
  CHECK_FALSE(autoshard::recomputeGlob(read(spmd::testing::modelPath("llama")).program));
  auto s = autoshard::withRecompute(*schema::presetSchema("dp"), "model.layers.*");
  REQUIRE(s.recompute.size() == 1);
  CHECK(s.recompute[0].mode == schema::RecomputeMode::Auto);
  CHECK(autoshard::schemaJson(s, "").find("\"recompute\": {\n  \"model.layers.*\": \"auto\"\n }") !=
        std::string::npos);
}

TEST_CASE("joint recompute: the winner's plan, handed to the compile, is the program a fresh compile gives") {
  const std::string path = std::string(SPMD_TESTDATA_DIR) + "/recompute/llama_train_paths/model.pt2";
  auto compileWith = [&](const schema::PlacementSchema& s, const passes::CompileOptions& opts) {
    auto a = pt2::readArchive(path, {.loadWeights = false});
    REQUIRE(a.hasValue());
    auto r = passes::compile(*a, s, opts);
    if (!r) FAIL(r.status().message());
    return std::move(*r);
  };
  autoshard::AutoOptions o;
  o.mesh = *sharding::Mesh::create({2});
  auto plain = autoshard::autoShard(path, o);
  REQUIRE(plain.hasValue());
  // Half way from the plain peak to full recomputation's (auto_recompute's
  // "below" budget): the layout only fits recomputed.
  schema::PlacementSchema full = plain->chosen.schema;
  full.recompute = {schema::RecomputeRule{"model.layers.*", schema::RecomputeMode::Full, {}}};
  passes::CompileOptions base;
  base.mesh = std::vector<int64_t>{2};
  const int64_t p0 = plain->chosen.cost.peakBytes;
  const int64_t pfull =
      passes::modelLayout(compileWith(full, base).program, sharding::defaultDeviceProfile()).peakBytes;
  REQUIRE(pfull < p0);
  o.memoryBudget = pfull + (p0 - pfull) / 2;
  auto r = autoshard::autoShard(path, o);
  REQUIRE(r.hasValue());
  REQUIRE(r->chosen.plain);
  REQUIRE(r->chosen.recomputePlan);
  CHECK(r->chosen.recomputeChoice.starts_with("auto: "));
  const passes::RecomputePlan& plan = *r->chosen.recomputePlan;
  CHECK(std::none_of(plan.rules.begin(), plan.rules.end(),
                     [](const auto& rule) { return rule.mode == schema::RecomputeMode::Auto; }));

  passes::CompileOptions budgeted = base;
  budgeted.memoryBudget = o.memoryBudget;
  passes::CompileOptions handed = budgeted;  // what spmdc compile does with the winner
  handed.recomputePlan = plan;
  handed.recomputeChoice = r->chosen.recomputeChoice;
  schema::PlacementSchema explicitPlan = r->chosen.schema;  // "recompute": <that plan>
  explicitPlan.recompute = plan.rules;
  passes::CompileOptions fresh = base;
  fresh.recomputeCollectives = plan.collectives;

  auto got = compileWith(r->chosen.schema, handed);
  auto want = compileWith(explicitPlan, fresh);
  auto searched = compileWith(r->chosen.schema, budgeted);  // the search run again
  const std::string text = program::dumpProgram(got.program);
  CHECK(text == program::dumpProgram(want.program));
  CHECK(text == program::dumpProgram(searched.program));
  CHECK(got.recomputeChoice == searched.recomputeChoice);
  // The search's program of the plan it chose is the one taken, not made again.
  CHECK(std::any_of(searched.timingsMs.begin(), searched.timingsMs.end(),
                    [](const auto& t) { return t.first == "passes (as the recompute search ran them)"; }));
  CHECK(searched.notes == got.notes);
  const auto cost = passes::modelLayout(got.program, sharding::defaultDeviceProfile());
  CHECK(cost.peakBytes == r->chosen.cost.peakBytes);
  CHECK(cost.peakBytes <= *o.memoryBudget);
  // The plan handed is the one applied, with no search of its own.
  passes::CompileOptions handedFull = budgeted;
  handedFull.recomputePlan =
      passes::RecomputePlan{full.recompute, passes::RecomputeCollectives::Save, std::nullopt};
  schema::PlacementSchema chosenFull = r->chosen.schema;
  chosenFull.recompute = full.recompute;
  CHECK(program::dumpProgram(compileWith(r->chosen.schema, handedFull).program) ==
        program::dumpProgram(compileWith(chosenFull, base).program));
}

TEST_CASE("joint recompute: layouts whose weights alone exceed the budget are not recomputed") {
  const std::string path = std::string(SPMD_TESTDATA_DIR) + "/recompute/llama_train_paths/model.pt2";
  autoshard::AutoOptions o;
  o.mesh = *sharding::Mesh::create({2});
  auto plain = autoshard::autoShard(path, o);
  REQUIRE(plain.hasValue());
  // Below the weights and optimizer states of the fastest layout (replicated
  // layers): no recomputation can make it fit, and none is tried on it.
  const int64_t weights = plain->chosen.cost.paramBytes;
  o.memoryBudget = weights - 1;
  auto r = autoshard::autoShard(path, o);
  REQUIRE_FALSE(r.hasValue());
  CHECK(r.status().message().find("(weights and optimizer states alone " + withCommas(weights) + " B)") !=
        std::string::npos);
  CHECK(r.status().message().find("no layout fits the memory budget of " + withCommas(weights - 1)) !=
        std::string::npos);
}
