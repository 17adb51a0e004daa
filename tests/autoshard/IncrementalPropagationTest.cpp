// Incremental propagation (PropagationOptions::incremental, the quick
// model's): along a random walk over layouts, as the search walks them (one
// group changed at a time, now and then a jump), every run gives the layouts
// of every value and node that a full propagation of the same layout gives,
// on graphs prepared as the quick model prepares them (optimizer appended,
// a gather anchor before every parameter, its layout overridden).
#include <random>

#include "AutoTestUtil.h"
#include "autoshard/QuickModel.h"
#include "passes/GatherParams.h"
#include "passes/Optimizer.h"
#include "schema/Resolve.h"
#include "sharding/Propagation.h"
#include "sharding/RuleRegistry.h"

using namespace spmd;
using spmd::testing::modelPath;

namespace {

struct Prepared {
  pt2::Archive archive;
  std::vector<std::pair<int, size_t>> anchors;  // (node index, signature input)
};

Prepared prepare(const std::string& model, const std::string& optimizer, const sharding::Mesh& mesh) {
  auto a = pt2::readArchive(modelPath(model), {.loadWeights = false});
  REQUIRE(a.hasValue());
  Prepared p{std::move(*a), {}};
  ir::ExportedProgram& prog = p.archive.program;
  if (!optimizer.empty()) REQUIRE(passes::appendOptimizer(prog, {.kind = optimizer}).isOk());
  const auto& ins = prog.signature.inputs;
  schema::ResolvedPlacements all;
  all.gathered.assign(ins.size(), std::nullopt);
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].kind == ir::InputKind::Parameter && ins[i].value)
      all.gathered[i] = sharding::ShardingSpec::replicated(mesh.numAxes());
  REQUIRE(passes::insertParameterGathers(prog, all).isOk());
  for (const auto& n : prog.graph.nodes()) {
    if (!n->metadata().other.count(std::string(sharding::kLayoutKey))) continue;
    auto in = sharding::tensorOperands(*n);
    for (size_t i = 0; i < ins.size(); ++i)
      if (in.size() == 1 && ins[i].value == in[0]) p.anchors.emplace_back(n->index(), i);
  }
  REQUIRE_FALSE(p.anchors.empty());
  return p;
}

void requireSame(const sharding::Propagation& inc, const sharding::Propagation& full) {
  REQUIRE(inc.values.size() == full.values.size());
  REQUIRE(inc.nodes.size() == full.nodes.size());
  for (size_t v = 0; v < full.values.size(); ++v) {
    INFO("value " << v);
    REQUIRE(inc.values[v] == full.values[v]);
  }
  for (size_t n = 0; n < full.nodes.size(); ++n) {
    INFO("node " << n);
    REQUIRE(inc.nodes[n].operands == full.nodes[n].operands);
    REQUIRE(inc.nodes[n].results == full.nodes[n].results);
  }
}

}  // namespace

TEST_CASE("incremental propagation gives a full propagation's layouts along a random walk") {
  struct Case {
    std::string model, optimizer;
    std::vector<int64_t> mesh;
  };
  for (const Case& k : {Case{"llama_train", "adamw", {2, 2}}, Case{"llama", "", {4}},
                        Case{"gpt_block", "", {2, 2}}, Case{"mlp_train", "sgd", {2}}}) {
    INFO(k.model << " on a " << k.mesh.size() << "-D mesh");
    auto mesh = sharding::Mesh::create(k.mesh);
    REQUIRE(mesh.hasValue());
    Prepared p = prepare(k.model, k.optimizer, *mesh);
    const ir::ExportedProgram& prog = p.archive.program;
    auto groups = autoshard::buildGroups(prog, *mesh, {}, true);
    REQUIRE_FALSE(groups.empty());
    sharding::RuleRegistry registry = sharding::defaultRuleRegistry();
    sharding::Propagator prop(prog, registry);
    sharding::Propagation walked;
    std::mt19937 rng(99);
    auto pick = [&](size_t g) {
      return std::uniform_int_distribution<size_t>(0, groups[g].options.size() - 1)(rng);
    };
    std::vector<size_t> c(groups.size(), 0);
    int compared = 0, changedNodes = 0;
    for (int step = 0; step < 40; ++step) {
      if (step > 0 && step % 9 == 0) {
        for (size_t g = 0; g < groups.size(); ++g) c[g] = pick(g);  // a jump
      } else if (step > 0) {
        size_t g = std::uniform_int_distribution<size_t>(0, groups.size() - 1)(rng);
        c[g] = pick(g);
      }
      auto s = autoshard::schemaFor(groups, c, *mesh, nullptr);
      auto pl = schema::resolvePlacements(s, prog, mesh->shape());
      if (!pl) continue;  // e.g. a batch that does not divide
      passes::alignOptimizerStates(prog, *pl);
      sharding::PropagationOptions po;
      po.details = false;
      po.secondPass = false;
      for (const auto& [node, input] : p.anchors)
        po.layoutOverrides[node] = pl->gathered[input] ? *pl->gathered[input] : pl->inputs[input];
      auto full = sharding::propagate(prog, pl->inputs, pl->mesh, registry, po);
      sharding::Propagation before = walked;
      po.incremental = true;
      Status st = prop.runInto(pl->inputs, pl->mesh, po, walked);
      INFO("step " << step << ": " << s.source);
      REQUIRE(st.isOk() == full.hasValue());
      if (!full) continue;
      requireSame(walked, *full);
      ++compared;
      for (size_t n = 0; n < before.nodes.size() && n < walked.nodes.size(); ++n)
        changedNodes += before.nodes[n].operands != walked.nodes[n].operands ? 1 : 0;
    }
    CHECK(compared >= 20);
    CHECK(changedNodes > 0);  // the walk moved layouts, not only anchors
  }
}

TEST_CASE("the quick model prices a walk of layouts as it prices each layout afresh") {
  auto mesh = sharding::Mesh::create({2, 2});
  REQUIRE(mesh.hasValue());
  autoshard::AutoOptions o;
  o.mesh = *mesh;
  o.compile.optimizer.kind = "adamw";
  auto walker = autoshard::QuickModel::create(modelPath("llama_train"), o);
  REQUIRE(walker.hasValue());
  auto archive = pt2::readArchive(modelPath("llama_train"), {.loadWeights = false});
  REQUIRE(archive.hasValue());
  auto groups = autoshard::buildGroups(archive->program, *mesh, {}, true);
  std::mt19937 rng(7);
  std::vector<size_t> c(groups.size(), 0);
  int compared = 0;
  for (int step = 0; step < 30; ++step) {
    size_t g = std::uniform_int_distribution<size_t>(0, groups.size() - 1)(rng);
    c[g] = std::uniform_int_distribution<size_t>(0, groups[g].options.size() - 1)(rng);
    auto s = autoshard::schemaFor(groups, c, *mesh, nullptr);
    auto fresh = autoshard::QuickModel::create(modelPath("llama_train"), o);
    REQUIRE(fresh.hasValue());
    auto want = (*fresh)->evaluate(s);
    auto got = (*walker)->evaluate(s);
    INFO("step " << step << ": " << s.source);
    REQUIRE(got.hasValue() == want.hasValue());
    if (!want) continue;
    ++compared;
    CHECK(got->computeSeconds == want->computeSeconds);
    CHECK(got->commSeconds == want->commSeconds);
    CHECK(got->paramBytes == want->paramBytes);
    CHECK(got->peakBytes == want->peakBytes);
    REQUIRE(got->axes.size() == want->axes.size());
    for (size_t a = 0; a < want->axes.size(); ++a) {
      CHECK(got->axes[a].seconds == want->axes[a].seconds);
      CHECK(got->axes[a].collectives == want->axes[a].collectives);
      CHECK(got->axes[a].byKind == want->axes[a].byKind);
    }
  }
  CHECK(compared >= 20);
}
