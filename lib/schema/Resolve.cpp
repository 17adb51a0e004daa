// Resolution of a placement schema against a program.
//
//   s.json: mesh [2, 4] (dp, tp), params [{"match": "fc1.*", "placements": {"tp": "S(0)"}}]
//   fc1.weight f32[256, 64] -> [R, S(0)];  fc2.weight -> [R, R] (unmatched)
//   "outputs": "replicate" -> addmm_1 [R, R]; grad.fc1.weight -> [R, S(0)]
//
// Steps: mesh, then every rule's placements on that mesh (axis names, list
// lengths), then matching (first rule wins, every rule must match something
// unless optional), then each winner is fitted to its tensor (dims
// normalized, ranges and divisibility checked).
#include "schema/Resolve.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "schema/Glob.h"
#include "schema/Targets.h"
#include "schema/TpPlan.h"
#include "sharding/SymbolicShard.h"
#include "support/Strings.h"

namespace spmd::schema {
namespace {

using detail::Target;
using detail::TargetKind;
using detail::Targets;
using sharding::Mesh;
using sharding::Placement;
using sharding::ShardingSpec;

std::string typeText(const Target& t) {
  if (t.value == nullptr) return "(a constant)";
  if (!t.value->isTensor()) return "(not a tensor)";
  return t.value->type().str();
}

/// "s.json: /params/0/placements/tpp: unknown mesh axis 'tpp' (...)".
Status unknownAxis(const std::string& where, const std::string& axis, const Mesh& mesh) {
  std::optional<std::string> near = closestWord(axis, mesh.axisNames());
  std::string hint = near ? "did you mean '" + elided(*near) + "'?; " : "";
  return Status::error(where + "/" + axis + ": unknown mesh axis '" + axis + "' (" + hint +
                       "mesh axes: " + joined(mesh.axisNames()) + ")");
}

/// The placements of rule `r` as a spec on `mesh` (dims as written).
Expected<ShardingSpec> ruleSpec(const PlacementSchema& s, const PlacementRule& r, const Mesh& mesh) {
  ShardingSpec spec = ShardingSpec::replicated(mesh.numAxes());
  std::string where = s.source + ": " + r.pointer + "/placements";
  if (r.positional) {
    if (static_cast<int64_t>(r.byPosition.size()) != mesh.numAxes())
      return Status::error(where + ": " + std::to_string(r.byPosition.size()) + " placement" +
                           (r.byPosition.size() == 1 ? "" : "s") + " given for the " +
                           std::to_string(mesh.numAxes()) + "-axis mesh " + mesh.str() +
                           "; give one per mesh axis, or an object keyed by axis name");
    spec.placements = r.byPosition;
    return spec;
  }
  for (const auto& [axis, placement] : r.byAxis) {
    int64_t index = mesh.axisIndex(axis);
    if (index < 0) return unknownAxis(where, axis, mesh);
    spec.placements[static_cast<size_t>(index)] = placement;
  }
  return spec;
}

/// Adds a note for each symbolic dim `spec` shards (checked at its hint).
void noteSymbolicShards(const std::string& origin, const Target& t, const ShardingSpec& spec,
                        const Mesh& mesh, std::vector<std::string>& notes) {
  const auto& sizes = t.value->type().sizes;
  std::set<int64_t> dims;
  for (const Placement& p : spec.placements)
    if (p.isShard()) dims.insert(p.dim);
  for (int64_t dim : dims) {
    const ir::Dim& d = sizes[static_cast<size_t>(dim)];
    if (d.isStatic()) continue;
    int64_t n = sharding::shardCount(spec, dim, mesh);
    std::string head = origin + ": " + t.what + ": dim " + std::to_string(dim) + " is symbolic (" + d.str() +
                       "); its trace-time size " + std::to_string(d.value());
    // The hint decides the program: one that divides compiles to s // n
    // (checked at run time), one that does not to torch.chunk sizes of s.
    notes.push_back(sharding::isEvenSymbolic(d, n)
                        ? head + " divides by " + std::to_string(n) + ": at run time it must divide by " +
                              std::to_string(n) + " too"
                        : head + " does not divide by " + std::to_string(n) +
                              ": split unevenly as torch.chunk does, each rank's size "
                              "computed from the symbol at run time");
  }
}

/// Normalizes `spec`'s shard dims for tensor `t` and checks that they exist
/// and that strided shards divide evenly (plain shards may split unevenly,
/// symbolic ones at their trace-time hint; with `even`, none may).
/// `origin` says who asked ("s.json: /params/0: rule 'x'").
Expected<ShardingSpec> fitSpec(const std::string& origin, ShardingSpec spec, const Target& t,
                               const Mesh& mesh, std::vector<std::string>& notes, bool even = false) {
  bool tensor = t.value != nullptr && t.value->isTensor();
  int64_t rank = tensor ? t.value->type().rank() : 0;
  bool shards = false;
  for (size_t a = 0; a < spec.placements.size(); ++a) {
    Placement& p = spec.placements[a];
    if (!p.isShard()) continue;
    shards = true;
    int64_t d = p.dim < 0 ? p.dim + rank : p.dim;
    if (d >= 0 && d < rank) {
      p.dim = d;
      continue;
    }
    std::string head = origin + " shards dim " + std::to_string(p.dim) + " of " + t.what + " " + typeText(t) +
                       " on mesh axis '" + mesh.axisNames()[a] + "'";
    if (rank == 0)
      return Status::error(head + ", which has no dims to shard; replicate it (R) or narrow the match");
    return Status::error(head + ", which has rank " + std::to_string(rank) + "; use a dim in [" +
                         std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] or narrow the match");
  }
  if (!shards) return spec;
  std::vector<int64_t> global;
  bool symbolic = false;
  for (const ir::Dim& d : t.value->type().sizes) {
    global.push_back(d.value());
    symbolic = symbolic || !d.isStatic();
  }
  // Plain shards split unevenly as torch.chunk does (symbolic dims too);
  // strided shards must divide (checkShardable). `even`: a where_divisible
  // rule, which applies only where all divide.
  Status fits = even ? sharding::checkEvenlyDivisible(global, spec, mesh) : Status::ok();
  if (fits.isOk()) fits = sharding::checkShardable(global, spec, mesh);
  for (const Placement& p : spec.placements) {  // symbolic strided shards: evenly (at the hint)
    if (!fits.isOk() || !p.isStrided() || t.value->type().sizes[static_cast<size_t>(p.dim)].isStatic())
      continue;
    ShardingSpec only = spec;
    for (Placement& q : only.placements)
      if (!q.isShard(p.dim)) q = Placement::replicate();
    fits = sharding::checkEvenlyDivisible(global, only, mesh);
    if (!fits.isOk())
      fits = Status::error(fits.message() + " (a strided shard of a symbolic dim must divide)");
  }
  if (!fits.isOk())
    return Status::error(origin + " on " + t.what + " " + typeText(t) +
                         (symbolic ? " (symbolic sizes checked at their trace-time hint)" : "") + ": " +
                         fits.message());
  noteSymbolicShards(origin, t, spec, mesh, notes);
  return spec;
}

/// For each target, the index of the first rule matching it (-1: none).
/// Error for a rule that matches nothing and is not optional.
Expected<std::vector<int>> matchRules(const PlacementSchema& s, const std::vector<PlacementRule>& rules,
                                      Targets& tg, TargetKind kind, const std::string& noun) {
  const std::vector<Target>& targets = tg.of(kind);
  std::vector<const std::vector<uint8_t>*> hits;
  hits.reserve(rules.size());
  for (const PlacementRule& rule : rules) hits.push_back(&tg.matches(kind, rule.match));
  std::vector<int> winner(targets.size(), -1);
  std::vector<bool> used(rules.size(), false);
  for (size_t t = 0; t < targets.size(); ++t) {
    for (size_t r = 0; r < rules.size(); ++r) {
      if (winner[t] >= 0 && used[r]) continue;  // decided, and the rule is known to be used
      if (((*hits[r])[t] & 1) == 0) continue;
      used[r] = true;
      if (winner[t] < 0) winner[t] = static_cast<int>(r);
    }
  }
  std::vector<std::string> names;
  names.reserve(targets.size());
  for (const Target& t : targets) names.push_back(t.names.front());
  for (size_t r = 0; r < rules.size(); ++r) {
    if (used[r] || rules[r].optional) continue;
    std::optional<std::string> near = suggestGlob(rules[r].match, names);
    return Status::error(
        s.source + ": " + rules[r].pointer + ": rule '" + elided(rules[r].match) + "' matches no " + noun +
        " (" + (near ? "did you mean '" + elided(*near) + "'?; " : "") + "add \"optional\": true to allow)");
  }
  return winner;
}

/// What the rules say of one target.
struct Ruled {
  /// nullopt: no rule matched, or a where_divisible rule did not fit.
  std::optional<ShardingSpec> spec;
  /// The winning rule (null: none).
  const PlacementRule* rule = nullptr;
};

/// Specs for `targets` from `rules`.
Expected<std::vector<Ruled>> applyRules(const PlacementSchema& s, const std::vector<PlacementRule>& rules,
                                        Targets& tg, TargetKind kind, const std::string& noun,
                                        const Mesh& mesh, std::vector<std::string>& notes) {
  const std::vector<Target>& targets = tg.of(kind);
  std::vector<ShardingSpec> specs;
  std::vector<std::string> origins;
  specs.reserve(rules.size());
  origins.reserve(rules.size());
  for (const PlacementRule& r : rules) {
    SPMD_ASSIGN_OR_RETURN(ShardingSpec spec, ruleSpec(s, r, mesh));
    specs.push_back(std::move(spec));
    origins.push_back(s.source + ": " + r.pointer + ": rule '" + elided(r.match) + "'");
  }
  SPMD_ASSIGN_OR_RETURN(std::vector<int> winner, matchRules(s, rules, tg, kind, noun));
  std::vector<Ruled> out(targets.size());
  for (size_t t = 0; t < targets.size(); ++t) {
    if (winner[t] < 0) continue;
    const PlacementRule& r = rules[static_cast<size_t>(winner[t])];
    const auto w = static_cast<size_t>(winner[t]);
    Expected<ShardingSpec> fit = fitSpec(origins[w], specs[w], targets[t], mesh, notes, r.whereDivisible);
    if (!fit && r.whereDivisible) {
      notes.push_back(fit.status().message() + "; where_divisible: left as it was");
      continue;
    }
    if (!fit) return fit.status();
    out[t] = {std::move(*fit), &r};
  }
  return out;
}

/// The layout parameter `stored` is computed with when rule `r` gathers it:
/// R on the gathered axes; nullopt when nothing is gathered.
Expected<std::optional<ShardingSpec>> gatheredSpec(const PlacementSchema& s, const PlacementRule& r,
                                                   const ShardingSpec& stored, const Mesh& mesh) {
  if (!r.gather) return std::optional<ShardingSpec>();
  ShardingSpec out = stored;
  for (size_t a = 0; a < out.placements.size(); ++a) {
    const std::string& name = mesh.axisNames()[a];
    bool named = r.gatherAxes.empty() ||
                 std::find(r.gatherAxes.begin(), r.gatherAxes.end(), name) != r.gatherAxes.end();
    if (named && out.placements[a].isShard()) out.placements[a] = Placement::replicate();
  }
  for (const std::string& axis : r.gatherAxes)
    if (mesh.axisIndex(axis) < 0) return unknownAxis(s.source + ": " + r.pointer + "/gather", axis, mesh);
  if (out == stored) return std::optional<ShardingSpec>();
  return std::optional<ShardingSpec>(out);
}

/// S(0) on every mesh axis.
ShardingSpec shardAll(const Mesh& mesh) {
  return {std::vector<Placement>(static_cast<size_t>(mesh.numAxes()), Placement::shard(0))};
}

/// fsdp and hsdp: each parameter whose dim 0 divides is stored S(0) on the
/// sharding axes (all axes; hsdp: the last) and gathered before use.
void shardParameters(const PlacementSchema& s, Targets& tg, ResolvedPlacements& r) {
  const ir::ExportedProgram& p = tg.program();
  ShardingSpec stored = ShardingSpec::replicated(r.mesh.numAxes());
  int64_t ranks = 1;
  for (int64_t a = s.preset == Preset::Hsdp ? 1 : 0; a < r.mesh.numAxes(); ++a) {
    stored.placements[static_cast<size_t>(a)] = Placement::shard(0);
    ranks *= r.mesh.size(a);
  }
  for (const Target& t : tg.of(TargetKind::Params)) {
    if (p.signature.inputs[t.index].kind != ir::InputKind::Parameter || !t.value->isTensor()) continue;
    const ir::TensorType& type = t.value->type();
    if (type.rank() > 0 && type.sizes[0].isStatic() && type.sizes[0].value() % ranks == 0) {
      r.inputs[t.index] = stored;
      if (ranks > 1) r.gathered[t.index] = ShardingSpec::replicated(r.mesh.numAxes());
      continue;
    }
    std::string why = type.rank() == 0 ? "it is a scalar"
                                       : "dim 0 (" + type.sizes[0].str() + ") does not divide by the " +
                                             std::to_string(ranks) + " ranks";
    r.notes.push_back(s.source + ": " + t.what + " " + type.str() + " stays replicated: " + why);
  }
}

/// Warns when tied graph inputs (one tensor under two FQNs) get different
/// layouts: each is stored and laid out on its own, and a train step
/// updates each on its own.
void warnTiedMismatch(const ir::ExportedProgram& p, const std::vector<Target>& params,
                      ResolvedPlacements& r) {
  std::map<std::string, const Target*> byName;
  for (const Target& t : params) byName[t.names.front()] = &t;
  for (const Target& t : params) {
    auto it = p.tiedNames.find(t.names.front());
    if (it == p.tiedNames.end()) continue;
    for (const std::string& other : it->second) {
      auto o = byName.find(other);
      if (o == byName.end() || other < t.names.front()) continue;
      const ShardingSpec& a = r.inputs[t.index];
      const ShardingSpec& b = r.inputs[o->second->index];
      if (a == b) continue;
      bool aUsed = !t.value->users().empty(), bUsed = !o->second->value->users().empty();
      if (aUsed != bUsed) {
        const Target& unused = aUsed ? *o->second : t;
        const Target& used = aUsed ? t : *o->second;
        r.warnings.push_back(unused.what + " is laid out " + r.inputs[unused.index].str() +
                             " but the program never reads it: it reads that tensor (tied) as " + used.what +
                             ", laid out " + r.inputs[used.index].str() + "; place " + used.what +
                             " instead");
        continue;
      }
      r.warnings.push_back(t.what + " and " + o->second->what + " are one tensor (tied) but are laid out " +
                           a.str() + " and " + b.str() +
                           ": each is stored and updated on its own; give both the same placements");
    }
  }
}

/// Specs from a preset (dp, fsdp, hsdp).
Status applyPreset(const PlacementSchema& s, Targets& tg, ResolvedPlacements& r) {
  if (s.preset == Preset::Hsdp && r.mesh.numAxes() != 2)
    return Status::error(s.source +
                         ": hsdp needs a 2-D mesh (replicate x shard), e.g. --mesh 2x4; the mesh is " +
                         r.mesh.str());
  for (const Target& t : tg.of(TargetKind::Inputs)) {
    if (t.value == nullptr || !t.value->isTensor()) continue;
    if (t.value->type().rank() == 0) {
      r.notes.push_back(s.source + ": " + t.what + " " + typeText(t) + " is a scalar: replicated");
      continue;
    }
    // S(0) over every axis; else over the leading axes it divides by; else
    // (a batch no axis divides; a symbolic one at its trace-time size)
    // unevenly over every axis, as torch.chunk splits it.
    ShardingSpec all = shardAll(r.mesh), spec = all;
    std::vector<int64_t> hint;
    for (const ir::Dim& d : t.value->type().sizes) hint.push_back(d.value());
    auto even = [&](const ShardingSpec& sp) {
      return sharding::checkEvenlyDivisible(hint, sp, r.mesh).isOk();
    };
    for (int64_t a = r.mesh.numAxes() - 1; !even(spec) && a > 0; --a)
      spec.placements[static_cast<size_t>(a)] = Placement::replicate();
    bool uneven = !even(spec);
    if (uneven) spec = all;
    Expected<ShardingSpec> fit = fitSpec(s.source, spec, t, r.mesh, r.notes);
    if (!fit) return fit.status();
    if (uneven) {
      std::string sizes;
      for (int64_t k = 0; k < r.mesh.numRanks(); ++k)
        sizes +=
            (k ? ", " : "") + std::to_string(sharding::localShape(hint, spec, r.mesh, r.mesh.coords(k))[0]);
      r.notes.push_back(s.source + ": " + t.what + " " + typeText(t) + ": dim 0 does not divide over the " +
                        std::to_string(r.mesh.numRanks()) + " ranks; split unevenly as torch.chunk does (" +
                        sizes + ")");
    } else if (!(spec == all)) {
      r.notes.push_back(s.source + ": " + t.what + " " + typeText(t) + ": dim 0 does not divide over all " +
                        std::to_string(r.mesh.numRanks()) + " ranks; split " + spec.str() + " instead");
    }
    r.inputs[t.index] = *fit;
  }
  if (s.preset == Preset::Fsdp || s.preset == Preset::Hsdp) shardParameters(s, tg, r);
  return Status::ok();
}

/// The mesh axis a tp_plan shards over.
Expected<int64_t> tpAxisOf(const PlacementSchema& s, const Mesh& mesh) {
  if (!s.tpAxis.empty()) {
    int64_t a = mesh.axisIndex(s.tpAxis);
    if (a < 0) return unknownAxis(s.source + ": /tp_axis", s.tpAxis, mesh);
    return a;
  }
  if (int64_t a = mesh.axisIndex("tp"); a >= 0) return a;
  if (mesh.numAxes() == 1) return int64_t{0};
  return Status::error(s.source + ": /tp_plan: the mesh " + mesh.str() +
                       " has no axis named tp; name one in \"mesh\": {\"axes\": [...]} or give \"tp_axis\"");
}

/// The parameters a tp_plan's modules hold get its placements on the tp
/// axis, over the preset's (an fsdp gather keeps the tp shard).
Status applyTpPlan(const PlacementSchema& s, Targets& tg, ResolvedPlacements& r) {
  if (s.tpPlan.empty()) return Status::ok();
  const ir::ExportedProgram& p = tg.program();
  SPMD_ASSIGN_OR_RETURN(int64_t axis, tpAxisOf(s, r.mesh));
  std::map<std::string, std::string> types = moduleTypes(p);
  bool matched = false;
  for (const Target& t : tg.of(TargetKind::Params)) {
    if (p.signature.inputs[t.index].kind != ir::InputKind::Parameter || !t.value->isTensor()) continue;
    const std::string& fqn = t.names.front();
    size_t dot = fqn.rfind('.');
    if (dot == std::string::npos) continue;
    std::string module = fqn.substr(0, dot);
    auto entry = tpPlanEntry(s.tpPlan, module);
    if (!entry) continue;
    matched = true;
    auto type = types.find(module);
    Placement pl = tpPlacement(entry->second, type == types.end() ? "" : type->second, fqn.substr(dot + 1),
                               t.value->type().rank());
    if (pl.isReplicate()) continue;
    ShardingSpec spec = r.inputs[t.index];
    spec.placements[static_cast<size_t>(axis)] = pl;
    std::string origin = s.source + ": /tp_plan/" + entry->first + " ('" + entry->second + "')";
    SPMD_ASSIGN_OR_RETURN(r.inputs[t.index], fitSpec(origin, spec, t, r.mesh, r.notes));
    if (r.gathered[t.index])
      r.gathered[t.index]->placements[static_cast<size_t>(axis)] =
          r.inputs[t.index].placements[static_cast<size_t>(axis)];
  }
  if (!matched)
    return Status::error(s.source + ": /tp_plan: no module of the program matches any of its " +
                         std::to_string(s.tpPlan.size()) +
                         " globs (they match module paths such as model.layers.0.self_attn.q_proj, under any "
                         "prefix)");
  return Status::ok();
}

/// The rules of `s` over parameters and user inputs, over what the preset
/// chose (rules win).
Status applyTensorRules(const PlacementSchema& s, Targets& tg, ResolvedPlacements& r) {
  const ir::ExportedProgram& p = tg.program();
  const std::vector<Target>&params = tg.of(TargetKind::Params), &inputs = tg.of(TargetKind::Inputs);
  SPMD_ASSIGN_OR_RETURN(auto paramSpecs, applyRules(s, s.params, tg, TargetKind::Params,
                                                    "parameter or buffer", r.mesh, r.notes));
  SPMD_ASSIGN_OR_RETURN(auto inputSpecs,
                        applyRules(s, s.inputs, tg, TargetKind::Inputs, "user input", r.mesh, r.notes));
  for (size_t t = 0; t < params.size(); ++t) {
    if (!paramSpecs[t].spec) continue;
    size_t i = params[t].index;
    const PlacementRule& rule = *paramSpecs[t].rule;
    if (rule.gather && p.signature.inputs[i].kind != ir::InputKind::Parameter)
      return Status::error(s.source + ": " + rule.pointer + "/gather: " + params[t].what +
                           " is not a parameter; gather applies to parameters only (narrow the match)");
    r.inputs[i] = *paramSpecs[t].spec;
    SPMD_ASSIGN_OR_RETURN(r.gathered[i], gatheredSpec(s, rule, r.inputs[i], r.mesh));
    if ((tg.matches(TargetKind::Params, rule.match)[t] & 2) == 0)
      r.notes.push_back(s.source + ": " + rule.pointer + ": rule '" + elided(rule.match) + "' applies to " +
                        params[t].what +
                        ", whose tied name it matches (one tensor, which torch.export "
                        "names once)");
  }
  warnTiedMismatch(p, params, r);
  for (size_t t = 0; t < inputs.size(); ++t) {
    if (!inputSpecs[t].spec) continue;
    if (inputSpecs[t].rule->gather)
      return Status::error(s.source + ": " + inputSpecs[t].rule->pointer +
                           "/gather: gather applies to parameters only, not to user inputs");
    r.inputs[inputs[t].index] = *inputSpecs[t].spec;
  }
  return Status::ok();
}

/// The spec output `o` inherits from its parameter, buffer or user input
/// (`byTarget`: input index by target, `byName`: user input index by name).
std::optional<ShardingSpec> followedSpec(const ir::OutputSpec& o,
                                         const std::unordered_map<std::string_view, size_t>& byTarget,
                                         const std::unordered_map<std::string_view, size_t>& byName,
                                         const ResolvedPlacements& r) {
  bool param = o.kind == ir::OutputKind::GradientToParameter || o.kind == ir::OutputKind::ParameterMutation ||
               o.kind == ir::OutputKind::BufferMutation;
  bool input = o.kind == ir::OutputKind::GradientToUserInput || o.kind == ir::OutputKind::UserInputMutation;
  if (!param && !input) return std::nullopt;
  const auto& index = param ? byTarget : byName;
  auto it = index.find(o.target);
  if (it == index.end()) return std::nullopt;
  return r.inputs[it->second];
}

Status resolveOutputs(const PlacementSchema& s, Targets& tg, ResolvedPlacements& r) {
  const ir::ExportedProgram& p = tg.program();
  const std::vector<Target>& targets = tg.of(TargetKind::Outputs);
  std::vector<std::optional<ShardingSpec>> ruled(targets.size());
  if (s.outputPolicy == OutputPolicy::Rules) {
    SPMD_ASSIGN_OR_RETURN(auto outs,
                          applyRules(s, s.outputs, tg, TargetKind::Outputs, "output", r.mesh, r.notes));
    for (size_t i = 0; i < outs.size(); ++i) ruled[i] = outs[i].spec;
  }
  std::unordered_map<std::string_view, size_t> byTarget, byName;  // the first input of each wins
  for (size_t i = 0; i < p.signature.inputs.size(); ++i) {
    const ir::InputSpec& in = p.signature.inputs[i];
    if (in.kind != ir::InputKind::UserInput)
      byTarget.emplace(in.target, i);
    else
      byName.emplace(in.value != nullptr ? in.value->name() : in.name, i);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    std::optional<ShardingSpec> spec = ruled[i];
    if (!spec) spec = followedSpec(p.signature.outputs[i], byTarget, byName, r);
    if (!spec && s.outputPolicy != OutputPolicy::Any) spec = ShardingSpec::replicated(r.mesh.numAxes());
    r.outputs.push_back(std::move(spec));
  }
  return Status::ok();
}

}  // namespace

Expected<Mesh> resolveMesh(const PlacementSchema& s,
                           const std::optional<std::vector<int64_t>>& meshOverride) {
  std::vector<int64_t> shape = s.meshShape;
  if (meshOverride) {
    size_t named = s.meshAxes.size();
    if (named != 0 && meshOverride->size() != named) {
      std::vector<int64_t> twos(named, 2);
      return Status::error(s.source + ": /mesh/axes: --mesh " + Mesh::formatShape(*meshOverride) + " has " +
                           std::to_string(meshOverride->size()) + " axes but the schema names " +
                           std::to_string(named) + " (" + joined(s.meshAxes) + "); give a " +
                           std::to_string(named) + "-axis --mesh such as " + Mesh::formatShape(twos) +
                           ", or drop the axis names");
    }
    shape = *meshOverride;
  }
  if (shape.empty())
    return Status::error(s.source +
                         ": no mesh: give \"mesh\": {\"shape\": [...]} in the schema, or --mesh "
                         "(e.g. --mesh 8 or --mesh 2x4)");
  Expected<Mesh> mesh = Mesh::create(shape, s.meshAxes);
  if (!mesh) return mesh.status().withContext(s.source);
  return mesh;
}

std::vector<std::string> outputNames(const ir::ExportedProgram& p) {
  std::vector<std::string> names;
  size_t user = 0, loss = 0, token = 0;
  for (const ir::OutputSpec& o : p.signature.outputs) {
    switch (o.kind) {
      case ir::OutputKind::UserOutput:
        names.push_back("output." + std::to_string(user++));
        break;
      case ir::OutputKind::LossOutput:
        names.push_back(loss == 0 ? "loss" : "loss." + std::to_string(loss));
        ++loss;
        break;
      case ir::OutputKind::BufferMutation:
        names.push_back("buffer." + o.target);
        break;
      case ir::OutputKind::GradientToParameter:
        names.push_back("grad." + o.target);
        break;
      case ir::OutputKind::GradientToUserInput:
        names.push_back("grad_input." + o.target);
        break;
      case ir::OutputKind::UserInputMutation:
        names.push_back("input_mutation." + o.target);
        break;
      case ir::OutputKind::ParameterMutation:
        names.push_back("param_mutation." + o.target);
        break;
      case ir::OutputKind::Token:
        names.push_back("token." + std::to_string(token++));
        break;
    }
  }
  return names;
}

ResolveCache::ResolveCache(const ir::ExportedProgram& p) : targets_(std::make_unique<detail::Targets>(p)) {}
ResolveCache::~ResolveCache() = default;

Expected<ResolvedPlacements> resolvePlacements(const PlacementSchema& s, const ir::ExportedProgram& p,
                                               const std::optional<std::vector<int64_t>>& meshOverride,
                                               ResolveCache* cache) {
  std::optional<Targets> local;
  if (cache) SPMD_CHECK(&cache->targets_->program() == &p);  // a cache serves one program
  Targets& tg = cache ? *cache->targets_ : local.emplace(p);
  ResolvedPlacements r;
  SPMD_ASSIGN_OR_RETURN(r.mesh, resolveMesh(s, meshOverride));
  r.inputs.assign(p.signature.inputs.size(), ShardingSpec::replicated(r.mesh.numAxes()));
  r.gathered.assign(p.signature.inputs.size(), std::nullopt);
  if (s.preset != Preset::None) SPMD_RETURN_IF_ERROR(applyPreset(s, tg, r));
  SPMD_RETURN_IF_ERROR(applyTpPlan(s, tg, r));
  SPMD_RETURN_IF_ERROR(applyTensorRules(s, tg, r));
  SPMD_RETURN_IF_ERROR(resolveOutputs(s, tg, r));
  return r;
}

}  // namespace spmd::schema
