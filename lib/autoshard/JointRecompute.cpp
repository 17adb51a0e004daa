// Layout and recomputation chosen together (see JointRecompute.h).
#include "autoshard/JointRecompute.h"

#include <algorithm>

#include "autoshard/Fold.h"
#include "passes/LayoutCost.h"
#include "support/Log.h"
#include "support/Strings.h"

namespace spmd::autoshard {

std::optional<std::string> recomputeGlob(const ir::ExportedProgram& program) {
  const auto& outs = program.signature.outputs;
  if (std::none_of(outs.begin(), outs.end(),
                   [](const auto& o) { return o.kind == ir::OutputKind::LossOutput; }))
    return std::nullopt;
  std::optional<std::string> prefix = layerStackPrefix(program);
  if (!prefix) return std::nullopt;
  const std::string layer = *prefix + ".";
  for (const auto& n : program.graph.nodes())
    for (const ir::ModuleFrame& f : ir::moduleFrames(n->metadata().nnModuleStack))
      if (f.path.starts_with(layer)) return layer + "*";
  return std::nullopt;
}

schema::PlacementSchema withRecompute(const schema::PlacementSchema& s, const std::string& glob) {
  schema::PlacementSchema out = s;
  out.recompute = {schema::RecomputeRule{glob, schema::RecomputeMode::Auto, {}}};
  return out;
}

std::vector<JointCandidate> paretoFront(std::vector<JointCandidate> all) {
  std::stable_sort(all.begin(), all.end(), [](const JointCandidate& a, const JointCandidate& b) {
    const double x = a.seen.cost.stepSeconds(), y = b.seen.cost.stepSeconds();
    return x != y ? x < y : a.seen.cost.peakBytes < b.seen.cost.peakBytes;
  });
  std::vector<JointCandidate> front;
  for (JointCandidate& c : all)
    if (front.empty() || c.seen.cost.peakBytes < front.back().seen.cost.peakBytes)
      front.push_back(std::move(c));
  return front;
}

std::vector<JointCandidate> spreadOut(std::vector<JointCandidate> front, size_t k) {
  if (front.size() <= k) return front;
  std::vector<JointCandidate> out;
  for (size_t i = 0; i < k; ++i) out.push_back(std::move(front[i * (front.size() - 1) / (k - 1)]));
  return out;
}

RecomputePricer::RecomputePricer(SharedArchive archive, passes::CompileOptions options,
                                 const sharding::DeviceProfile& profile)
    : archive_(std::move(archive)), options_(std::move(options)), profile_(profile) {}

Expected<Evaluated> RecomputePricer::price(const std::string& name, const schema::PlacementSchema& s,
                                           int64_t plainPeak) {
  const std::string key = layoutKey(s);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    auto compiled = [&]() -> Expected<Evaluated> {
      SPMD_ASSIGN_OR_RETURN(const pt2::Archive* a, archive_());
      // compile() changes its archive (the optimizer's update, gathers): a copy.
      pt2::Archive copy = pt2::cloneArchive(*a);
      passes::CompileOptions options = options_;
      options.recomputeHints = {plainPeak, lastLevel_, lastSaved_};
      options.recomputeNotes = false;  // the final compile (the plan given) writes the note
      SPMD_ASSIGN_OR_RETURN(passes::CompileResult r, passes::compile(copy, s, options));
      Evaluated e{name,
                  s,
                  passes::modelLayout(r.program, profile_),
                  true,
                  std::nullopt,
                  r.recomputePlan,
                  r.recomputeChoice};
      e.fits = e.cost.peakBytes <= options_.memoryBudget.value_or(e.cost.peakBytes);
      if (e.fits && e.recomputePlan) {
        lastLevel_ = e.recomputePlan->level;
        lastSaved_ = plainPeak - e.cost.peakBytes;
      }
      logging::debug("auto: recompute priced ", name, ": peak ", e.cost.peakBytes, ", ", e.recomputeChoice);
      return e;
    };
    it = cache_.emplace(key, compiled()).first;
  }
  if (!it->second) return it->second.status();
  Evaluated e = *it->second;
  e.name = name;
  return e;
}

std::optional<Evaluated> RecomputePricer::priced(const std::string& name,
                                                 const schema::PlacementSchema& s) const {
  auto it = cache_.find(layoutKey(s));
  if (it == cache_.end() || !it->second) return std::nullopt;
  Evaluated e = *it->second;
  e.name = name;
  return e;
}

JointOutcome chooseJointly(const std::vector<JointCandidate>& order, const JointPrice& price, size_t limit) {
  JointOutcome out;
  auto take = [&](const JointCandidate& c) {
    Expected<Evaluated> e = price(c);
    if (!e) return;
    out.tried.push_back(*e);
    if (!e->fits) return;
    if (!out.best || betterLayout(*e, *out.best)) {
      if (out.best) out.second = out.best;
      out.best = *e;
      out.bestChoice = c.choice;
    } else if (!out.second || betterLayout(*e, *out.second)) {
      out.second = *e;
    }
  };
  size_t priced = 0;
  for (const JointCandidate& c : order) {
    if (out.best && (priced >= limit || c.seen.cost.stepSeconds() >= out.best->cost.stepSeconds())) break;
    take(c);
    ++priced;
    if (!out.best && priced >= limit) break;
  }
  if (!out.best && priced < order.size()) take(order.back());
  return out;
}

Status noJointFit(int64_t budget, const std::string& glob, const std::vector<Evaluated>& tried) {
  const Evaluated* leanest = nullptr;
  std::string list;
  for (const Evaluated& e : tried) {
    if (!leanest || e.cost.peakBytes < leanest->cost.peakBytes) leanest = &e;
    list += (list.empty() ? "" : ", ") + e.name + " " + withCommas(e.cost.peakBytes) + " B" +
            (e.plain ? " recomputed (" + withCommas(e.plain->peakBytes) + " B without)"
             : e.cost.paramBytes > budget
                 ? " (weights and optimizer states alone " + withCommas(e.cost.paramBytes) + " B)"
                 : "");
  }
  if (!leanest) return Status::error("--schema auto: no layout compiles for the memory budget");
  return Status::error("--schema auto: no layout fits the memory budget of " + withCommas(budget) +
                       " B/rank, even recomputing " + glob + ": the smallest peak found is " +
                       withCommas(leanest->cost.peakBytes) + " B/rank (" + leanest->name + "); tried " +
                       list + "; raise --memory-budget or use a larger mesh");
}

}  // namespace spmd::autoshard
