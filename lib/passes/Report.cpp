// Reports and summaries of a compile (see Report.h).
#include "passes/Report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "ir/Collectives.h"
#include "passes/ActivationMemory.h"
#include "passes/AttentionMemory.h"
#include "passes/ContextParallelCost.h"
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

LayoutCost costOf(const program::Program& p, const ReportExtras& e) {
  return e.cost ? *e.cost : modelLayout(p, profileOf(e));
}

}  // namespace

const sharding::DeviceProfile& profileOf(const ReportExtras& e) {
  return e.profile ? *e.profile : sharding::defaultDeviceProfile();
}

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

namespace {

// An int argument given as a constant, or `otherwise`.
int64_t intArg(const ir::Node& n, std::string_view name, int64_t otherwise) {
  const ir::Argument* a = n.input(name);
  return a != nullptr && a->ints.size() == 1 && a->values.empty() ? a->ints[0] : otherwise;
}

// The "self" operand of `n`, or null.
const ir::Value* selfOf(const ir::Node& n) {
  const ir::Argument* a = n.input("self");
  return a != nullptr ? a->value() : nullptr;
}

// True when argument `name` (a dim of "self", default 0) is its leading one.
bool onLeadingDim(const ir::Node& n, std::string_view name) {
  const ir::Value* self = selfOf(n);
  int64_t dim = intArg(n, name, 0);
  return dim == 0 || (self != nullptr && self->isTensor() && dim == -self->type().rank());
}

// What the runtime's result of `n` is: a fresh storage, or a view of its
// "self" operand's storage, contiguous or not.
enum class Result : uint8_t { Fresh, ContiguousView, StridedView };

// spmd.local_slice narrows "self" (runtime CollectiveOps localSlice, then
// contiguous()): a view where the narrow stays contiguous (no split factor,
// and every dim before `dim` of size 1 or the whole dim kept), else a copy.
Result localSliceResult(const ir::Node& n, bool contiguous) {
  const ir::Value* self = selfOf(n);
  if (!contiguous || self == nullptr || !self->isTensor() || n.outputValues().empty() ||
      intArg(n, "split_factor", 1) != 1)
    return Result::Fresh;
  const auto& in = self->type().sizes;
  const auto& out = n.outputValues()[0]->type().sizes;
  int64_t dim = intArg(n, "dim", 0);
  dim = dim < 0 ? dim + self->type().rank() : dim;
  if (dim < 0 || dim >= self->type().rank() || out.size() != in.size()) return Result::Fresh;
  bool outer = std::any_of(in.begin(), in.begin() + dim, [](const ir::Dim& d) { return d.value() != 1; });
  bool whole = out[static_cast<size_t>(dim)].value() == in[static_cast<size_t>(dim)].value();
  return !outer || whole ? Result::ContiguousView : Result::Fresh;
}

// `contiguous`: whether "self" is. Views (isViewOp) allocate nothing;
// reshape views a contiguous tensor and copies any other; spmd.wait hands
// out its collective's buffer where that already has the result's layout
// (runtime CollectiveOps: all-reduce, all-gather and reduce-scatter on
// dim 0), else a copy.
Result resultOf(const ir::Node& n, bool contiguous) {
  const std::string& t = n.target();
  auto keep = contiguous ? Result::ContiguousView : Result::StridedView;
  if (t == "aten.reshape.default") return contiguous ? Result::ContiguousView : Result::Fresh;
  if (t == ir::kWait) {
    const ir::Value* in = selfOf(n);
    const ir::Node* c = in != nullptr ? in->producer() : nullptr;
    if (c == nullptr) return Result::Fresh;
    bool inPlace =
        c->target() == ir::kAllReduce ||
        (c->target() == ir::kAllGather && onLeadingDim(*c, "dim") && intArg(*c, "split_factor", 1) == 1) ||
        (c->target() == ir::kReduceScatter && onLeadingDim(*c, "dim"));
    return inPlace ? Result::ContiguousView : Result::Fresh;
  }
  if (t == ir::kLocalSlice) return localSliceResult(n, contiguous);
  if (!isViewOp(t)) return Result::Fresh;
  static constexpr std::string_view kSameLayout[] = {
      "aten.view.default",      "aten._unsafe_view.default", "aten.alias.default", "aten.detach.default",
      "aten.unsqueeze.default", "aten.squeeze.dim",          "aten.squeeze.dims"};
  if (std::find(std::begin(kSameLayout), std::end(kSameLayout), t) != std::end(kSameLayout)) return keep;
  if (t == "aten.slice.Tensor" && intArg(n, "step", 1) != 1) return Result::StridedView;
  if (t == "aten.slice.Tensor" || t == "aten.select.int" || t == "aten.split.Tensor" ||
      t == "aten.split_with_sizes.default" || t == "aten.unbind.int")
    return onLeadingDim(n, "dim") ? keep : Result::StridedView;
  return Result::StridedView;  // permute, transpose, expand, as_strided, ...
}

// Bytes a collective allocates beside its operands and result, as runtime
// CollectiveOps calls c10d's Gloo backend: during its own node (`during`)
// and until its wait (`untilWait`). An all-gather's backend stages the
// gathered tensor once more (and, synchronous off dim 0, the rows are
// copied out once more). A reduce-scatter's backend all-reduces a copy of
// its input (ProcessGroupGloo::reduce_scatter_tensor_coalesced), freed when
// that all-reduce completes: with ranks in step, within the node (on a slow
// link as late as the wait); off dim 0 it scatters from a transposed copy,
// which its work holds until the wait.
struct Scratch {
  int64_t during = 0;
  int64_t untilWait = 0;
};

Scratch collectiveScratch(const ir::Node& c) {
  const ir::Value* self = selfOf(c);
  if (self == nullptr || c.outputValues().empty()) return {};
  if (c.target() == ir::kReduceScatter) return {bytesOf(*self), onLeadingDim(c, "dim") ? 0 : bytesOf(*self)};
  if (c.target() != ir::kAllGather) return {};
  int64_t out = bytesOf(*c.outputValues()[0]);
  bool copied = intArg(c, "async", 0) == 0 && (!onLeadingDim(c, "dim") || intArg(c, "split_factor", 1) != 1);
  return {copied ? 2 * out : out, 0};
}

}  // namespace

std::vector<LiveRange> liveRanges(const ir::ExportedProgram& program, int threads) {
  const ir::Graph& g = program.graph;
  const int lastNode = std::max(0, static_cast<int>(g.nodes().size()) - 1);
  // By value id, in one pass (a view's base comes first): the storage a
  // value uses, whether it is contiguous, and the last node that reads any
  // alias of a storage.
  std::vector<const ir::Value*> storage(g.numValues(), nullptr);
  std::vector<char> strided(g.numValues(), 0);
  std::vector<int> lastUse(g.numValues(), -1);
  auto root = [&](const ir::Value* v) {
    const ir::Value* s = storage[static_cast<size_t>(v->id())];
    return s ? s : v;  // graph inputs are their own storage
  };
  auto use = [&](const ir::Value* v, int node) { lastUse[static_cast<size_t>(root(v)->id())] = node; };
  std::vector<LiveRange> scratch;
  for (const auto& n : g.nodes()) {
    for (ir::Value* v : n->inputValues()) use(v, n->index());
    const ir::Value* self = selfOf(*n);
    Result r = resultOf(*n, self == nullptr || !strided[static_cast<size_t>(self->id())]);
    if (self == nullptr) r = Result::Fresh;
    for (ir::Value* v : n->outputValues()) {
      storage[static_cast<size_t>(v->id())] = r == Result::Fresh ? v : root(self);
      strided[static_cast<size_t>(v->id())] = r == Result::StridedView;
    }
    // An all-gather's or reduce-scatter's work holds its operand until the
    // wait (an all-reduce's holds its copy: its result).
    const ir::Node* c = n->target() == ir::kWait && self ? self->producer() : nullptr;
    if (c != nullptr && selfOf(*c) &&
        (c->target() == ir::kAllGather || (c->target() == ir::kReduceScatter && onLeadingDim(*c, "dim"))))
      use(selfOf(*c), n->index());
    const Scratch sc = collectiveScratch(*n);
    if (sc.during > 0) scratch.push_back({n->outputValues()[0], n->index(), n->index(), sc.during, true});
    if (sc.untilWait > 0) {
      int end = n->index();
      for (const ir::Node* u : n->outputValues()[0]->users())
        if (u->target() == ir::kWait) end = std::max(end, u->index());
      scratch.push_back({n->outputValues()[0], n->index(), end, sc.untilWait, true});
    }
    if (int64_t bytes = attentionScratchBytes(*n, threads); bytes > 0)
      scratch.push_back({n->outputValues()[0], n->index(), n->index(), bytes, true});
  }
  for (const auto& o : g.outputs())
    for (ir::Value* v : o.values)
      if (v) use(v, lastNode);
  std::vector<LiveRange> out;
  for (const auto& in : program.signature.inputs)
    if (in.kind == ir::InputKind::UserInput && in.value && in.value->isTensor())
      out.push_back({in.value, 0, lastNode, bytesOf(*in.value)});
  for (const auto& n : g.nodes())
    for (ir::Value* v : n->outputValues())
      if (v->isTensor() && root(v) == v)
        out.push_back(
            {v, n->index(), std::max(lastUse[static_cast<size_t>(v->id())], n->index()), bytesOf(*v)});
  out.insert(out.end(), scratch.begin(), scratch.end());
  return out;
}

std::vector<LiveRange> liveRanges(const program::Program& program) {
  return liveRanges(program.graph, intraOpThreads(program.mesh.numRanks()));
}

namespace {

// " at %node (file.py:12: code)": where the estimated peak is reached.
std::string peakWhere(const MemoryEstimate& m) {
  if (m.peakNode == nullptr) return "";
  std::string line = ir::userSourceLine(m.peakNode->metadata().stackTrace);
  return " at %" + m.peakNode->name() + (line.empty() ? "" : " (" + line + ")");
}

}  // namespace

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
  const auto& nodes = program.graph.graph.nodes();
  for (size_t i = 0; i + 1 < delta.size(); ++i) {
    live += delta[i];
    if (live <= peak) continue;
    peak = live;
    if (i < nodes.size()) m.peakNode = nodes[i].get();
  }
  m.peakBytes = m.paramBytes + peak;
  return m;
}

namespace {

// The dtype a collective moves ("bf16", "f32"), from the value it produces.
std::string collectiveDtype(const program::Program& p, const program::CollectiveRecord& c) {
  const ir::Value* v = p.graph.graph.findValue(c.node);
  return v ? std::string(ir::scalarTypeName(v->type().dtype)) : "?";
}

// Ring attention's point-to-point exchanges (not collectives of the
// program: its kernels post them): per node and in total, per rank.
nlohmann::ordered_json ringJson(const program::Program& p) {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  int64_t sends = 0, bytes = 0;
  for (const auto& n : p.graph.graph.nodes()) {
    auto t = ringTraffic(*n, p.mesh);
    if (!t) continue;
    nodes.push_back({{"node", n->name()},
                     {"mesh_axis", p.mesh.axisNames()[static_cast<size_t>(t->axis)]},
                     {"backward", t->backward},
                     {"sends", t->sends},
                     {"bytes_per_send", t->bytesPerSend},
                     {"bytes_per_rank", t->bytesPerRank}});
    if (t->backward) nodes.back()["grad_bytes_per_send"] = t->gradBytesPerSend;
    sends += t->sends;
    bytes += t->bytesPerRank;
  }
  if (nodes.empty()) return {};
  return {{"sends", sends}, {"bytes_per_rank", bytes}, {"nodes", nodes}};
}

}  // namespace

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
  std::map<std::string, std::map<std::string, int64_t>> byDtype;  // kind -> dtype -> bytes per rank
  for (const auto& c : p.collectives) {
    nlohmann::ordered_json e;
    e["kind"] = c.kind;
    e["mesh_axis"] = c.axis;
    e["dtype"] = collectiveDtype(p, c);
    e["bytes_per_rank"] = c.bytesPerRank;
    byDtype[c.kind][collectiveDtype(p, c)] += c.bytesPerRank;
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
  j["collective_bytes_by_dtype"] = byDtype;
  if (auto ring = ringJson(p); !ring.empty()) j["ring_attention"] = ring;
  MemoryEstimate m = estimateMemory(p);
  j["per_rank"] = {{"param_bytes", m.paramBytes}, {"peak_bytes_estimate", m.peakBytes}};
  if (m.peakNode != nullptr) {
    j["per_rank"]["peak_node"] = m.peakNode->name();
    j["per_rank"]["peak_source_line"] = ir::userSourceLine(m.peakNode->metadata().stackTrace);
  }
  j["per_rank"]["saved_activation_bytes"] = estimateSavedActivations(p).savedBytes;
  // The fused CPU attention's per-thread scratch depends on the worker's
  // threads, which the estimate assumes (AttentionMemory.h: intraOpThreads).
  const auto& nodes = p.graph.graph.nodes();
  if (std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return attentionScratchBytes(*n, 1) > 0; }))
    j["per_rank"]["intra_op_threads_assumed"] = intraOpThreads(p.mesh.numRanks());
  // Uneven shards: each rank's local shape and the padding collectives add.
  nlohmann::ordered_json uneven = nlohmann::ordered_json::array();
  for (const program::UnevenTensor& u : program::unevenTensors(p))
    uneven.push_back(
        {{"tensor", u.what}, {"spec", u.spec}, {"per_rank", u.perRank}, {"padding_bytes", u.paddingBytes}});
  if (!uneven.empty()) j["uneven"] = uneven;
  j["cost"] = nlohmann::ordered_json::parse(costJson(costOf(p, extras), profileOf(extras).name));
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
  if (auto ring = ringJson(p); !ring.empty())
    out += "  ring attention: " + std::to_string(ring["nodes"].size()) + " ops, " +
           withCommas(ring["sends"].get<int64_t>()) + " point-to-point sends, " +
           withCommas(ring["bytes_per_rank"].get<int64_t>()) + " B/rank\n";
  const size_t kShown = 8;
  for (size_t i = 0; i < p.collectives.size() && i < kShown; ++i) {
    const auto& c = p.collectives[i];
    out += "  " + c.kind + " " + c.value + " (" + collectiveDtype(p, c) + ", " + withCommas(c.bytesPerRank) +
           " B) on " + c.axis + ": " + c.from + " -> " + c.to + " for " + c.consumer +
           (c.sourceLine.empty() ? "" : " (" + c.sourceLine + ")") + "\n";
  }
  if (p.collectives.size() > kShown)
    out += "  ... " + std::to_string(p.collectives.size() - kShown) + " more (see --report)\n";
  MemoryEstimate m = estimateMemory(p);
  out += "  per rank: " + withCommas(m.paramBytes) + " B of weights, peak estimate " +
         withCommas(m.peakBytes) + " B" + peakWhere(m) + "\n";
  if (auto uneven = program::unevenTensors(p); !uneven.empty()) {
    int64_t padding = 0;
    for (const auto& u : uneven) padding += u.paddingBytes;
    out += "  uneven: " + std::to_string(uneven.size()) + " tensors split unevenly, padding " +
           withCommas(padding) + " B when gathered whole (each rank's shape: spmdc dump, --report)\n";
  }
  out += "  cost (" + profileOf(extras).name + "): " + costLine(costOf(p, extras)) + "\n";
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
