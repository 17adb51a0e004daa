// Reports and summaries of a compile (see Report.h).
#include "passes/Report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "ir/Collectives.h"
#include "passes/ActivationMemory.h"
#include "program/Dump.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

int64_t bytesOf(const ir::Value& v) {
  if (!v.isTensor()) return 0;
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

const sharding::DeviceProfile& profileOf(const ReportExtras& e) {
  return e.profile ? *e.profile : sharding::defaultDeviceProfile();
}

}  // namespace

std::string costJson(const LayoutCost& c, const std::string& profileName) {
  nlohmann::ordered_json j;
  j["device_profile"] = profileName;
  j["modeled_step_ms"] = c.stepSeconds() * 1e3;
  j["compute_ms"] = c.computeSeconds * 1e3;
  j["comm_ms"] = c.commSeconds * 1e3;
  nlohmann::ordered_json perAxis = nlohmann::ordered_json::object();
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const auto& a : c.axes) {
    perAxis[a.axis] = a.seconds * 1e3;
    counts[a.axis] = a.collectives;
  }
  j["comm_ms_per_axis"] = perAxis;
  j["collectives_per_axis"] = counts;
  j["param_bytes_per_rank"] = c.paramBytes;
  j["peak_bytes_per_rank"] = c.peakBytes;
  return j.dump();
}

std::string costLine(const LayoutCost& c) {
  std::string axes;
  for (const auto& a : c.axes)
    axes += (axes.empty() ? "" : ", ") + a.axis + " " + ms(a.seconds) + " ms, " +
            std::to_string(a.collectives) + " collective" + (a.collectives == 1 ? "" : "s");
  return "modeled step " + ms(c.stepSeconds()) + " ms = compute " + ms(c.computeSeconds) + " + comm " +
         ms(c.commSeconds) + (axes.empty() ? "" : " (" + axes + ")") + ", peak " + withCommas(c.peakBytes) +
         " B/rank";
}

std::vector<LiveRange> liveRanges(const program::Program& program) {
  const ir::Graph& g = program.graph.graph;
  const int lastNode = std::max(0, static_cast<int>(g.nodes().size()) - 1);
  std::unordered_map<const ir::Value*, int> lastUse;
  for (const auto& n : g.nodes())
    for (ir::Value* v : n->inputValues()) lastUse[v] = n->index();
  for (const auto& o : g.outputs())
    for (ir::Value* v : o.values)
      if (v) lastUse[v] = lastNode;
  std::vector<LiveRange> out;
  for (const auto& in : program.graph.signature.inputs)
    if (in.kind == ir::InputKind::UserInput && in.value && in.value->isTensor())
      out.push_back({in.value, 0, lastNode, bytesOf(*in.value)});
  for (const auto& n : g.nodes())
    for (ir::Value* v : n->outputValues()) {
      if (!v->isTensor()) continue;
      auto it = lastUse.find(v);
      out.push_back({v, n->index(), it == lastUse.end() ? n->index() : it->second, bytesOf(*v)});
    }
  return out;
}

MemoryEstimate estimateMemory(const program::Program& program) {
  MemoryEstimate m;
  for (const auto& w : program.weights) {
    int64_t n = ir::elementSize(w.dtype);
    for (int64_t d : w.localShape) n *= d;
    m.paramBytes += n;
  }
  // Live bytes at each node: +bytes where a range starts, -bytes after it ends.
  std::vector<int64_t> delta(std::max<size_t>(program.graph.graph.nodes().size(), 1) + 1, 0);
  for (const LiveRange& r : liveRanges(program)) {
    delta[static_cast<size_t>(r.first)] += r.bytes;
    delta[static_cast<size_t>(r.last) + 1] -= r.bytes;
  }
  int64_t peak = 0, live = 0;
  for (size_t i = 0; i + 1 < delta.size(); ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  m.peakBytes = m.paramBytes + peak;
  return m;
}

std::string reportJson(const CompileResult& r, const ReportExtras& extras) {
  const program::Program& p = r.program;
  nlohmann::ordered_json j;
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const char* kind : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) counts[kind] = 0;
  for (const auto& n : p.graph.graph.nodes())
    if (ir::isCommunicating(n->target()))
      counts[n->target().substr(5)] = counts[n->target().substr(5)].get<int>() + 1;
  j["collective_counts"] = counts;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& c : p.collectives) {
    nlohmann::ordered_json e;
    e["kind"] = c.kind;
    e["mesh_axis"] = c.axis;
    e["bytes_per_rank"] = c.bytesPerRank;
    e["node"] = c.node;
    e["value"] = c.value;
    // The local shape the collective produces ([] for a scalar, such as a
    // loss or the count a mean divides by).
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    if (const ir::Value* v = p.graph.graph.findValue(c.node))
      for (const auto& d : v->type().sizes) shape.push_back(d.value());
    e["shape"] = shape;
    e["from"] = c.from;
    e["to"] = c.to;
    e["reason"] = "needed by " + c.consumer;
    e["source_line"] = c.sourceLine;
    list.push_back(e);
  }
  j["collectives"] = list;
  MemoryEstimate m = estimateMemory(p);
  j["per_rank"] = {{"param_bytes", m.paramBytes}, {"peak_bytes_estimate", m.peakBytes}};
  j["per_rank"]["saved_activation_bytes"] = estimateSavedActivations(p).savedBytes;
  // Uneven shards: each rank's local shape and the padding collectives add.
  nlohmann::ordered_json uneven = nlohmann::ordered_json::array();
  for (const program::UnevenTensor& u : program::unevenTensors(p))
    uneven.push_back(
        {{"tensor", u.what}, {"spec", u.spec}, {"per_rank", u.perRank}, {"padding_bytes", u.paddingBytes}});
  if (!uneven.empty()) j["uneven"] = uneven;
  j["cost"] =
      nlohmann::ordered_json::parse(costJson(modelLayout(p, profileOf(extras)), profileOf(extras).name));
  nlohmann::ordered_json t = nlohmann::ordered_json::object();
  double total = 0;
  for (const auto& [phase, ms] : r.timingsMs) {
    t[phase] = ms;
    total += ms;
  }
  t["total"] = total;
  j["timings_ms"] = t;
  j["notes"] = r.notes;
  j["warnings"] = r.warnings;
  for (const auto& [key, text] : extras.sections) j[key] = nlohmann::ordered_json::parse(text);
  return j.dump(1) + "\n";
}

std::string summaryText(const CompileResult& r, const std::string& input, const std::string& output,
                        const ReportExtras& extras) {
  const program::Program& p = r.program;
  auto summary = program::summarizeCollectives(p);
  int64_t total = 0;
  std::string kinds;
  for (const auto& [kind, s] : summary) {
    total += s.count;
    kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(s.count) + ": " +
             withCommas(s.bytesPerRank) + " B/rank";
  }
  std::string out = input + " -> " + output + ": mesh " + p.mesh.str() + ", " +
                    std::to_string(p.graph.graph.nodes().size()) + " ops, " + std::to_string(total) +
                    " collective" + (total == 1 ? "" : "s") + (kinds.empty() ? "" : " (" + kinds + ")") +
                    "\n";
  const size_t kShown = 8;
  for (size_t i = 0; i < p.collectives.size() && i < kShown; ++i) {
    const auto& c = p.collectives[i];
    out += "  " + c.kind + " " + c.value + " on " + c.axis + ": " + c.from + " -> " + c.to + " for " +
           c.consumer + (c.sourceLine.empty() ? "" : " (" + c.sourceLine + ")") + "\n";
  }
  if (p.collectives.size() > kShown)
    out += "  ... " + std::to_string(p.collectives.size() - kShown) + " more (see --report)\n";
  MemoryEstimate m = estimateMemory(p);
  out += "  per rank: " + withCommas(m.paramBytes) + " B of weights, peak estimate " +
         withCommas(m.peakBytes) + " B\n";
  if (auto uneven = program::unevenTensors(p); !uneven.empty()) {
    int64_t padding = 0;
    for (const auto& u : uneven) padding += u.paddingBytes;
    out += "  uneven: " + std::to_string(uneven.size()) + " tensors split unevenly, padding " +
           withCommas(padding) + " B when gathered whole (each rank's shape: spmdc dump, --report)\n";
  }
  out += "  cost (" + profileOf(extras).name + "): " + costLine(modelLayout(p, profileOf(extras))) + "\n";
  for (const auto& line : extras.summaryLines) out += "  " + line + "\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  constexpr size_t kWarningsShown = 10;
  for (size_t i = 0; i < r.warnings.size() && i < kWarningsShown; ++i)
    out += "warning: " + r.warnings[i] + "\n";
  if (r.warnings.size() > kWarningsShown)
    out += "warning: ... " + std::to_string(r.warnings.size() - kWarningsShown) + " more (see --report)\n";
  return out;
}

}  // namespace spmd::passes
