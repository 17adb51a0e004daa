// Per-rank memory over program order, as `spmdc compile`'s peak estimate
// counts it (passes::liveRanges): weights (parameters, buffers, optimizer
// states) live throughout; gradients and activations from their producer to
// the last reader of them or a view of them (views cost nothing). Ranks differ only by their weight shards
// (an uneven split), so ranks with equal weight bytes share one "rank class".
//
//   "memory": {"categories": [...], "rank_classes": [{"ranks": [[0, 7]],
//     "static": {"parameters": 1024, ...}}], "points": [0, 1, ...],
//     "series": {"gradients": [...], "activations": [...]},
//     "peak": {"node": 17, "dynamic_bytes": 4096, "live": [...]}}
#include <algorithm>
#include <map>
#include <set>

#include "explain/Internal.h"
#include "ir/Collectives.h"
#include "passes/Report.h"

namespace spmd::explain::detail {
namespace {

constexpr size_t kMaxPoints = 1500;  // samples of the series (the max of each bucket)
constexpr size_t kPeakListed = 15;   // live values listed at the peak

const char* staticCategory(const std::string& fqn, const std::map<std::string, ir::InputKind>& kinds) {
  if (fqn.rfind("optim.", 0) == 0) return "optimizer_states";
  auto it = kinds.find(fqn);
  return it != kinds.end() && it->second == ir::InputKind::Parameter ? "parameters" : "buffers";
}

// Weight bytes per category for each rank class.
Json rankClasses(const program::Program& p) {
  std::map<std::string, ir::InputKind> kinds;
  for (const auto& in : p.graph.signature.inputs)
    if (!in.target.empty()) kinds[in.target] = in.kind;
  const int64_t ranks = p.mesh.numRanks();
  std::map<std::string, int64_t> base;
  std::vector<std::map<std::string, int64_t>> extra(static_cast<size_t>(ranks));
  for (const char* c : {"parameters", "buffers", "optimizer_states"}) base[c] = 0;
  for (const auto& w : p.weights) {
    const char* cat = staticCategory(w.fqn, kinds);
    if (sharding::checkEvenlyDivisible(w.globalShape, w.spec, p.mesh).isOk()) {
      base[cat] += weightBytes(w);
      continue;
    }
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t n = ir::elementSize(w.dtype);
      for (int64_t d : sharding::localShape(w.globalShape, w.spec, p.mesh, p.mesh.coords(r))) n *= d;
      extra[static_cast<size_t>(r)][cat] += n;
    }
  }
  // Group ranks with equal bytes; each class lists its ranks as [first, last] runs.
  std::map<std::map<std::string, int64_t>, std::vector<std::pair<int64_t, int64_t>>> classes;
  std::vector<std::map<std::string, int64_t>> order;
  for (int64_t r = 0; r < ranks; ++r) {
    std::map<std::string, int64_t> total = base;
    for (const auto& [k, v] : extra[static_cast<size_t>(r)]) total[k] += v;
    auto [it, added] = classes.try_emplace(total);
    if (added) order.push_back(total);
    if (!it->second.empty() && it->second.back().second == r - 1)
      it->second.back().second = r;
    else
      it->second.emplace_back(r, r);
  }
  Json out = Json::array();
  for (const auto& total : order) {
    Json runs = Json::array();
    for (const auto& [a, b] : classes[total]) runs.push_back({a, b});
    out.push_back({{"ranks", runs},
                   {"static",
                    {{"parameters", total.at("parameters")},
                     {"buffers", total.at("buffers")},
                     {"optimizer_states", total.at("optimizer_states")}}}});
  }
  return out;
}

// Gradient outputs, and what they were reduced from through collectives or
// are views or reshapes of (a live range is its storage's).
std::set<const ir::Value*> gradientValues(const program::Program& p) {
  std::set<const ir::Value*> out;
  std::vector<const ir::Value*> work;
  for (const auto& o : p.graph.signature.outputs)
    if (o.kind == ir::OutputKind::GradientToParameter && o.arg.value()) work.push_back(o.arg.value());
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    const ir::Node* prod = v->producer();
    if (!out.insert(v).second || !prod ||
        !(ir::isSpmdOp(prod->target()) || passes::isViewOp(prod->target()) ||
          prod->target() == "aten.reshape.default"))
      continue;
    std::vector<ir::Value*> ins = prod->inputValues();
    if (!ins.empty()) work.push_back(ins[0]);
  }
  return out;
}

}  // namespace

Json memoryData(const program::Program& p, const ModuleMap& m) {
  const size_t n = p.graph.graph.nodes().size();
  std::vector<passes::LiveRange> ranges = passes::liveRanges(p);
  std::set<const ir::Value*> grads = gradientValues(p);
  std::vector<int64_t> dg(n + 2, 0), da(n + 2, 0);
  for (const auto& r : ranges) {
    auto& d = grads.count(r.value) ? dg : da;
    d[static_cast<size_t>(r.first)] += r.bytes;
    d[static_cast<size_t>(r.last) + 1] -= r.bytes;
  }
  std::vector<int64_t> g(n, 0), a(n, 0);
  size_t peak = 0;
  for (size_t i = 0; i < n; ++i) {
    g[i] = (i ? g[i - 1] : 0) + dg[i];
    a[i] = (i ? a[i - 1] : 0) + da[i];
    if (g[i] + a[i] > g[peak] + a[peak]) peak = i;
  }
  Json points = Json::array(), sg = Json::array(), sa = Json::array();
  const size_t bucket = std::max<size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
  for (size_t start = 0; start < n; start += bucket) {
    size_t best = start;
    for (size_t i = start; i < std::min(n, start + bucket); ++i)
      if (g[i] + a[i] > g[best] + a[best]) best = i;
    points.push_back(best);
    sg.push_back(g[best]);
    sa.push_back(a[best]);
  }
  std::vector<const passes::LiveRange*> live;
  for (const auto& r : ranges)
    if (n > 0 && static_cast<size_t>(r.first) <= peak && peak <= static_cast<size_t>(r.last) && r.bytes > 0)
      live.push_back(&r);
  std::stable_sort(live.begin(), live.end(), [](auto* x, auto* y) { return x->bytes > y->bytes; });
  Json liveJson = Json::array();
  for (size_t i = 0; i < live.size() && i < kPeakListed; ++i) {
    const ir::Node* prod = live[i]->value->producer();
    liveJson.push_back({{"value", live[i]->value->name() + (live[i]->staging ? " (staging)" : "")},
                        {"bytes", live[i]->bytes},
                        {"category", grads.count(live[i]->value) ? "gradients" : "activations"},
                        {"module", prod ? m.nodeModule[static_cast<size_t>(prod->index())] : -1}});
  }
  Json j;
  j["categories"] = {"parameters", "buffers", "optimizer_states", "gradients", "activations"};
  j["rank_classes"] = rankClasses(p);
  j["points"] = points;
  j["series"] = {{"gradients", sg}, {"activations", sa}};
  j["peak"] = {{"node", n ? static_cast<int64_t>(peak) : -1},
               {"dynamic_bytes", n ? g[peak] + a[peak] : 0},
               {"live_values", live.size()},
               {"live", liveJson}};
  return j;
}

}  // namespace spmd::explain::detail
