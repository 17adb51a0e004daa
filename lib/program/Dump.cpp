// The `spmdc dump` text (see Dump.h).
//
//   provenance {"source": "/home/me/models/mlp.pt2", "time": "2025-01-01T10:00"}
//   -> "provenance source: mlp.pt2" (the time is left out)
//
// Sections in order: header, ranges, inputs, nodes, outputs, weights,
// collectives. Every list is in program order except the collective
// summary, which is sorted by kind.
#include "program/Dump.h"

#include "program/PipelineText.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string_view>

#include "ir/Collectives.h"
#include "serialize/ToText.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

constexpr std::array<std::string_view, 14> kMachineKeys = {
    "time", "timestamp", "date", "created", "created_at", "host",    "hostname",
    "user", "username",  "cwd",  "pid",     "build_dir",  "machine", "tmpdir"};

bool isAbsolutePath(std::string_view s) {
  if (s.empty()) return false;
  if (s[0] == '/' || s[0] == '~') return true;
  return s.size() > 2 && std::isalpha(static_cast<unsigned char>(s[0])) && s[1] == ':' &&
         (s[2] == '\\' || s[2] == '/');
}

std::string baseName(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Shortens every absolute path among the space-separated words of `value`
// (also after "key=" in a word).
std::string stripPaths(const std::string& value) {
  std::string out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t end = value.find(' ', pos);
    if (end == std::string::npos) end = value.size();
    std::string_view word(value.data() + pos, end - pos);
    size_t eq = word.find('=');
    std::string_view head = eq == std::string_view::npos ? std::string_view() : word.substr(0, eq + 1);
    std::string_view tail = eq == std::string_view::npos ? word : word.substr(eq + 1);
    out += std::string(head) + (isAbsolutePath(tail) ? baseName(tail) : std::string(tail));
    if (end == value.size()) break;
    out += ' ';
    pos = end + 1;
  }
  return out;
}

std::string specStr(const sharding::ShardingSpec& spec) { return spec.str(); }

std::string globalStr(const ir::TensorType& t) {
  if (t.dtype == ir::ScalarType::Unknown && t.sizes.empty()) return "";
  return " global " + t.str();
}

// "  per rank [2, 8] [2, 8] [1, 8] [0, 8]  padding 48 bytes" where ranks'
// local shapes differ (uneven shards; padding: what collectives add to
// bring every shard to the largest); "" otherwise.
std::string perRankStr(const std::vector<int64_t>& global, const sharding::ShardingSpec& spec,
                       const sharding::Mesh& mesh, ir::ScalarType dtype) {
  if (spec.placements.size() != static_cast<size_t>(mesh.numAxes()) ||
      !sharding::checkShardable(global, spec, mesh).isOk() || !sharding::isUneven(global, spec, mesh))
    return "";
  std::string s = "  per rank";
  for (int64_t r = 0; r < mesh.numRanks(); ++r)
    s += " " + formatShape(sharding::localShape(global, spec, mesh, mesh.coords(r)));
  return s + "  padding " +
         std::to_string(sharding::paddingElements(global, spec, mesh) * ir::elementSize(dtype)) + " bytes";
}

std::string perRankStr(const ir::TensorType& t, const sharding::ShardingSpec& spec,
                       const sharding::Mesh& mesh) {
  if (!t.isStatic() || t.sizes.empty()) return "";
  std::vector<int64_t> global;
  for (const auto& d : t.sizes) global.push_back(d.value());
  return perRankStr(global, spec, mesh, t.dtype);
}

// Local bytes of a node's first tensor input; 0 when symbolic or absent.
int64_t inputBytes(const ir::Node& n) {
  for (const ir::Value* v : n.inputValues()) {
    if (!v || !v->isTensor()) continue;
    auto numel = v->type().numel();
    return numel ? *numel * ir::elementSize(v->type().dtype) : 0;
  }
  return 0;
}

std::string header(const Program& p) {
  std::string s = "spmd program " + p.graph.name + " (format " + std::to_string(p.formatVersion) + "." +
                  std::to_string(p.formatMinor) + ")\n";
  const auto& shape = p.mesh.shape();
  s += "mesh " + sharding::Mesh::formatShape(shape) + " (";
  for (size_t a = 0; a < shape.size(); ++a)
    s += (a ? ", " : "") + p.mesh.axisNames()[a] + "=" + std::to_string(shape[a]);
  s += "), " + std::to_string(p.mesh.numRanks()) + " ranks\n";
  if (p.pipeline) {
    const PipelinePlan& pp = *p.pipeline;
    s += "pipeline axis " + pp.axis + "=" + std::to_string(pp.stages) + ", schedule " + pp.schedule +
         (pp.virtualStages > 1 ? ", " + std::to_string(pp.virtualStages) + " virtual stages per rank" : "") +
         ", microbatches over mesh axis " + pp.microbatchAxis + ", " + std::to_string(worldSize(p)) +
         " ranks\n";
    s += scheduleTable(pp);
  }
  s += "graph schema " + std::to_string(p.graph.schemaMajor) + "." + std::to_string(p.graph.schemaMinor) +
       ", torch " + p.graph.torchVersion + "\n";
  for (const auto& [k, v] : stableProvenance(p))
    s.append("provenance ").append(k).append(": ").append(v) += '\n';
  for (const auto& [sym, r] : p.graph.ranges)
    s += "range " + sym + ": [" + std::to_string(r.min) + ", " +
         (r.max == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(r.max)) + "]\n";
  return s;
}

std::string boundaries(const Program& p, bool inputs) {
  std::string s;
  const auto& sig = p.graph.signature;
  const auto& infos = inputs ? p.inputs : p.outputs;
  size_t n = inputs ? sig.inputs.size() : sig.outputs.size();
  for (size_t i = 0; i < n; ++i) {
    if (inputs) {
      const auto& in = sig.inputs[i];
      s += "input " + inputDecl(in) + " " + std::string(ir::inputKindName(in.kind));
      if (!in.target.empty()) s += " " + in.target;
      if (in.kind == ir::InputKind::Buffer && !in.persistent) s += " non_persistent";
    } else {
      const auto& out = sig.outputs[i];
      s += "output " + serialize::printArgument(out.arg) + " " + std::string(ir::outputKindName(out.kind));
      if (!out.target.empty()) s += " " + out.target;
    }
    if (i < infos.size())
      s += "  " + specStr(infos[i].spec) + globalStr(infos[i].globalType) +
           perRankStr(infos[i].globalType, infos[i].spec, p.mesh);
    s += "\n";
  }
  return s;
}

std::string weights(const Program& p) {
  std::string s;
  int64_t total = 0;
  for (const auto& w : p.weights) {
    uint64_t perRank = 0;
    for (const auto& b : w.shards) perRank = std::max(perRank, b.bytes);
    std::string from = "blobs " + std::to_string(w.shards.size());
    if (w.source) {  // by reference: rank 0's region, in the program's dtype
      perRank = static_cast<uint64_t>(ir::elementSize(w.dtype));
      for (int64_t d : w.localShape) perRank *= static_cast<uint64_t>(d);
      from = w.source->zeros ? "zeros" : "from " + w.source->file + ":" + w.source->tensor;
    }
    total += static_cast<int64_t>(perRank);
    s += "weight " + w.fqn + "  " + specStr(w.spec) + " " + std::string(ir::scalarTypeName(w.dtype)) +
         formatShape(w.globalShape) + " -> " + formatShape(w.localShape) + "  " + from + "  bytes/rank " +
         std::to_string(perRank) + perRankStr(w.globalShape, w.spec, p.mesh, w.dtype) + "\n";
  }
  s += "weights " + std::to_string(p.weights.size()) + "  bytes/rank " + std::to_string(total) + "\n";
  return s;
}

}  // namespace

std::map<std::string, CollectiveSummary> summarizeCollectives(const Program& p) {
  std::map<std::string, int64_t> recorded;
  for (const auto& c : p.collectives) recorded[c.node] += c.bytesPerRank;
  std::map<std::string, CollectiveSummary> out;
  for (const auto& n : p.graph.graph.nodes()) {
    if (!ir::isCommunicating(n->target())) continue;
    CollectiveSummary& s = out[n->target().substr(5)];
    ++s.count;
    auto it = recorded.find(n->name());
    s.bytesPerRank += it != recorded.end() ? it->second : inputBytes(*n);
  }
  return out;
}

std::vector<UnevenTensor> unevenTensors(const Program& p) {
  std::vector<UnevenTensor> out;
  auto add = [&](std::string what, const std::vector<int64_t>& global, const sharding::ShardingSpec& spec,
                 ir::ScalarType dtype) {
    if (spec.placements.size() != static_cast<size_t>(p.mesh.numAxes()) ||
        !sharding::checkShardable(global, spec, p.mesh).isOk() || !sharding::isUneven(global, spec, p.mesh))
      return;
    UnevenTensor u{std::move(what), spec.str(), {}, 0};
    for (int64_t r = 0; r < p.mesh.numRanks(); ++r)
      u.perRank.push_back(sharding::localShape(global, spec, p.mesh, p.mesh.coords(r)));
    u.paddingBytes = sharding::paddingElements(global, spec, p.mesh) * ir::elementSize(dtype);
    out.push_back(std::move(u));
  };
  auto boundary = [&](const std::string& what, const BoundaryInfo& b) {
    if (!b.globalType.isStatic() || b.globalType.sizes.empty()) return;
    std::vector<int64_t> global;
    for (const auto& d : b.globalType.sizes) global.push_back(d.value());
    add(what, global, b.spec, b.globalType.dtype);
  };
  const auto& sig = p.graph.signature;
  for (size_t i = 0; i < sig.inputs.size() && i < p.inputs.size(); ++i)
    if (sig.inputs[i].value && sig.inputs[i].kind == ir::InputKind::UserInput)
      boundary("input %" + sig.inputs[i].value->name(), p.inputs[i]);
  for (size_t i = 0; i < sig.outputs.size() && i < p.outputs.size(); ++i)
    boundary("output " + serialize::printArgument(sig.outputs[i].arg), p.outputs[i]);
  for (const auto& w : p.weights) add("weight " + w.fqn, w.globalShape, w.spec, w.dtype);
  return out;
}

std::vector<std::pair<std::string, std::string>> stableProvenance(const Program& p) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : p.provenance) {
    if (std::find(kMachineKeys.begin(), kMachineKeys.end(), k) != kMachineKeys.end()) continue;
    out.emplace_back(k, stripPaths(v));
  }
  return out;
}

std::string inputDecl(const ir::InputSpec& in) {
  if (in.kind == ir::InputKind::ConstantInput) return in.name + " = " + serialize::printArgument(in.constant);
  const ir::Value* v = in.value;
  if (!v) return "none";
  std::string s = "%" + v->name() + ": ";
  switch (v->kind()) {
    case ir::ValueKind::Tensor:
      return s + v->type().str();
    case ir::ValueKind::SymInt:
      return s + "sym(" + v->symValue().str() + ")";
    case ir::ValueKind::SymFloat:
      return s + "symfloat";
    case ir::ValueKind::SymBool:
      return s + "symbool";
    case ir::ValueKind::Token:
      return s + "token";
    case ir::ValueKind::CustomObj:
      return s + "object";
  }
  return s;
}

std::string dumpProgram(const Program& p) {
  std::string s = header(p);
  s += boundaries(p, true);
  for (const auto& n : p.graph.graph.nodes()) {
    s += serialize::printNode(*n);
    if (p.pipeline && static_cast<size_t>(n->index()) < p.pipeline->places.size())
      s += "  @" + placeText(p.pipeline->places[static_cast<size_t>(n->index())]);
    s += "\n";
  }
  s += boundaries(p, false);
  s += weights(p);
  for (const auto& [kind, c] : summarizeCollectives(p))
    s += "collective " + kind + "  count " + std::to_string(c.count) + "  bytes/rank " +
         std::to_string(c.bytesPerRank) + "\n";
  return s;
}

}  // namespace spmd::program
