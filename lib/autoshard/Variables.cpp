// Groups, options and schemas of auto-sharding (see Variables.h).
//
// Invariants: options[0] of every group is replicated (the option that is
// always valid); every other option divides each member's dims evenly; a
// group's glob matches exactly its members among the program's boundary
// names, else the group is written as one rule per member.
#include "autoshard/Variables.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "schema/Glob.h"

namespace spmd::autoshard {
namespace {

using sharding::Placement;
using sharding::ShardingSpec;

// "layers.3.wq.weight" -> "layers.*.wq.weight".
std::string layerKey(const std::string& fqn) {
  std::string out, part;
  auto flush = [&] {
    bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    out += digits ? "*" : part;
    part.clear();
  };
  for (char c : fqn) {
    if (c == '.') {
      flush();
      out += '.';
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

// Every joint layout of a tensor of `sizes` whose shards divide evenly.
std::vector<ShardingSpec> layouts(const std::vector<ir::Dim>& sizes, const sharding::Mesh& mesh) {
  std::vector<ShardingSpec> out{ShardingSpec::replicated(mesh.numAxes())};
  const int64_t rank = static_cast<int64_t>(sizes.size());
  for (int64_t a = 0; a < mesh.numAxes(); ++a) {
    std::vector<ShardingSpec> next;
    for (const ShardingSpec& s : out) {
      next.push_back(s);
      if (mesh.size(a) == 1) continue;
      for (int64_t d = 0; d < rank; ++d) {
        const ir::Dim& dim = sizes[static_cast<size_t>(d)];
        int64_t parts = mesh.size(a);
        for (int64_t b = 0; b < a; ++b)
          if (s.placements[static_cast<size_t>(b)].isShard(d)) parts *= mesh.size(b);
        if (!dim.isStatic() || dim.value() % parts != 0 || dim.value() < parts) continue;
        ShardingSpec t = s;
        t.placements[static_cast<size_t>(a)] = Placement::shard(d);
        next.push_back(t);
      }
    }
    out = std::move(next);
  }
  return out;
}

bool splitsOneDimTwice(const ShardingSpec& s) {
  for (size_t a = 0; a < s.placements.size(); ++a)
    for (size_t b = a + 1; b < s.placements.size(); ++b)
      if (s.placements[a].isShard() && s.placements[b].isShard() &&
          s.placements[a].dim == s.placements[b].dim)
        return true;
  return false;
}

}  // namespace

// Names the pins' rules match (parameters by FQN, user inputs by name).
std::vector<std::string> pinnedNames(const ir::ExportedProgram& p, const schema::PlacementSchema* pins) {
  std::vector<std::string> out;
  if (!pins) return out;
  for (const auto& in : p.signature.inputs) {
    bool user = in.kind == ir::InputKind::UserInput;
    const auto& rules = user ? pins->inputs : pins->params;
    std::string name = user ? in.name : in.target;
    for (const auto& r : rules)
      if (schema::globMatch(r.match, name)) {
        out.push_back(name);
        break;
      }
  }
  return out;
}

std::string Option::str() const { return spec.str() + (gathered ? " gathered" : ""); }

std::vector<Group> buildGroups(const ir::ExportedProgram& program, const sharding::Mesh& mesh,
                               const std::vector<std::string>& pinned, bool gather) {
  std::vector<Group> groups;
  std::map<std::string, size_t> byKey;
  std::vector<std::string> allNames;
  for (const auto& in : program.signature.inputs) {
    bool param = in.kind == ir::InputKind::Parameter;
    bool user = in.kind == ir::InputKind::UserInput;
    std::string name = param || !in.target.empty() ? in.target : in.name;
    allNames.push_back(name);
    if ((!param && !user) || !in.value || !in.value->isTensor()) continue;
    if (std::find(pinned.begin(), pinned.end(), name) != pinned.end()) continue;
    std::string key = param ? layerKey(name) : name;
    const std::vector<ir::Dim>& sizes = in.value->type().sizes;
    int64_t bytes = ir::elementSize(in.value->type().dtype);
    for (const auto& d : sizes) bytes *= d.value();
    auto it = byKey.find(key);
    if (it != byKey.end() &&
        groups[it->second].options.front().spec.placements.size() == static_cast<size_t>(mesh.numAxes())) {
      Group& g = groups[it->second];
      g.names.push_back(name);
      g.bytes += bytes;
      continue;
    }
    Group g{key, param, {name}, {}, bytes};
    for (const ShardingSpec& s : layouts(sizes, mesh)) {
      // One dim split over two axes can abort the expansion today
      // (Placement.cpp localChunks, e.g. llama's tokens [S(1), S(1)] with
      // tensor-parallel weights): parameters get it gathered only, inputs
      // not at all.
      if (!splitsOneDimTwice(s)) g.options.push_back({s, false});
      if (gather && param && !s.isReplicated()) g.options.push_back({s, true});
    }
    byKey[key] = groups.size();
    groups.push_back(std::move(g));
  }
  // A glob that also matches a tensor outside its group is written exactly.
  for (Group& g : groups) {
    size_t matched = 0;
    for (const auto& n : allNames) matched += schema::globMatch(g.match, n) ? 1 : 0;
    if (matched == g.names.size()) continue;
    if (g.names.size() == 1)
      g.match = g.names.front();
    else
      g.exact = true;
  }
  return groups;
}

schema::PlacementSchema schemaFor(const std::vector<Group>& groups, const std::vector<size_t>& choice,
                                  const sharding::Mesh& mesh, const schema::PlacementSchema* pins) {
  schema::PlacementSchema s;
  s.source = "auto";
  s.meshShape = mesh.shape();
  s.meshAxes = mesh.axisNames();
  if (pins) {
    s.params = pins->params;
    s.inputs = pins->inputs;
    s.opRules = pins->opRules;
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    const Option& o = g.options[choice[gi]];
    if (o.spec.isReplicated()) continue;  // unmatched tensors are replicated
    schema::PlacementRule r;
    for (int64_t a = 0; a < mesh.numAxes(); ++a) {
      const Placement& p = o.spec.placements[static_cast<size_t>(a)];
      if (!p.isReplicate()) r.byAxis.emplace_back(mesh.axisNames()[static_cast<size_t>(a)], p);
    }
    r.gather = o.gathered;
    for (const std::string& m : g.exact ? g.names : std::vector<std::string>{g.match}) {
      r.match = m;
      (g.isParam ? s.params : s.inputs).push_back(r);
    }
  }
  return s;
}

std::string schemaJson(const schema::PlacementSchema& s, const std::string& comment) {
  nlohmann::ordered_json j;
  if (!comment.empty()) j["comment"] = comment;
  j["version"] = 1;
  j["mesh"] = {{"shape", s.meshShape}, {"axes", s.meshAxes}};
  auto rules = [](const std::vector<schema::PlacementRule>& rs) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& r : rs) {
      nlohmann::ordered_json e;
      e["match"] = r.match;
      nlohmann::ordered_json pl = nlohmann::ordered_json::object();
      if (r.positional) {
        pl = nlohmann::ordered_json::array();
        for (const auto& p : r.byPosition) pl.push_back(p.str());
      } else {
        for (const auto& [axis, p] : r.byAxis) pl[axis] = p.str();
      }
      e["placements"] = pl;
      if (r.optional) e["optional"] = true;
      if (r.whereDivisible) e["where_divisible"] = true;
      if (r.gather && r.gatherAxes.empty()) e["gather"] = true;
      if (r.gather && !r.gatherAxes.empty()) e["gather"] = r.gatherAxes;
      list.push_back(e);
    }
    return list;
  };
  j["params"] = rules(s.params);
  j["inputs"] = rules(s.inputs);
  j["outputs"] = "replicate";
  if (!s.recompute.empty()) {
    nlohmann::ordered_json rc = nlohmann::ordered_json::object();
    for (const auto& r : s.recompute) {
      using M = schema::RecomputeMode;
      if (r.mode == M::Selective)
        rc[r.glob] = {{"save", r.save}};
      else
        rc[r.glob] = r.mode == M::Full ? "full" : r.mode == M::Auto ? "auto" : "none";
    }
    j["recompute"] = rc;
  }
  if (s.pipeline) {  // the pipeline search's (PipelineSearch.h), or the pins'
    const schema::PipelineRequest& pp = *s.pipeline;
    nlohmann::ordered_json pj;
    pj["axis"] = pp.axis;
    if (!pp.boundaries.empty())
      pj["stages"] = pp.boundaries;
    else if (pp.stageCount > 0)
      pj["stages"] = pp.stageCount;
    pj["schedule"] = pp.schedule;
    if (pp.virtualStages != 1) pj["virtual_stages"] = pp.virtualStages;
    pj["microbatches"] = pp.microbatches;
    j["pipeline"] = pj;
  }
  return j.dump(1) + "\n";
}

std::string layoutKey(schema::Preset preset, const std::string& json) {
  return std::to_string(static_cast<int>(preset)) + json;
}

std::string layoutKey(const schema::PlacementSchema& s) { return layoutKey(s.preset, schemaJson(s, "")); }

}  // namespace spmd::autoshard
