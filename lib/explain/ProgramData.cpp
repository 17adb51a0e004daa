// One program's page data: summary, modules, weights, ops, collectives and
// communication (memory: MemoryData.cpp). Every list is in program or
// sorted order, every number an integer, so the JSON is byte-stable.
#include <algorithm>
#include <map>

#include "explain/Internal.h"
#include "ir/Collectives.h"
#include "passes/Report.h"
#include "program/Dump.h"

namespace spmd::explain::detail {
namespace {

Json shapeJson(const std::vector<int64_t>& shape) {
  Json a = Json::array();
  for (int64_t d : shape) a.push_back(d);
  return a;
}

Json specJson(const sharding::ShardingSpec& spec) {
  Json a = Json::array();
  for (const auto& pl : spec.placements) a.push_back(pl.str());
  return a;
}

std::string weightKind(const std::string& fqn, const std::map<std::string, ir::InputKind>& kinds) {
  if (fqn.rfind(passes::kOptimizerPrefix, 0) == 0) return "optimizer_state";
  auto it = kinds.find(fqn);
  if (it == kinds.end()) return "constant";
  return it->second == ir::InputKind::Parameter ? "parameter"
         : it->second == ir::InputKind::Buffer  ? "buffer"
                                                : "constant";
}

// Local shape per rank, only when ranks differ (an uneven split).
Json rankShapes(const program::WeightEntry& w, const sharding::Mesh& mesh) {
  if (sharding::checkEvenlyDivisible(w.globalShape, w.spec, mesh).isOk()) return nullptr;
  Json a = Json::array();
  for (int64_t r = 0; r < mesh.numRanks(); ++r)
    a.push_back(shapeJson(sharding::localShape(w.globalShape, w.spec, mesh, mesh.coords(r))));
  return a;
}

Json weightsJson(const program::Program& p, const ModuleMap& m) {
  std::map<std::string, ir::InputKind> kinds;
  for (const auto& in : p.graph.signature.inputs)
    if (!in.target.empty()) kinds[in.target] = in.kind;
  Json out = Json::array();
  for (const auto& w : p.weights) {
    Json e;
    e["fqn"] = w.fqn;
    e["kind"] = weightKind(w.fqn, kinds);
    e["module"] = m.indexOf(weightModule(w.fqn));
    e["dtype"] = std::string(ir::scalarTypeName(w.dtype));
    e["global"] = shapeJson(w.globalShape);
    e["local"] = shapeJson(w.localShape);
    e["spec"] = specJson(w.spec);
    e["bytes_per_rank"] = weightBytes(w);
    e["rank_shapes"] = rankShapes(w, p.mesh);
    out.push_back(e);
  }
  return out;
}

Json modulesJson(const ModuleMap& m) {
  Json out = Json::array();
  std::vector<int64_t> ops(m.paths.size(), 0);
  for (int mod : m.nodeModule) ++ops[static_cast<size_t>(mod)];
  for (size_t i = 0; i < m.paths.size(); ++i) {
    const std::string& path = m.paths[i];
    Json e;
    e["path"] = path;
    e["type"] = m.types[i];
    e["parent"] = path.empty()
                      ? -1
                      : m.indexOf(path.find('.') == std::string::npos ? "" : path.substr(0, path.rfind('.')));
    e["ops"] = ops[i];
    out.push_back(e);
  }
  return out;
}

// Ops in program order, as columns: name, index into "targets", module.
Json opsJson(const program::Program& p, const ModuleMap& m) {
  Json names = Json::array(), targets = Json::array(), target = Json::array(), module = Json::array();
  std::map<std::string, int> targetIndex;
  for (const auto& n : p.graph.graph.nodes()) {
    auto [it, added] = targetIndex.emplace(n->target(), static_cast<int>(targetIndex.size()));
    if (added) targets.push_back(n->target());
    names.push_back(n->name());
    target.push_back(it->second);
    module.push_back(m.nodeModule[static_cast<size_t>(n->index())]);
  }
  Json o;
  o["targets"] = targets;
  o["name"] = names;
  o["target"] = target;
  o["module"] = module;
  return o;
}

// The user's Python line for a collective: its record's, else the first
// stack-traced reader found past the wait and layout anchors it feeds.
std::string sourceLineOf(const ir::Node& coll, const program::CollectiveRecord* rec) {
  if (rec && !rec->sourceLine.empty()) return rec->sourceLine;
  std::vector<const ir::Node*> frontier = {&coll};
  for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
    std::vector<const ir::Node*> next;
    for (const ir::Node* n : frontier)
      for (const ir::Value* v : n->outputValues())
        for (const ir::Node* u : v->users()) {
          std::string line = ir::userSourceLine(u->metadata().stackTrace);
          if (!line.empty()) return line;
          next.push_back(u);
        }
    frontier = std::move(next);
  }
  return "";
}

Json collectiveJson(const program::Program& p, const ir::Node& n, const program::CollectiveRecord* rec,
                    const ModuleMap& m) {
  Json e;
  e["node"] = n.name();
  e["index"] = n.index();
  e["kind"] = n.target().substr(5);
  const ir::Argument* axis = n.input("axis");
  e["axis"] = rec ? rec->axis : (axis && !axis->strings.empty() ? axis->strings[0] : "");
  std::vector<ir::Value*> ins = n.inputValues();
  e["bytes"] = rec ? rec->bytesPerRank : (ins.empty() ? 0 : valueBytes(*ins[0]));
  int wait = -1;
  for (const ir::Value* v : n.outputValues())
    for (const ir::Node* u : v->users())
      if (u->target() == ir::kWait && wait < 0) wait = u->index();
  e["wait"] = wait;
  e["value"] = rec ? rec->value : (ins.empty() ? "" : ins[0]->name());
  e["from"] = rec ? rec->from : "";
  e["to"] = rec ? rec->to : "";
  e["consumer"] = rec ? rec->consumer : "";
  e["source_line"] = sourceLineOf(n, rec);
  e["module"] = m.nodeModule[static_cast<size_t>(n.index())];
  return e;
}

Json collectivesJson(const program::Program& p, const ModuleMap& m) {
  std::map<std::string, const program::CollectiveRecord*> records;
  for (const auto& c : p.collectives) records.emplace(c.node, &c);
  Json out = Json::array();
  for (const auto& n : p.graph.graph.nodes()) {
    if (!ir::isCommunicating(n->target())) continue;
    auto it = records.find(n->name());
    out.push_back(collectiveJson(p, *n, it == records.end() ? nullptr : it->second, m));
  }
  return out;
}

// Bytes and counts by axis, by kind, by (axis, kind); the top collectives.
Json communicationJson(const Json& colls) {
  std::map<std::string, std::pair<int64_t, int64_t>> byAxis, byKind, byBoth;
  for (const Json& c : colls) {
    auto add = [&](auto& m, const std::string& k) {
      m[k].first += 1;
      m[k].second += c["bytes"].get<int64_t>();
    };
    add(byAxis, c["axis"].get<std::string>());
    add(byKind, c["kind"].get<std::string>());
    add(byBoth, c["axis"].get<std::string>() + "\t" + c["kind"].get<std::string>());
  }
  auto rows = [](const auto& m, const char* key) {
    Json a = Json::array();
    for (const auto& [k, v] : m) a.push_back({{key, k}, {"count", v.first}, {"bytes", v.second}});
    return a;
  };
  Json both = Json::array();
  for (const auto& [k, v] : byBoth)
    both.push_back({{"axis", k.substr(0, k.find('\t'))},
                    {"kind", k.substr(k.find('\t') + 1)},
                    {"count", v.first},
                    {"bytes", v.second}});
  std::vector<size_t> order(colls.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return colls[a]["bytes"].get<int64_t>() > colls[b]["bytes"].get<int64_t>();
  });
  Json top = Json::array();
  for (size_t i = 0; i < order.size() && i < 20; ++i) top.push_back(order[i]);
  return {{"by_axis", rows(byAxis, "axis")},
          {"by_kind", rows(byKind, "kind")},
          {"by_axis_kind", both},
          {"top", top}};
}

}  // namespace

int64_t valueBytes(const ir::Value& v) {
  if (!v.isTensor()) return 0;
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

int64_t weightBytes(const program::WeightEntry& w) {
  int64_t n = ir::elementSize(w.dtype);
  for (int64_t d : w.localShape) n *= d;
  return n;
}

Json programData(const program::Program& p, const std::string& label) {
  ModuleMap m = buildModules(p);
  Json j;
  j["label"] = label;
  j["name"] = p.graph.name;
  Json mesh;
  mesh["shape"] = shapeJson(p.mesh.shape());
  mesh["axes"] = p.mesh.axisNames();
  mesh["ranks"] = p.mesh.numRanks();
  j["mesh"] = mesh;
  Json prov = Json::object();
  for (const auto& [k, v] : program::stableProvenance(p)) prov[k] = v;
  j["provenance"] = prov;
  Json colls = collectivesJson(p, m);
  passes::MemoryEstimate est = passes::estimateMemory(p);
  int64_t commBytes = 0;
  for (const Json& c : colls) commBytes += c["bytes"].get<int64_t>();
  j["summary"] = {{"ops", p.graph.graph.nodes().size()},
                  {"collectives", colls.size()},
                  {"bytes_per_rank", commBytes},
                  {"weight_bytes", est.paramBytes},
                  {"peak_bytes_estimate", est.peakBytes}};
  j["module_source"] = m.fromStack ? "nn_module_stack" : "weights";
  j["modules"] = modulesJson(m);
  j["weights"] = weightsJson(p, m);
  j["ops"] = opsJson(p, m);
  j["communication"] = communicationJson(colls);
  j["collectives"] = std::move(colls);
  j["memory"] = memoryData(p, m);
  return j;
}

}  // namespace spmd::explain::detail
