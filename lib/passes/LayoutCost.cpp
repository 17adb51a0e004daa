// Modeled cost of a compiled layout (see LayoutCost.h).
//
//   %addmm: f32[8, 64] = aten.addmm(%b, %x: f32[8, 32], %w: f32[32, 64])
//     FLOPs 2 * 8 * 64 * 32 = 32,768; seconds max(32768 / peak, bytes / bw)
//   %r = spmd.all_reduce(%y: f32[8, 64], "tp", "sum")   on a 4-rank axis
//     alpha + 2 * 3/4 * 2,048 B / bandwidth, added to axis tp
#include "passes/LayoutCost.h"

#include <algorithm>

#include "ir/Collectives.h"
#include "passes/ContextParallelCost.h"
#include "passes/Report.h"
#include "sharding/Propagation.h"

namespace spmd::passes {
namespace {

double numel(const ir::Value* v) {
  if (!v || !v->isTensor()) return 0;
  double n = 1;
  for (const auto& d : v->type().sizes) n *= static_cast<double>(d.value());
  return n;
}

int64_t sizeAt(const ir::Value* v, int64_t dim) {
  if (!v || !v->isTensor()) return 0;
  const auto& s = v->type().sizes;
  int64_t r = static_cast<int64_t>(s.size());
  if (dim < 0) dim += r;
  return dim >= 0 && dim < r ? s[static_cast<size_t>(dim)].value() : 0;
}

double bytesOf(const ir::Value* v) {
  return v && v->isTensor() ? numel(v) * ir::elementSize(v->type().dtype) : 0;
}

const ir::Value* named(const ir::Node& n, std::string_view name) {
  const ir::Argument* a = n.input(name);
  return a ? a->value() : nullptr;
}

double attentionFlops(const ir::Node& n) {
  const ir::Value* q = named(n, "query");
  const ir::Value* k = named(n, "key");
  const ir::Value* v = named(n, "value");
  if (!q || !k || !v) return 0;
  // [..., L, E] x [..., S, E] -> [..., L, S] x [..., S, Ev]
  double batch = numel(q) / std::max<int64_t>(1, sizeAt(q, -1) * sizeAt(q, -2));
  double l = static_cast<double>(sizeAt(q, -2)), s = static_cast<double>(sizeAt(k, -2));
  double f = 2 * batch * l * s * static_cast<double>(sizeAt(q, -1) + sizeAt(v, -1));
  return n.target().find("backward") != std::string::npos ? 2.5 * f : f;
}

}  // namespace

bool isViewOp(std::string_view t) {
  static constexpr std::string_view kViews[] = {"aten.view.default",
                                                "aten._unsafe_view.default",
                                                "aten.permute.default",
                                                "aten.t.default",
                                                "aten.transpose.int",
                                                "aten.expand.default",
                                                "aten.alias.default",
                                                "aten.unsqueeze.default",
                                                "aten.squeeze.dim",
                                                "aten.squeeze.dims",
                                                "aten.slice.Tensor",
                                                "aten.select.int",
                                                "aten.detach.default",
                                                "aten.as_strided.default",
                                                "aten.split.Tensor",
                                                "aten.unbind.int",
                                                "aten.split_with_sizes.default"};
  return std::find(std::begin(kViews), std::end(kViews), t) != std::end(kViews);
}

double opSeconds(double bytes, double flops, ir::ScalarType dtype, const sharding::DeviceProfile& profile) {
  double seconds = bytes / profile.memoryBytesPerSecond;
  return flops > 0 ? std::max(seconds, flops / profile.flopsFor(dtype)) : seconds;
}

double nodeFlops(const ir::Node& n) {
  const std::string& t = n.target();
  std::vector<ir::Value*> ins = n.inputValues();
  std::vector<ir::Value*> outs = n.outputValues();
  const ir::Value* out = outs.empty() ? nullptr : outs[0];
  if (t == "aten.mm.default" || t == "aten.bmm.default" || t == "aten.matmul.default") {
    const ir::Value* a = named(n, "self");
    return 2 * numel(out) * static_cast<double>(sizeAt(a, -1));
  }
  if (t == "aten.addmm.default") return 2 * numel(out) * static_cast<double>(sizeAt(named(n, "mat1"), -1));
  if (t.starts_with("aten.conv") && t.find("convolution") != std::string::npos) {
    const ir::Value* w = named(n, "weight");
    double perOut = numel(w) / std::max<int64_t>(1, sizeAt(w, 0));
    if (t == "aten.convolution_backward.default") return 2 * 2 * numel(named(n, "grad_output")) * perOut;
    return 2 * numel(out) * perOut;
  }
  if (t.starts_with("aten.conv")) {  // conv1d/2d/3d
    const ir::Value* w = named(n, "weight");
    return 2 * numel(out) * numel(w) / std::max<int64_t>(1, sizeAt(w, 0));
  }
  if (t.find("scaled_dot_product") != std::string::npos || t.find("ring_attention") != std::string::npos)
    return attentionFlops(n);
  return 0;
}

int64_t LayoutCost::collectives() const {
  int64_t n = 0;
  for (const auto& a : axes) n += a.collectives;
  return n;
}

double collectiveSeconds(const ir::Node& node, const sharding::Mesh& mesh, const sharding::CostModel& cm) {
  const std::string& t = node.target();
  const ir::Argument* axisArg = node.input("axis");
  const int64_t axis = axisArg && !axisArg->strings.empty() ? mesh.axisIndex(axisArg->strings[0]) : -1;
  std::vector<ir::Value*> ins = node.inputValues();
  std::vector<ir::Value*> outs = node.outputValues();
  if (!ir::isCommunicating(t) || axis < 0 || ins.empty() || outs.empty()) return 0;
  static const std::pair<std::string_view, sharding::CollectiveKind> kKinds[] = {
      {ir::kAllGather, sharding::CollectiveKind::AllGather},
      {ir::kAllReduce, sharding::CollectiveKind::AllReduce},
      {ir::kReduceScatter, sharding::CollectiveKind::ReduceScatter},
      {ir::kAllToAll, sharding::CollectiveKind::AllToAll}};
  sharding::CollectiveKind kind = sharding::CollectiveKind::AllReduce;
  for (const auto& [name, k] : kKinds)
    if (name == t) kind = k;
  return cm.cost(kind, axis, mesh.size(axis), static_cast<int64_t>(bytesOf(ins[0])),
                 static_cast<int64_t>(bytesOf(outs[0])));
}

double nodeComputeSeconds(const ir::Node& node, const sharding::DeviceProfile& profile) {
  const std::string& t = node.target();
  if (ir::isCommunicating(t) || t == ir::kWait || sharding::isSymbolicOp(t) || isViewOp(t)) return 0;
  std::vector<ir::Value*> outs = node.outputValues();
  double bytes = 0;
  for (const ir::Value* v : node.inputValues()) bytes += bytesOf(v);
  for (const ir::Value* v : outs) bytes += bytesOf(v);
  ir::ScalarType dt = outs.empty() ? ir::ScalarType::Float : outs[0]->type().dtype;
  return opSeconds(bytes, nodeFlops(node), dt, profile);
}

double valueBytes(const ir::Value* v) { return bytesOf(v); }

LayoutCost modelLayout(const program::Program& p, const sharding::DeviceProfile& profile) {
  LayoutCost c;
  const sharding::Mesh& mesh = p.mesh;
  sharding::CostModel cm = sharding::costModelFor(profile, mesh);
  for (int64_t a = 0; a < mesh.numAxes(); ++a)
    c.axes.push_back({mesh.axisNames()[static_cast<size_t>(a)], 0, 0, {}});
  for (const auto& node : p.graph.graph.nodes()) {
    const std::string& t = node->target();
    std::vector<ir::Value*> ins = node->inputValues();
    std::vector<ir::Value*> outs = node->outputValues();
    if (ir::isCommunicating(t)) {
      const ir::Argument* axisArg = node->input("axis");
      int64_t axis = axisArg && !axisArg->strings.empty() ? mesh.axisIndex(axisArg->strings[0]) : -1;
      if (axis < 0 || ins.empty() || outs.empty()) continue;
      double s = collectiveSeconds(*node, mesh, cm);
      AxisComm& ac = c.axes[static_cast<size_t>(axis)];
      ac.seconds += s;
      ++ac.collectives;
      std::string k(t.substr(5));
      auto it = std::find_if(ac.byKind.begin(), ac.byKind.end(), [&](const auto& e) { return e.first == k; });
      if (it == ac.byKind.end())
        ac.byKind.emplace_back(k, 1);
      else
        ++it->second;
      c.commSeconds += s;
      continue;
    }
    if (auto ring = ringTraffic(*node, mesh)) {  // compute on the slowest rank, exposed exchanges
      double compute =
          opSeconds(ringBytes(*node, mesh), ringFlops(*node, mesh), ir::ScalarType::Float, profile);
      double exposed = ringExposedSeconds(*ring, compute, sharding::axisLinkFor(profile, mesh, ring->axis));
      c.computeSeconds += compute;
      c.commSeconds += exposed;
      AxisComm& ac = c.axes[static_cast<size_t>(ring->axis)];
      ac.seconds += exposed;
      ac.collectives += ring->sends;
      auto it = std::find_if(ac.byKind.begin(), ac.byKind.end(),
                             [](const auto& e) { return e.first == "ring_send"; });
      if (it == ac.byKind.end())
        ac.byKind.emplace_back("ring_send", ring->sends);
      else
        it->second += ring->sends;
      continue;
    }
    c.computeSeconds += nodeComputeSeconds(*node, profile);
  }
  MemoryEstimate m = estimateMemory(p);
  c.paramBytes = m.paramBytes;
  c.peakBytes = m.peakBytes;
  return c;
}

}  // namespace spmd::passes
