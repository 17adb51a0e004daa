// Ring attention's traffic and cost, and "rotate": "auto" (see
// ContextParallelCost.h).
//
// Invariant: ringTraffic counts exactly the exchanges the runtime kernels
// post (RingAttentionOps.cpp: forward cp - 1, backward cp - 1 + cp) and
// the bytes spmd-run --profile counts for them, so the report's ring bytes
// equal the measured ones (tests/e2e/cp_ring.py checks it).
#include "passes/ContextParallelCost.h"

#include <cstdio>

#include "passes/Report.h"
#include "pt2/Archive.h"
#include "sharding/DeviceProfile.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

int64_t numelOf(const ir::Value* v) {
  if (v == nullptr || !v->isTensor()) return 0;
  int64_t n = 1;
  for (const auto& d : v->type().sizes) n *= d.value();
  return n;
}

const ir::Value* named(const ir::Node& n, std::string_view name) {
  const ir::Argument* a = n.input(name);
  return a ? a->value() : nullptr;
}

// Passes over a [L/cp, S/cp] float32 scores block the kernels make: forward
// matmul, scale, mask, log-sum-exp, subtract, exp, matmul (reads and
// writes, 10); backward the same plus the dO V^T product, its correction
// and the three gradient matmuls (14). The eager pattern the ring replaces
// makes about as many, so both forms are priced alike per block.
constexpr double kForwardPasses = 10;
constexpr double kBackwardPasses = 14;

std::string millis(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  return buf;
}

}  // namespace

std::optional<RingTraffic> ringTraffic(const ir::Node& node, const sharding::Mesh& mesh) {
  const std::string& t = node.target();
  bool backward = t == "spmd.ring_attention_backward";
  if (!backward && t != "spmd.ring_attention") return std::nullopt;
  const ir::Argument* axisArg = node.input("axis");
  if (axisArg == nullptr || axisArg->strings.empty()) return std::nullopt;
  int64_t axis = mesh.axisIndex(axisArg->strings[0]);
  if (axis < 0 || mesh.size(axis) < 2) return std::nullopt;
  int64_t cp = mesh.size(axis);
  RingTraffic r;
  r.axis = axis;
  r.backward = backward;
  r.sends = backward ? 2 * cp - 1 : cp - 1;
  const ir::Value *k = named(node, "key"), *v = named(node, "value");
  int64_t kv = numelOf(k) + numelOf(v);
  const ir::Argument* wire = node.input("kv_dtype");  // keys and values upcast from a half dtype
  if (wire != nullptr && wire->kind == ir::Argument::Kind::ScalarType && wire->ints.size() == 1)
    r.bytesPerSend = kv * ir::elementSize(static_cast<ir::ScalarType>(wire->ints[0]));
  else
    r.bytesPerSend = kv * (k != nullptr && k->isTensor() ? ir::elementSize(k->type().dtype) : 4);
  r.gradBytesPerSend = backward ? kv * 4 : 0;
  r.bytesPerRank = (cp - 1) * r.bytesPerSend + (backward ? cp * r.gradBytesPerSend : 0);
  return r;
}

double ringFlops(const ir::Node& node, const sharding::Mesh& mesh) {
  auto t = ringTraffic(node, mesh);
  double blocks = t ? static_cast<double>(mesh.size(t->axis)) : 1.0;
  return nodeFlops(node) * blocks;
}

double ringBytes(const ir::Node& node, const sharding::Mesh& mesh) {
  auto t = ringTraffic(node, mesh);
  double blocks = t ? static_cast<double>(mesh.size(t->axis)) : 1.0;
  const ir::Value* q = named(node, "query");
  const ir::Value* k = named(node, "key");
  if (q == nullptr || k == nullptr || q->type().rank() < 2 || k->type().rank() < 2) return 0;
  double scores = static_cast<double>(numelOf(q)) / static_cast<double>(q->type().sizes.back().value()) *
                  static_cast<double>(k->type().sizes[k->type().sizes.size() - 2].value());
  double passes = t && t->backward ? kBackwardPasses : kForwardPasses;
  double operands = 0;
  for (const ir::Value* v : node.inputValues()) operands += static_cast<double>(numelOf(v));
  for (const ir::Value* v : node.outputValues()) operands += static_cast<double>(numelOf(v));
  return 4 * (passes * scores + operands) * blocks;
}

double ringExposedSeconds(const RingTraffic& t, double computeSeconds, const sharding::LinkCost& link) {
  double comm = static_cast<double>(t.sends) * link.alphaSeconds +
                static_cast<double>(t.bytesPerRank) / link.bytesPerSecond;
  return std::max(0.0, comm - computeSeconds);
}

Expected<CompileResult> compileAutoRotate(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                          const CompileOptions& options) {
  const std::string where =
      schema.source + ": " + schema.contextParallel->pointer + ": \"rotate\": \"auto\": ";
  if (archive.path.empty())
    return Status::error(where +
                         "needs the model's file to compile both forms; name \"ring\" or \"allgather\"");
  SPMD_ASSIGN_OR_RETURN(pt2::Archive copy, pt2::readModel(archive.path, {.loadWeights = false}));
  schema::PlacementSchema ringSchema = schema, gatherSchema = schema;
  ringSchema.contextParallel->rotate = "ring";
  gatherSchema.contextParallel->rotate = "allgather";
  gatherSchema.contextParallel->loadBalance.reset();  // the ring's split; the all-gather form has none
  auto ring = compile(copy, ringSchema, options);
  SPMD_ASSIGN_OR_RETURN(CompileResult gather, compile(archive, gatherSchema, options));
  if (!ring) {
    if (options.memoryBudget && estimateMemory(gather.program).peakBytes > *options.memoryBudget)
      return Status::error(where + "the ring cannot take this model and the all-gather form's modeled peak " +
                           withCommas(estimateMemory(gather.program).peakBytes) +
                           " B exceeds --memory-budget " + withCommas(*options.memoryBudget) + " B (" +
                           ring.status().message() + ")");
    gather.notes.push_back(
        "context parallelism: \"rotate\": \"auto\" chose allgather: the ring cannot take "
        "this model (" +
        ring.status().message() + ")");
    return gather;
  }
  const sharding::DeviceProfile& profile =
      options.profile ? *options.profile : sharding::defaultDeviceProfile();
  LayoutCost rc = modelLayout(ring->program, profile), gc = modelLayout(gather.program, profile);
  bool ringFits = !options.memoryBudget || rc.peakBytes <= *options.memoryBudget;
  bool gatherFits = !options.memoryBudget || gc.peakBytes <= *options.memoryBudget;
  if (!ringFits && !gatherFits)
    return Status::error(where + "neither form fits --memory-budget " + withCommas(*options.memoryBudget) +
                         " B: modeled peak per rank " + withCommas(rc.peakBytes) + " B (ring), " +
                         withCommas(gc.peakBytes) + " B (allgather); raise the budget or the cp axis's size");
  bool pickRing = ringFits && (!gatherFits || rc.stepSeconds() < gc.stepSeconds());
  std::string why = "modeled step " + millis(rc.stepSeconds()) + " (ring) vs " + millis(gc.stepSeconds()) +
                    " (allgather), peak " + withCommas(rc.peakBytes) + " B" + " vs " +
                    withCommas(gc.peakBytes) + " B" +
                    (options.memoryBudget ? ", budget " + withCommas(*options.memoryBudget) + " B" : "") +
                    ", profile " + profile.name;
  CompileResult chosen = pickRing ? std::move(*ring) : std::move(gather);
  if (pickRing) archive.program = std::move(copy.program);
  chosen.notes.push_back(std::string("context parallelism: \"rotate\": \"auto\" chose ") +
                         (pickRing ? "ring" : "allgather") + ": " + why);
  return chosen;
}

}  // namespace spmd::passes
