// Layout and recomputation chosen together (JointRecompute.h): the front of
// layouts priced, the order and the stop, the error; on
// testdata/recompute's Llama train step (module paths kept), the budget
// regimes of autoShard at 2 and 2x2 ranks.
#include "AutoTestUtil.h"
#include "autoshard/JointRecompute.h"
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
