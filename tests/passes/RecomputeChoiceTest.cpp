// Recompute's collectives of activations (passes/Recompute.h), compiled
// without execution: a recomputed Megatron-TP layer saves its all-reduced
// values by default and, told to, re-issues the same all-reduces in the
// backward; and "auto" (chooseRecompute) counts both ways against a budget
// and takes re-issuing only when it fits with less recomputation and a
// faster modeled step, or when only it fits; and `--report`'s saved
// activations agree with the compile note. Numerics: ctest
// recompute_vs_checkpoint.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "../TestCatch.h"

#include "../TestUtil.h"
#include "ir/Collectives.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "passes/Recompute.h"
#include "passes/Report.h"
#include "program/Dump.h"
#include "program/Program.h"
#include "program/ProgramJson.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"
#include "sharding/DeviceProfile.h"

using namespace spmd;
using passes::RecomputeCollectives;

namespace {

// testdata/recompute's Llama train step: its ops carry module paths.
const std::string kModel = std::string(SPMD_TESTDATA_DIR) + "/recompute/llama_train_paths/model.pt2";

passes::CompileResult compileTp(std::optional<RecomputeCollectives> how) {
  auto archive = pt2::readArchive(kModel);
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(std::string(SPMD_SOURCE_DIR) + "/schemas/examples/llama_tp.json");
  REQUIRE(s.hasValue());
  s->recompute = {{"model.layers.*", schema::RecomputeMode::Full, {}}};
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  opts.recomputeCollectives = how;
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(*r);
}

int64_t allReduces(const program::Program& p) {
  const auto& nodes = p.graph.graph.nodes();
  return std::count_if(nodes.begin(), nodes.end(),
                       [](const auto& n) { return n->target() == ir::kAllReduce; });
}

std::string recomputeNote(const passes::CompileResult& r) {
  for (const std::string& n : r.notes)
    if (n.starts_with("recompute:")) return n;
  return "";
}

}  // namespace

TEST_CASE("a recomputed TP layer saves its all-reduced values by default and can re-issue them") {
  const passes::CompileResult saved = compileTp(std::nullopt);
  const passes::CompileResult again = compileTp(RecomputeCollectives::Reissue);
  const std::string savedNote = recomputeNote(saved), againNote = recomputeNote(again);
  INFO(savedNote << "\n" << againNote);
  // The all-reduces the recomputation reads (a layer's output, read by the
  // next layer, is kept either way).
  CHECK(savedNote.find("; 2 collectives of activations saved (") != std::string::npos);
  CHECK(againNote.find("; 2 collectives of activations re-issued (+") != std::string::npos);
  CHECK(allReduces(again.program) == allReduces(saved.program) + 2);
}

TEST_CASE("auto counts saving and re-issuing and takes the faster plan that fits") {
  auto archive = pt2::readArchive(kModel);
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset("dp");
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  auto compiled = passes::compile(*archive, *s, opts);
  REQUIRE(compiled.hasValue());
  const std::vector<schema::RecomputeRule> rules = {{"model.layers.*", schema::RecomputeMode::Auto, {}}};
  // A made-up cost: each level (a selective module 1, a full one 2; 2
  // modules, so 4 levels) frees 100 B and adds 0.1 s; re-issuing frees 150 B
  // more and adds `reissue` s.
  double reissue = 0;
  std::vector<std::string> tried;
  passes::PlanPeak peakOf = [&](const passes::RecomputePlan& plan) -> Expected<passes::PlanCost> {
    int level = 0;
    for (const auto& r : plan.rules)
      level += r.mode == schema::RecomputeMode::Full ? 2 : r.mode == schema::RecomputeMode::Selective ? 1 : 0;
    const bool again = plan.collectives == RecomputeCollectives::Reissue && level > 0;
    tried.push_back(std::to_string(level) + (again ? "r" : "s"));
    return passes::PlanCost{1000 - 100 * level - (again ? 150 : 0), 1 + 0.1 * level + (again ? reissue : 0)};
  };
  auto choose = [&](int64_t budget, std::optional<RecomputeCollectives> how, std::string& choice) {
    tried.clear();
    return passes::chooseRecompute(compiled->program, rules, budget, how, peakOf, choice);
  };
  std::string choice;
  SECTION("re-issuing fits two levels lower and is faster: taken") {
    reissue = 0.1;  // level 2 re-issued: 1.3 s; level 4 saved: 1.4 s
    auto plan = choose(650, std::nullopt, choice);
    REQUIRE(plan.hasValue());
    CHECK(plan->collectives == RecomputeCollectives::Reissue);
    CHECK(choice.starts_with("auto: 2 of 2 modules selective, 0 full, collectives of activations re-issued"));
  }
  SECTION("re-issuing fits lower but is slower: saved") {
    reissue = 0.5;  // level 2 re-issued: 1.7 s
    auto plan = choose(650, std::nullopt, choice);
    REQUIRE(plan.hasValue());
    CHECK(plan->collectives == RecomputeCollectives::Save);
    CHECK(choice.starts_with("auto: 0 of 2 modules selective, 2 full: estimated peak 600 B/rank"));
  }
  SECTION("only re-issuing fits: taken; below that: refused with the smallest peak") {
    auto plan = choose(500, std::nullopt, choice);
    REQUIRE(plan.hasValue());
    CHECK(plan->collectives == RecomputeCollectives::Reissue);
    CHECK(choice.find("estimated peak 450 B/rank") != std::string::npos);
    auto refused = choose(400, std::nullopt, choice);
    REQUIRE(!refused.hasValue());
    CHECK(refused.status().message().find("the smallest estimated peak is 450 B/rank") != std::string::npos);
  }
  SECTION("told to save: re-issuing is never tried") {
    reissue = 0.1;
    auto plan = choose(650, RecomputeCollectives::Save, choice);
    REQUIRE(plan.hasValue());
    CHECK(plan->collectives == RecomputeCollectives::Save);
    CHECK(std::none_of(tried.begin(), tried.end(), [](const auto& t) { return t.ends_with("r"); }));
  }
  SECTION(
      "hints (the peak without, a level to start from, its bytes freed) change the tries, never the plan") {
    for (double r : {0.1, 0.5}) {
      reissue = r;
      for (int64_t budget = 350; budget <= 1000; budget += 50) {
        std::string want;
        auto plain = choose(budget, std::nullopt, want);
        const std::vector<std::string> plainTries = tried;
        for (std::optional<int64_t> without : {std::optional<int64_t>{}, std::optional<int64_t>{1000}})
          for (std::optional<size_t> level :
               {std::optional<size_t>{}, std::optional<size_t>{1}, std::optional<size_t>{2},
                std::optional<size_t>{3}, std::optional<size_t>{4}, std::optional<size_t>{9}})
            for (std::optional<int64_t> saved : {std::optional<int64_t>{}, std::optional<int64_t>{30},
                                                 std::optional<int64_t>{300}, std::optional<int64_t>{5000}}) {
              INFO("budget " << budget << ", reissue " << r << ", hint level " << level.value_or(99)
                             << ", saved " << saved.value_or(-1));
              tried.clear();
              std::string got;
              auto hinted = passes::chooseRecompute(compiled->program, rules, budget, std::nullopt, peakOf,
                                                    got, false, {without, level, saved});
              REQUIRE(hinted.hasValue() == plain.hasValue());
              if (!plain) {
                CHECK(hinted.status().message() == plain.status().message());
                continue;
              }
              CHECK(got == want);
              CHECK(hinted->level == plain->level);
              CHECK(hinted->collectives == plain->collectives);
              // Over the budget as it is, the peak known: level 0 is not tried again.
              const bool zero = std::find(tried.begin(), tried.end(), "0s") != tried.end();
              CHECK(zero == (!without || budget >= 1000));
            }
        // Started at the level it takes, saving: that level and the one below only.
        if (plain && plain->collectives == RecomputeCollectives::Save && plain->level && *plain->level > 1) {
          tried.clear();
          std::string got;
          REQUIRE(passes::chooseRecompute(compiled->program, rules, budget, RecomputeCollectives::Save,
                                          peakOf, got, false, {1000, plain->level, std::nullopt})
                      .hasValue());
          CHECK(tried == std::vector<std::string>{std::to_string(*plain->level) + "s",
                                                  std::to_string(*plain->level - 1) + "s"});
          CHECK(plainTries.size() >= tried.size());
          // A layout alike that freed 300 B at level 3 (100 B a level, as
          // here): the level tried first is the one taken, whichever level
          // that layout took.
          tried.clear();
          REQUIRE(passes::chooseRecompute(compiled->program, rules, budget, RecomputeCollectives::Save,
                                          peakOf, got, false, {1000, 3, 300})
                      .hasValue());
          CHECK(tried == std::vector<std::string>{std::to_string(*plain->level) + "s",
                                                  std::to_string(*plain->level - 1) + "s"});
        }
      }
    }
  }
  SECTION("the plain step fits: nothing recomputed, nothing re-issued") {
    auto plan = choose(1000, std::nullopt, choice);
    REQUIRE(plan.hasValue());
    CHECK(plan->collectives == RecomputeCollectives::Save);
    CHECK(choice.starts_with("auto: 0 of 2 modules selective, 0 full"));
  }
}

TEST_CASE("the lowest fitting level: the same as a scan of every level, in few tries") {
  // Peaks over 65 levels, non-increasing: linear (alike layers), a kink at
  // level 32 (selective then full), convex and concave, with flat steps.
  const std::vector<std::pair<std::string, std::function<int64_t(size_t)>>> ladders = {
      {"linear", [](size_t l) { return int64_t{4'000'000} - 37'000 * static_cast<int64_t>(l); }},
      {"kink",
       [](size_t l) {
         const auto k = static_cast<int64_t>(l);
         return k <= 32 ? 4'000'000 - 30'000 * k : 3'040'000 - 5'000 * (k - 32);
       }},
      {"convex", [](size_t l) { return static_cast<int64_t>(4e6 / (1.0 + 0.2 * static_cast<double>(l))); }},
      {"concave", [](size_t l) { return int64_t{4'000'000} - static_cast<int64_t>(l * l * 900); }},
      {"steps", [](size_t l) { return int64_t{4'000'000} - 100'000 * static_cast<int64_t>(l / 8); }},
  };
  for (const auto& [name, peak] : ladders) {
    for (int64_t budget = peak(64); budget < peak(0); budget += (peak(0) - peak(64)) / 37 + 1) {
      size_t want = 0;
      while (peak(want) > budget) ++want;
      int tries = 0;
      auto costOf = [&, &peak = peak](size_t l) -> Expected<passes::PlanCost> {
        ++tries;
        return passes::PlanCost{peak(l), 1.0 + static_cast<double>(l)};
      };
      auto got = passes::lowestFitting(costOf, {0, {peak(0), 1.0}}, {64, {peak(64), 65.0}}, budget);
      REQUIRE(got.hasValue());
      INFO(name << " at budget " << budget);
      CHECK(got->first.level == want);
      CHECK(got->first.cost.peakBytes == peak(want));
      CHECK(got->second.level == want - 1);  // the level below, known over the budget
      CHECK(got->second.cost.peakBytes > budget);
      CHECK(tries <= 12);  // bisection: 6; twice that at worst
      if (name == "linear") CHECK(tries <= 2);
    }
  }
}

TEST_CASE("the plan search's program copy is the JSON round trip's, and independent") {
  passes::CompileResult r = compileTp(RecomputeCollectives::Save);
  auto text = program::programToJsonText(r.program);
  REQUIRE(text.hasValue());
  program::Program copy = program::copyProgram(r.program);
  REQUIRE(copy.graph.graph.verify().isOk());
  auto copied = program::programToJsonText(copy);
  REQUIRE(copied.hasValue());
  CHECK(*copied == *text);
  for (size_t i = 0; i < copy.graph.graph.numValues(); ++i) {
    const ir::Value* v = copy.graph.graph.valueById(static_cast<int>(i));
    for (const ir::Node* u : v->users())
      CHECK(u == copy.graph.graph.nodes()[static_cast<size_t>(u->index())].get());
  }
  copy.graph.graph.nodes().front()->mutableMetadata().stackTrace = "changed";
  copy.graph.graph.valueById(0)->mutableType().sizes.clear();
  copy.graph.graph.mutableOutputs().clear();
  copy.weights.clear();
  auto after = program::programToJsonText(r.program);
  REQUIRE(after.hasValue());
  CHECK(*after == *text);
}

namespace {

// `--report`'s per_rank.saved_activation_bytes of testdata/recompute's Llama
// train step under `preset` on 2 ranks, with `rules` ({} for none), and the
// compile note's "saved activations B -> A B/rank" as {B, A} ({-1, -1}
// without a note).
std::tuple<int64_t, int64_t, int64_t> savedActivations(const std::string& preset,
                                                       std::vector<schema::RecomputeRule> rules) {
  auto archive = pt2::readArchive(kModel);
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(preset);
  REQUIRE(s.hasValue());
  s->recompute = std::move(rules);
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2};
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  auto report = nlohmann::json::parse(passes::reportJson(*r));
  int64_t reported = report["per_rank"]["saved_activation_bytes"].get<int64_t>();
  std::string note = recomputeNote(*r);
  std::erase(note, ',');
  std::smatch m;
  if (!std::regex_search(note, m, std::regex("saved activations (\\d+) -> (\\d+) B/rank")))
    return {reported, -1, -1};
  return {reported, std::stoll(m[1]), std::stoll(m[2])};
}

}  // namespace

TEST_CASE("the report's saved activations fall under full recompute, as the compile note says") {
  // dp buckets the loss's all-reduce with the gradients' (bucket-collectives,
  // after recompute): the report must not count the gradients, nor the
  // recomputation in the backward, as forward. fsdp buckets parameter
  // gathers (bucket-shard-collectives, after recompute): a recomputed
  // layer's re-gather must stay in the backward, not join the forward's.
  // The note's first figure is taken before reshard-after-forward, which
  // under fsdp then drops the gathered weights the plain step would save.
  for (const std::string preset : {"dp", "fsdp"}) {
    auto [none, noneBefore, noneAfter] = savedActivations(preset, {});
    auto [full, before, after] =
        savedActivations(preset, {{"model.layers.*", schema::RecomputeMode::Full, {}}});
    INFO(preset << ": report: none " << none << ", full " << full << "; note: " << before << " -> " << after);
    CHECK(noneBefore == -1);  // nothing recomputed, no note
    CHECK(noneAfter == -1);
    CHECK((preset == "dp" ? before == none : before > none));
    CHECK(after == full);
    CHECK(full * 2 < none);
  }
}

TEST_CASE("auto's tries figure the note once: as the plan compiled as it is, and none when not asked") {
  // The "auto" search figures the saved activations and FLOPs before
  // recomputation on its first try only (RecomputeFigures), and the
  // pricing of --schema auto none at all: the plan, the program and the
  // note of the plan given as it is must not change.
  auto s = schema::loadSchemaOrPreset("dp");
  REQUIRE(s.hasValue());
  s->recompute = {{"model.layers.*", schema::RecomputeMode::Auto, {}}};
  auto compileWith = [&](const schema::PlacementSchema& schema, bool notes, int64_t budget) {
    auto archive = pt2::readArchive(kModel, {.loadWeights = false});
    REQUIRE(archive.hasValue());
    passes::CompileOptions opts;
    opts.mesh = std::vector<int64_t>{2};
    opts.memoryBudget = budget;
    opts.recomputeNotes = notes;
    auto r = passes::compile(*archive, schema, opts);
    if (!r) FAIL(r.status().message());
    return std::move(*r);
  };
  // Halfway between no recomputation and every module full: a level
  // within the ladder fits, and the compile takes its try's program.
  schema::PlacementSchema none = *s, full = *s;
  none.recompute.clear();
  full.recompute = {{"model.layers.*", schema::RecomputeMode::Full, {}}};
  const auto peak = [&](const schema::PlacementSchema& x) {
    return passes::modelLayout(compileWith(x, true, 0).program, sharding::defaultDeviceProfile()).peakBytes;
  };
  const int64_t budget = (peak(none) + peak(full)) / 2;
  const passes::CompileResult chosen = compileWith(*s, true, budget);
  REQUIRE(chosen.recomputePlan.has_value());
  schema::PlacementSchema given = *s;
  given.recompute = chosen.recomputePlan->rules;
  const passes::CompileResult plain = compileWith(given, true, budget);
  const std::string note = recomputeNote(chosen), plainNote = recomputeNote(plain);
  INFO(note << "\n" << plainNote);
  REQUIRE(!plainNote.empty());
  CHECK(chosen.recomputeChoice.find(" 0 of 2 modules selective") == std::string::npos);
  CHECK(note == plainNote + "; " + chosen.recomputeChoice);
  const passes::CompileResult quiet = compileWith(*s, false, budget);
  REQUIRE(quiet.recomputePlan.has_value());
  CHECK(quiet.recomputeChoice == chosen.recomputeChoice);
  CHECK(program::dumpProgram(quiet.program) == program::dumpProgram(chosen.program));
}
