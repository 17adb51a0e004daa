// The host-side decisions of the GPU step (runtime/CudaGraph.h), on the
// CPU: CUDA-graph eligibility and its reasons, the --cuda-graph modes, the
// graph pool's size from the compiler's plan, and the compute/comm stream
// schedule derived from compiled fsdp and dp train steps.
#include <algorithm>
#include <map>
#include <string>

#include "../TestCatch.h"
#include "TestGraph.h"
#include "ir/Collectives.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "pt2/Archive.h"
#include "runtime/CudaGraph.h"
#include "schema/PlacementSchema.h"
#include "serialize/FromText.h"

using namespace spmd;
using runtime::CudaGraphMode;
using runtime::GraphTarget;

namespace {

program::Program compiled(const std::string& model, const std::string& schema, int64_t ranks) {
  auto archive = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + model + "/model.pt2");
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{ranks};
  auto r = passes::compile(*archive, *s, opts);
  if (!r) FAIL(r.status().message());
  return std::move(r->program);
}

// A one-rank program whose graph is `text` (IR text).
program::Program fromText(const std::string& text) {
  program::Program p;
  p.mesh = sharding::Mesh::create({1}).value();
  p.graph = runtime::test::programFromText(text);
  return p;
}

constexpr GraphTarget kGpuNccl{true, true};

}  // namespace

TEST_CASE("a static program is capture-eligible on a GPU, and only there") {
  program::Program mlp = compiled("mlp", "dp", 1);
  CHECK(runtime::cudaGraphEligibility(mlp, kGpuNccl).eligible);
  CHECK(runtime::cudaGraphEligibility(mlp, {true, false}).eligible);  // one rank: no collective on the host
  auto cpu = runtime::cudaGraphEligibility(mlp, {false, false});
  CHECK_FALSE(cpu.eligible);
  CHECK(cpu.reason == "the device is not a GPU");

  program::Program two = compiled("mlp", "dp", 2);
  CHECK(runtime::cudaGraphEligibility(two, kGpuNccl).eligible);
  auto gloo = runtime::cudaGraphEligibility(two, {true, false});
  CHECK_FALSE(gloo.eligible);
  CHECK_THAT(gloo.reason, Catch::Contains("Gloo"));
}

TEST_CASE("dynamic shapes and host syncs rule out capture, naming the input or node") {
  auto dynamic = runtime::cudaGraphEligibility(compiled("mlp_dynamic_batch", "dp", 1), kGpuNccl);
  CHECK_FALSE(dynamic.eligible);
  CHECK_THAT(dynamic.reason, Catch::Contains("symbolic shape"));

  auto sync = runtime::cudaGraphEligibility(fromText("input %x: f32[4, 4] user_input\n"
                                                     "%r: f32[4, 4] = aten.relu.default(self=%x)\n"
                                                     "%nz: i64[4, 2] = aten.nonzero.default(self=%r)\n"
                                                     "output %nz user_output\n"),
                                            kGpuNccl);
  CHECK_FALSE(sync.eligible);
  CHECK(sync.reason ==
        "node %nz (aten.nonzero.default): it synchronizes with the host (data-dependent result)");

  auto item = runtime::cudaGraphEligibility(fromText("input %x: f32[] user_input\n"
                                                     "%s: f32[] = aten._local_scalar_dense.default(self=%x)\n"
                                                     "output %x user_output\n"),
                                            kGpuNccl);
  CHECK_FALSE(item.eligible);
  CHECK_THAT(item.reason, Catch::StartsWith("node %s (aten._local_scalar_dense.default)"));
}

TEST_CASE("--cuda-graph modes: off, auto (silently off where ineligible), on (refused, one line)") {
  CHECK(runtime::parseCudaGraphMode("auto").value() == CudaGraphMode::Auto);
  CHECK(runtime::parseCudaGraphMode("on").value() == CudaGraphMode::On);
  CHECK(runtime::parseCudaGraphMode("off").value() == CudaGraphMode::Off);
  CHECK(runtime::parseCudaGraphMode("yes").status().message() ==
        "--cuda-graph yes: expected on, off or auto");

  runtime::GraphEligibility ok{true, ""}, no{false, "node %nz (aten.nonzero.default): ..."};
  CHECK(runtime::resolveCudaGraph(CudaGraphMode::Auto, ok, true).value());
  CHECK_FALSE(runtime::resolveCudaGraph(CudaGraphMode::Auto, ok, false).value());
  CHECK_FALSE(runtime::resolveCudaGraph(CudaGraphMode::Auto, no, true).value());
  CHECK_FALSE(runtime::resolveCudaGraph(CudaGraphMode::Off, ok, true).value());
  CHECK(runtime::resolveCudaGraph(CudaGraphMode::On, ok, true).value());
  auto cpu = runtime::resolveCudaGraph(CudaGraphMode::On, ok, false);
  REQUIRE_FALSE(cpu.hasValue());
  CHECK_THAT(cpu.status().message(), Catch::StartsWith("--cuda-graph on: the run is on the CPU"));
  CHECK(cpu.status().message().find('\n') == std::string::npos);
  auto ineligible = runtime::resolveCudaGraph(CudaGraphMode::On, no, true);
  REQUIRE_FALSE(ineligible.hasValue());
  CHECK_THAT(ineligible.status().message(), Catch::Contains("node %nz (aten.nonzero.default)"));
}

TEST_CASE("the graph pool holds the plan's activations with headroom, in 2 MiB blocks") {
  constexpr int64_t kMiB = int64_t{1} << 20;
  CHECK(runtime::graphPoolBytes(0, 0) == 0);  // no prediction: no reservation
  CHECK(runtime::graphPoolBytes(-1, 0) == 0);
  CHECK(runtime::graphPoolBytes(100 * kMiB, 20 * kMiB) == 90 * kMiB);  // 80 MiB + 1/8
  CHECK(runtime::graphPoolBytes(1, 0) == 2 * kMiB);
  CHECK(runtime::graphPoolBytes(10 * kMiB, 30 * kMiB) == 0);  // weights above the peak: nothing to reserve

  // From a real plan: the compiler's estimate for llama_train under fsdp.
  program::Program p = compiled("llama_train", "fsdp", 2);
  passes::MemoryEstimate m = passes::estimateMemory(p);
  int64_t pool = runtime::graphPoolBytes(m.peakBytes, m.paramBytes);
  CHECK(pool % (2 * kMiB) == 0);
  CHECK(pool >= (m.peakBytes - m.paramBytes) * 9 / 8);
  CHECK(pool < (m.peakBytes - m.paramBytes) * 9 / 8 + 2 * kMiB);
}

namespace {

std::map<std::string, int> slotsByTarget(const ir::Graph& g, const std::vector<runtime::StreamSlot>& slots) {
  std::map<std::string, int> out;
  for (const auto& s : slots) ++out[g.nodes()[static_cast<size_t>(s.node)]->target()];
  return out;
}

// Every collective of `g` has one slot, in program order; every async one
// waits at its spmd.wait, after its start; the compute stream waits there.
void checkSchedule(const ir::Graph& g, const std::vector<runtime::StreamSlot>& slots) {
  int collectives = 0;
  for (const auto& n : g.nodes()) collectives += ir::isCommunicating(n->target()) ? 1 : 0;
  CHECK(static_cast<int>(slots.size()) == collectives);
  auto waits = runtime::computeWaits(slots, g.nodes().size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    CHECK(s.event == static_cast<int>(i));
    if (i > 0) CHECK(s.node > slots[i - 1].node);
    const ir::Node& start = *g.nodes()[static_cast<size_t>(s.node)];
    CHECK(start.name() == s.name);
    REQUIRE(s.waitNode > s.node);
    const ir::Node& wait = *g.nodes()[static_cast<size_t>(s.waitNode)];
    CHECK(wait.target() == ir::kWait);
    CHECK(wait.input("self")->value() == start.outputValues()[0]);
    const auto& at = waits[static_cast<size_t>(s.waitNode)];
    CHECK(std::count(at.begin(), at.end(), s.event) == 1);
  }
}

}  // namespace

TEST_CASE("fsdp: prefetched all-gathers overlap compute on the comm stream") {
  program::Program p = compiled("llama_train", "fsdp", 2);
  const ir::Graph& g = p.graph.graph;
  auto slots = runtime::deriveStreamSchedule(g);
  REQUIRE(slots.hasValue());
  checkSchedule(g, *slots);
  auto by = slotsByTarget(g, *slots);
  CHECK(by[std::string(ir::kAllGather)] >= 2);
  // Prefetch: the next all-gather starts before the previous one is waited on.
  bool prefetched = false;
  for (size_t i = 0; i + 1 < slots->size(); ++i)
    prefetched = prefetched || (*slots)[i + 1].node < (*slots)[i].waitNode;
  CHECK(prefetched);
}

TEST_CASE("dp: gradient all-reduce buckets run while the backward goes on") {
  program::Program p = compiled("mlp_train", "dp", 2);
  const ir::Graph& g = p.graph.graph;
  auto slots = runtime::deriveStreamSchedule(g);
  REQUIRE(slots.hasValue());
  checkSchedule(g, *slots);
  auto by = slotsByTarget(g, *slots);
  CHECK(by[std::string(ir::kAllReduce)] >= 2);
  // Some bucket has compute (not only other waits) between its start and its wait.
  bool overlaps = false;
  for (const auto& s : *slots)
    for (int i = s.node + 1; i < s.waitNode; ++i)
      overlaps = overlaps || !ir::isSpmdOp(g.nodes()[static_cast<size_t>(i)]->target());
  CHECK(overlaps);
}

TEST_CASE("a wait without an async collective, or an unwaited one, is refused by node") {
  auto bad = runtime::deriveStreamSchedule(fromText("input %x: f32[4] user_input\n"
                                                    "%w: f32[4] = spmd.wait(self=%x)\n"
                                                    "output %w user_output\n")
                                               .graph.graph);
  REQUIRE_FALSE(bad.hasValue());
  CHECK(bad.status().message() ==
        "node %w (spmd.wait): waits on a value that is no pending async collective");

  auto open = runtime::deriveStreamSchedule(
      fromText("input %x: f32[4] user_input\n"
               "%r: f32[4] = spmd.all_reduce(self=%x, axis=\"x\", op=\"sum\", *, async=true)\n"
               "output %r user_output\n")
          .graph.graph);
  REQUIRE_FALSE(open.hasValue());
  CHECK(open.status().message() == "node %r: async collective without an spmd.wait");

  // A synchronous collective: its event is waited on by the next node.
  program::Program sync = fromText(
      "input %x: f32[4] user_input\n"
      "%r: f32[4] = spmd.all_reduce(self=%x, axis=\"x\", op=\"sum\")\n"
      "%y: f32[4] = aten.relu.default(self=%r)\n"
      "output %y user_output\n");
  auto slots = runtime::deriveStreamSchedule(sync.graph.graph);
  REQUIRE(slots.hasValue());
  REQUIRE(slots->size() == 1);
  CHECK((*slots)[0].waitNode == -1);
  CHECK(runtime::computeWaits(*slots, 2)[1] == std::vector<int>{0});
}
