// The modeled cost of a whole layout: exact matmul FLOPs, bytes-bound
// elementwise ops, collectives per mesh axis, and the "cost" of --report.
#include <nlohmann/json.hpp>

#include "AutoTestUtil.h"
#include "passes/ContextParallelCost.h"
#include "passes/Report.h"

using namespace spmd;
using spmd::testing::modelPath;

namespace {

passes::CompileResult compileMlp(const std::string& preset, std::vector<int64_t> mesh) {
  auto archive = pt2::readArchive(modelPath("mlp"), {.loadWeights = false});
  REQUIRE(archive.hasValue());
  auto s = schema::loadSchemaOrPreset(preset);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = mesh;
  auto r = passes::compile(*archive, *s, opts);
  REQUIRE(r.hasValue());
  return std::move(*r);
}

}  // namespace

TEST_CASE("mlp under dp on 2 ranks: exact FLOPs, bytes-bound gelu, one all-gather on x") {
  passes::CompileResult r = compileMlp("dp", {2});
  // x f32[32, 64] is split: each rank runs addmm [16, 64] x [64, 256] and
  // addmm_1 [16, 256] x [256, 64], gathers its [16, 64] output.
  double flops = 0;
  for (const auto& n : r.program.graph.graph.nodes()) flops += passes::nodeFlops(*n);
  CHECK(flops == 2.0 * (2 * 16 * 256 * 64));
  const sharding::DeviceProfile& p = sharding::defaultDeviceProfile();
  passes::LayoutCost c = passes::modelLayout(r.program, p);
  double addmm = 2.0 * 16 * 256 * 64 / 5e10;  // FLOP-bound: 84 KB of operands take 8.5 us < 10.5 us
  double gelu = 2.0 * 16 * 256 * 4 / 1e10;    // bytes-bound: in and out
  CHECK(c.computeSeconds == Approx(2 * addmm + gelu).epsilon(1e-9));
  REQUIRE(c.axes.size() == 1);
  CHECK(c.axes[0].collectives == 1);
  CHECK(c.axes[0].byKind == std::vector<std::pair<std::string, int64_t>>{{"all_gather", 1}});
  // ring all-gather of a [32, 64] f32 result: 2e-5 + 1/2 * 8,192 B / 1e9
  CHECK(c.commSeconds == Approx(2e-5 + 4096 / 1e9).epsilon(1e-9));
  CHECK(c.stepSeconds() == c.computeSeconds + c.commSeconds);
  CHECK(c.peakBytes == passes::estimateMemory(r.program).peakBytes);
}

TEST_CASE("every --report carries the modeled cost; the summary one line of it") {
  passes::CompileResult r = compileMlp("fsdp", {2});
  auto j = nlohmann::json::parse(passes::reportJson(r));
  REQUIRE(j.contains("cost"));
  const auto& c = j["cost"];
  for (const char* k : {"device_profile", "modeled_step_ms", "compute_ms", "comm_ms", "comm_ms_per_axis",
                        "collectives_per_axis", "param_bytes_per_rank", "peak_bytes_per_rank"})
    CHECK(c.contains(k));
  CHECK(c["modeled_step_ms"].get<double>() ==
        Approx(c["compute_ms"].get<double>() + c["comm_ms"].get<double>()));
  CHECK(c["comm_ms_per_axis"]["x"].get<double>() == Approx(c["comm_ms"].get<double>()));
  CHECK(c["device_profile"] == "builtin-cpu-loopback");
  std::string text = passes::summaryText(r, "mlp.pt2", "mlp.spmd");
  CHECK(text.find("  cost (builtin-cpu-loopback): modeled step ") != std::string::npos);
}

TEST_CASE("a faster link makes the same layout's communication cheaper") {
  passes::CompileResult r = compileMlp("dp", {2});
  sharding::DeviceProfile fast = sharding::defaultDeviceProfile();
  fast.intraNode = {1e-6, 1e11};
  auto slow = passes::modelLayout(r.program, sharding::defaultDeviceProfile());
  auto quick = passes::modelLayout(r.program, fast);
  CHECK(quick.commSeconds < slow.commSeconds);
  CHECK(quick.computeSeconds == slow.computeSeconds);
}

TEST_CASE("ring attention: sends per node, and only what the block compute does not hide is exposed") {
  auto archive = pt2::readArchive(modelPath("llama_train"), {.loadWeights = false});
  REQUIRE(archive.hasValue());
  auto s = schema::parsePlacementSchema(
      R"js({"version": 1, "mesh": {"shape": [2], "axes": ["cp"]}, "outputs": "replicate",
            "context_parallel": {"axis": "cp", "rotate": "ring"}})js",
      "ring.json");
  REQUIRE(s.hasValue());
  auto r = passes::compile(*archive, *s, {});
  REQUIRE(r.hasValue());
  const program::Program& p = r->program;
  const sharding::DeviceProfile& profile = sharding::defaultDeviceProfile();
  // 2 layers; keys and values [2, 8, 8, 8] per rank: 8,192 B per exchange.
  int64_t sends = 0, nodes = 0;
  double compute = 0, exposed = 0;
  for (const auto& n : p.graph.graph.nodes()) {
    auto t = passes::ringTraffic(*n, p.mesh);
    if (!t) continue;
    ++nodes;
    CHECK(t->sends == (t->backward ? 3 : 1));
    CHECK(t->bytesPerSend == 8192);
    CHECK(t->bytesPerRank == t->sends * 8192);
    // every key block (2) against the rank's queries: 2 x the local op's FLOPs
    CHECK(passes::ringFlops(*n, p.mesh) == 2 * passes::nodeFlops(*n));
    double c = passes::opSeconds(passes::ringBytes(*n, p.mesh), passes::ringFlops(*n, p.mesh),
                                 ir::ScalarType::Float, profile);
    double comm = static_cast<double>(t->sends) * (2e-5 + 8192 / 1e9);
    CHECK(passes::ringExposedSeconds(*t, c, {2e-5, 1e9}) == Approx(std::max(0.0, comm - c)));
    CHECK(passes::ringExposedSeconds(*t, comm + 1, {2e-5, 1e9}) == 0);
    sends += t->sends;
    compute += c;
    exposed += passes::ringExposedSeconds(*t, c, {2e-5, 1e9});
  }
  CHECK(nodes == 4);
  CHECK(sends == 8);
  passes::LayoutCost cost = passes::modelLayout(p, profile);
  REQUIRE(cost.axes.size() == 1);
  auto ring = std::find_if(cost.axes[0].byKind.begin(), cost.axes[0].byKind.end(),
                           [](const auto& e) { return e.first == "ring_send"; });
  REQUIRE(ring != cost.axes[0].byKind.end());
  CHECK(ring->second == 8);
  CHECK(exposed > 0);
  // the ring's exposed seconds are all of the axis's communication but the
  // collectives' (the loss's all-reduces)
  double collectives = 0;
  for (const auto& n : p.graph.graph.nodes())
    collectives += passes::collectiveSeconds(*n, p.mesh, sharding::costModelFor(profile, p.mesh));
  CHECK(cost.commSeconds == Approx(collectives + exposed).epsilon(1e-9));
}
