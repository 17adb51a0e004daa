// The redistribution planner, checked numerically on simulated ranks.
//
//   for every (from, to) over {R, S(0), S(1), P(sum), P(avg), P(max)} per
//   axis, on meshes 2, 4, 2x2, 2x4: plan, run every step on the simulated
//   ranks, and check that the ranks hold exactly what `to` dictates.
#include "../TestCatch.h"

#include <random>

#include "ReshardSimulator.h"
#include "sharding/Reshard.h"

using namespace spmd::sharding;
using K = CollectiveKind;

namespace {

Placement parsed(std::string_view text) {
  auto p = parsePlacement(text);
  REQUIRE(p.hasValue());
  return *p;
}

ShardingSpec spec(std::initializer_list<const char*> texts) {
  ShardingSpec s;
  for (const char* t : texts) s.placements.push_back(parsed(t));
  return s;
}

std::string describe(const std::vector<int64_t>& shape, const ShardingSpec& from, const ShardingSpec& to,
                     const Mesh& mesh) {
  std::string s = "shape [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "] mesh " + mesh.str() + ": " + from.str() + " -> " + to.str();
}

/// Checks the plan's own bookkeeping: the chain of specs and the total cost.
std::string checkChain(const ReshardPlan& plan, const ShardingSpec& from, const ShardingSpec& to) {
  if (plan.steps.empty()) return from == to && plan.cost == 0.0 ? "" : "empty plan for different specs";
  double total = 0;
  ShardingSpec cur = from;
  for (const ReshardStep& step : plan.steps) {
    if (step.before != cur) return "step " + step.str() + " does not start from " + cur.str();
    if (step.before.placements[static_cast<size_t>(step.axis)] != step.from ||
        step.after.placements[static_cast<size_t>(step.axis)] != step.to)
      return "step " + step.str() + " has inconsistent from/to";
    if (step.cost < 0) return "negative cost in " + step.str();
    total += step.cost;
    cur = step.after;
  }
  if (cur != to) return "plan ends at " + cur.str();
  if (std::abs(total - plan.cost) > 1e-12 * std::max(1.0, total))
    return "plan cost is not the sum of its steps";
  return "";
}

/// Plans from -> to, runs it on simulated ranks, checks the result; "" if right.
std::string checkReshard(const std::vector<int64_t>& shape, const ShardingSpec& from, const ShardingSpec& to,
                         const Mesh& mesh, std::mt19937& rng) {
  auto plan = planReshard(shape, 4, from, to, mesh);
  if (!plan) return "planner error: " + plan.status().message();
  auto rank = static_cast<int64_t>(shape.size());
  ShardingSpec fromN = *normalizeSpec(from, rank, mesh);
  ShardingSpec toN = *normalizeSpec(to, rank, mesh);
  if (std::string err = checkChain(*plan, fromN, toN); !err.empty()) return err;
  sim::SimTensor global = sim::randomTensor(shape, rng);
  std::vector<sim::SimTensor> ranks = sim::distribute(global, fromN, mesh, rng);
  for (const ReshardStep& step : plan->steps)
    if (std::string err = sim::executeStep(step, mesh, ranks, shape); !err.empty()) return err;
  for (int64_t r = 0; r < mesh.numRanks(); ++r)
    if (ranks[static_cast<size_t>(r)].shape != localShape(shape, toN, mesh, mesh.coords(r)))
      return "rank " + std::to_string(r) + " ends with the wrong local shape";
  if (!toN.hasPartial()) {  // no freedom: every rank's data is fixed
    std::vector<sim::SimTensor> expected = sim::distribute(global, toN, mesh, rng);
    for (size_t r = 0; r < ranks.size(); ++r)
      if (std::string diff = sim::compare(ranks[r], expected[r]); !diff.empty())
        return "rank " + std::to_string(r) + " holds wrong data: " + diff + "\nplan:\n" + plan->str();
    return "";
  }
  sim::SimTensor rebuilt;
  std::string why;
  if (!sim::assemble(ranks, toN, mesh, rebuilt, why)) return why + "\nplan:\n" + plan->str();
  if (std::string diff = sim::compare(rebuilt, global); !diff.empty())
    return "reduction gives the wrong value: " + diff + "\nplan:\n" + plan->str();
  return "";
}

/// Every spec over `choices` on a mesh with `axes` axes.
std::vector<ShardingSpec> allSpecs(const std::vector<const char*>& choices, int64_t axes) {
  std::vector<ShardingSpec> out{ShardingSpec{}};
  for (int64_t a = 0; a < axes; ++a) {
    std::vector<ShardingSpec> next;
    for (const ShardingSpec& s : out)
      for (const char* c : choices) {
        ShardingSpec t = s;
        t.placements.push_back(parsed(c));
        next.push_back(t);
      }
    out = next;
  }
  return out;
}

void checkAllPairs(const std::vector<int64_t>& meshShape, const std::vector<int64_t>& shape) {
  Mesh mesh = *Mesh::create(meshShape);
  std::vector<ShardingSpec> specs =
      allSpecs({"R", "S(0)", "S(1)", "P(sum)", "P(avg)", "P(max)"}, mesh.numAxes());
  std::mt19937 rng(1234);
  std::vector<std::string> failures;
  for (const ShardingSpec& from : specs)
    for (const ShardingSpec& to : specs)
      if (std::string err = checkReshard(shape, from, to, mesh, rng); !err.empty())
        failures.push_back(describe(shape, from, to, mesh) + ": " + err);
  INFO(failures.size() << " of " << specs.size() * specs.size()
                       << " pairs failed; first: " << (failures.empty() ? "" : failures[0]));
  CHECK(failures.empty());
}

std::vector<K> kinds(const ReshardPlan& plan) {
  std::vector<K> out;
  for (const ReshardStep& s : plan.steps) out.push_back(s.kind);
  return out;
}

ReshardPlan plan(const std::vector<int64_t>& shape, const ShardingSpec& from, const ShardingSpec& to,
                 const Mesh& mesh, const CostModel& cost = CostModel()) {
  auto p = planReshard(shape, 4, from, to, mesh, cost);
  INFO(p.status().message());
  REQUIRE(p.hasValue());
  return *p;
}

}  // namespace

TEST_CASE("every reshard on 1-D meshes is numerically right", "[reshard][sim]") {
  for (int64_t n : {2, 4}) {
    checkAllPairs({n}, {8, 16});
    checkAllPairs({n}, {8, 8, 16});
  }
}

TEST_CASE("every reshard on 2-D meshes is numerically right", "[reshard][sim]") {
  for (const std::vector<int64_t>& meshShape : {std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 4}}) {
    checkAllPairs(meshShape, {8, 16});
    checkAllPairs(meshShape, {8, 8, 16});
  }
}

TEST_CASE("random reshards on a 3-D mesh are numerically right", "[reshard][sim]") {
  Mesh mesh = *Mesh::create({2, 2, 2}, {"a", "b", "c"});
  std::vector<const char*> choices = {"R", "S(0)", "S(1)", "S(-1)", "P(sum)", "P(avg)", "P(max)", "P(min)"};
  std::vector<ShardingSpec> specs = allSpecs(choices, 3);
  std::mt19937 rng(99);
  std::vector<std::string> failures;
  for (int i = 0; i < 1500; ++i) {
    const ShardingSpec& from = specs[rng() % specs.size()];
    const ShardingSpec& to = specs[rng() % specs.size()];
    if (std::string err = checkReshard({8, 8, 8}, from, to, mesh, rng); !err.empty())
      failures.push_back(describe({8, 8, 8}, from, to, mesh) + ": " + err);
  }
  INFO((failures.empty() ? "" : failures[0]));
  CHECK(failures.empty());
}

// Which collective each transition takes, and each plan's steps in order,
// are text tests: tests/lit/reshard/plans.test. Here: sizes and costs.
TEST_CASE("single-axis transitions: bytes, costs, local shapes and scales", "[reshard]") {
  Mesh mesh = *Mesh::create({4}, {"tp"});
  CostModel cm;
  std::vector<int64_t> shape{16, 32};
  ReshardPlan p = plan(shape, spec({"S(0)"}), spec({"R"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::AllGather});
  CHECK(p.steps[0].bytesPerRank == 3 * 16 * 32 * 4 / 4);
  CHECK(p.cost == Approx(cm.cost(K::AllGather, 0, 4, 4 * 32 * 4, 16 * 32 * 4)));
  CHECK(p.steps[0].localShapeBefore == std::vector<int64_t>{4, 32});
  CHECK(p.steps[0].localShapeAfter == std::vector<int64_t>{16, 32});

  p = plan(shape, spec({"P(avg)"}), spec({"S(1)"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::ReduceScatter});
  CHECK(p.cost == Approx(cm.cost(K::ReduceScatter, 0, 4, 16 * 32 * 4, 16 * 8 * 4)));

  p = plan(shape, spec({"R"}), spec({"S(1)"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::LocalSlice});
  CHECK(p.cost >= 0.0);
  CHECK(p.cost < cm.axisLink(0).alphaSeconds);

  p = plan(shape, spec({"P(sum)"}), spec({"P(avg)"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::ScalePartial});
  CHECK(p.steps[0].scale == 4.0);
  CHECK(plan(shape, spec({"P(avg)"}), spec({"P(sum)"}), mesh).steps[0].scale == 0.25);
}

TEST_CASE("identical specs give an empty plan of cost 0", "[reshard]") {
  Mesh mesh = *Mesh::create({2, 4}, {"dp", "tp"});
  for (const ShardingSpec& s : allSpecs({"R", "S(0)", "P(max)"}, 2)) {
    ReshardPlan p = plan({8, 8}, s, s, mesh);
    CHECK(p.empty());
    CHECK(p.cost == 0.0);
    CHECK(p.str().empty());
  }
}

TEST_CASE("a hierarchical all-reduce of a large tensor costs less than two flat ones", "[reshard]") {
  Mesh mesh = *Mesh::create({2, 4}, {"dp", "tp"});
  ReshardPlan big = plan({4096, 4096}, spec({"P", "P"}), spec({"R", "R"}), mesh);
  CHECK(kinds(big) == std::vector<K>{K::ReduceScatter, K::AllReduce, K::AllGather});
  CostModel flat;
  CHECK(big.cost < 2 * flat.cost(K::AllReduce, 0, 2, int64_t{4096} * 4096 * 4, int64_t{4096} * 4096 * 4));
}

TEST_CASE("a reduceFirst axis (a pipeline's microbatches) is reduced before any other step", "[reshard]") {
  Mesh mesh = *Mesh::create({2, 2}, {"mb", "dp"});
  CostModel cm;
  cm.setAxisLink(0, {1e3, 1e3});  // moving bytes over mb costs the most: reduce-scatter dp first
  ReshardPlan halved = plan({64, 32}, spec({"P", "P"}), spec({"R", "R"}), mesh, cm);
  CHECK(kinds(halved) == std::vector<K>{K::ReduceScatter, K::AllReduce, K::AllGather});
  cm.setAxisLink(0, {1e3, 1e3, true});  // accumulate first, then one all-reduce over dp
  ReshardPlan ordered = plan({64, 32}, spec({"P", "P"}), spec({"R", "R"}), mesh, cm);
  REQUIRE(kinds(ordered) == std::vector<K>{K::AllReduce, K::AllReduce});
  CHECK(ordered.steps[0].axis == 0);
  ReshardPlan fsdp = plan({64, 32}, spec({"P", "P"}), spec({"R", "S(0)"}), mesh, cm);
  REQUIRE(kinds(fsdp) == std::vector<K>{K::AllReduce, K::ReduceScatter});
  CHECK(fsdp.steps[0].axis == 0);
  // A target that keeps the axis partial orders nothing.
  CHECK(kinds(plan({64, 32}, spec({"P", "P"}), spec({"P", "R"}), mesh, cm)) == std::vector<K>{K::AllReduce});
}

TEST_CASE("per-axis links steer the plan", "[reshard]") {
  Mesh mesh = *Mesh::create({2, 4}, {"node", "gpu"});
  std::vector<int64_t> shape{4096, 4096};
  CostModel cm;
  REQUIRE(cm.setAxisLink(mesh, "node", {20e-6, 10e9}).isOk());  // slow inter-node axis
  ReshardPlan p = plan(shape, spec({"P", "P"}), spec({"R", "R"}), mesh, cm);
  // The slow axis only ever carries a quarter of the tensor.
  for (const ReshardStep& s : p.steps)
    if (s.axis == 0) CHECK(s.localShapeBefore == std::vector<int64_t>{1024, 4096});
  CHECK(p.cost > plan(shape, spec({"P", "P"}), spec({"R", "R"}), mesh).cost);
}

TEST_CASE("axes of size one cost nothing", "[reshard]") {
  Mesh mesh = *Mesh::create({1, 4}, {"dp", "tp"});
  ReshardPlan p = plan({8, 8}, spec({"S(0)", "R"}), spec({"R", "R"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::AllGather});
  CHECK(p.cost == 0.0);
  CHECK(p.steps[0].bytesPerRank == 0);
}

TEST_CASE("intermediate layouts stay evenly divisible", "[reshard]") {
  // [S(0), R] -> [R, S(0)] with 4 rows on 2x2: [S(0), S(0)] would need 4 | 4,
  // fine; with 2 rows it would not, and the plan must avoid it.
  Mesh mesh = *Mesh::create({2, 2}, {"dp", "tp"});
  std::mt19937 rng(7);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3}, std::vector<int64_t>{2, 1}}) {
    CHECK(checkReshard(shape, spec({"S(0)", "R"}), spec({"R", "S(0)"}), mesh, rng).empty());
    for (const ReshardStep& s : plan(shape, spec({"S(0)", "R"}), spec({"R", "S(0)"}), mesh).steps)
      CHECK(checkEvenlyDivisible(shape, s.after, mesh).isOk());
  }
}

TEST_CASE("scalars and empty tensors", "[reshard]") {
  Mesh mesh = *Mesh::create({4});
  ReshardPlan p = plan({}, spec({"P(max)"}), spec({"R"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::AllReduce});
  CHECK(p.steps[0].localShapeAfter.empty());
  CHECK(p.steps[0].bytesPerRank == 2 * 3 * 4 / 4);
  CHECK_FALSE(planReshard({}, 4, spec({"S(0)"}), spec({"R"}), mesh).hasValue());
  p = plan({0, 8}, spec({"S(0)"}), spec({"S(1)"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::AllToAll});
  CHECK(p.steps[0].bytesPerRank == 0);
}

TEST_CASE("step text names kind, axis and arguments", "[reshard]") {
  Mesh mesh = *Mesh::create({2});
  auto text = [&](const char* from, const char* to) {
    return plan({4, 4}, spec({from}), spec({to}), mesh).str();
  };
  CHECK(text("S(1)", "R") == "all_gather(axis=0, dim=1) [S(1)] -> [R]");
  CHECK(text("P(min)", "R") == "all_reduce(axis=0, op=min) [P(min)] -> [R]");
  CHECK(text("P(avg)", "S(0)") == "reduce_scatter(axis=0, op=avg, dim=0) [P(avg)] -> [S(0)]");
  CHECK(text("R", "S(0)") == "local_slice(axis=0, dim=0) [R] -> [S(0)]");
  CHECK(text("R", "P") == "zero_partial(axis=0, op=sum) [R] -> [P(sum)]");
  CHECK(text("R", "P(avg)") == "mark_partial(axis=0, op=avg) [R] -> [P(avg)]");
  CHECK(text("P(avg)", "P(sum)") == "scale_partial(axis=0, scale=0.500000) [P(avg)] -> [P(sum)]");
}

TEST_CASE("uneven shards: every pair of layouts reshards exactly (torch.chunk sizes)", "[reshard][uneven]") {
  // 5 over 4 (2, 2, 1, 0), 3 over 2 (2, 1), 1 over 2 (1, 0: an empty shard),
  // and 5 rows nested over 2x2 (2, 1, 1, 1).
  checkAllPairs({4}, {5, 3});
  checkAllPairs({2}, {3, 1});
  checkAllPairs({2}, {1, 2});
  checkAllPairs({2, 2}, {5, 3});
  checkAllPairs({2, 2}, {1, 3});
}

TEST_CASE("uneven steps move the largest rank's bytes", "[reshard][uneven]") {
  Mesh mesh = *Mesh::create({4}, {"tp"});
  // 5 rows of 8 floats over 4: every rank sends a padded chunk of 2 rows.
  ReshardPlan p = plan({5, 8}, spec({"S(0)"}), spec({"R"}), mesh);
  REQUIRE(kinds(p) == std::vector<K>{K::AllGather});
  CHECK(p.steps[0].localShapeBefore == std::vector<int64_t>{2, 8});
  CHECK(p.steps[0].bytesPerRank == 3 * 2 * 8 * 4);
  // 50,257 rows over 8: chunks of 6,283, the last rank holds 6,276.
  ReshardPlan v = plan({50257, 4}, spec({"R"}), spec({"S(0)"}), Mesh(*Mesh::create({8}, {"tp"})));
  REQUIRE(kinds(v) == std::vector<K>{K::LocalSlice});
  CHECK(v.steps[0].localShapeAfter == std::vector<int64_t>{6283, 4});
  CHECK(localShape({50257, 4}, spec({"S(0)"}), *Mesh::create({8}, {"tp"}), {7}) ==
        std::vector<int64_t>{6276, 4});
}
