// "recompute": {"model.layers.*": "auto"}: the least recomputation whose
// estimated peak fits --memory-budget. The plans form one ladder, each step
// recomputing more than the one before:
//
//   level 0          nothing recomputed
//   level 1 .. L     the first k of the L modules selective (matmuls and
//                    attention kept, the cheap ops between them recomputed)
//   level L+1 .. 2L  every module selective, the first k - L of them full
//
// Each level is tried on a copy of the program (the plan and the passes
// after it, then estimateMemory); the peak falls as the level rises, and
// alike layers free alike bytes, so the lowest level that fits is found by
// interpolating the peak between a level over the budget and one within it
// (level 0, then L, then 2L if L does not fit), safeguarded by bisection
// (lowestFitting, Recompute.h): 4 to 6 tries on a 32-layer step, where a
// binary search took log2(2L) + 2. Given RecomputeHints (the joint search
// of --schema auto, layout after layout), level 0 is not tried again when
// its peak is known, and the bracket starts at the level a layout alike
// took and the one next to it: 2 to 4 tries. Collectives of activations
// (tensor-parallel all-reduces) in a recomputed module are saved on that
// ladder; unless told one way, a second search re-issues them instead
// (skipped when the level below the one taken stays over the budget even
// without the saved collectives' bytes), and that plan is taken when it
// fits at a lower level with a faster modeled step (fewer recomputed ops
// outweigh the all-reduces run again), or when only it fits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "passes/Recompute.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

/// What a selective level keeps: the matmuls and fused attention, whose
/// recomputation costs most (torchtitan's op-level selective policy). Not
/// bmm: in eager attention it makes the [seq, seq] scores, the largest
/// activations, which are cheap to recompute.
const std::vector<std::string>& selectiveSaves() {
  static const std::vector<std::string> kSaves = {"aten.mm", "aten.addmm", "aten._scaled_dot_product_*",
                                                  "aten.convolution"};
  return kSaves;
}

/// A glob matching exactly `path` (Glob.h's escapes).
std::string literalGlob(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

/// The rules of `level`: one per auto module (they come first: for the
/// same module a rule of equal length found first wins), then the others.
std::vector<schema::RecomputeRule> levelRules(const std::vector<schema::RecomputeRule>& rules,
                                              const std::vector<std::string>& modules, size_t level) {
  std::vector<schema::RecomputeRule> out;
  const size_t n = modules.size();
  for (size_t i = 0; i < n; ++i) {
    schema::RecomputeRule r{literalGlob(modules[i]), schema::RecomputeMode::None, {}};
    if (level > n && i < level - n) {
      r.mode = schema::RecomputeMode::Full;
    } else if (i < level) {
      r.mode = schema::RecomputeMode::Selective;
      r.save = selectiveSaves();
    }
    out.push_back(std::move(r));
  }
  for (const schema::RecomputeRule& r : rules)
    if (r.mode != schema::RecomputeMode::Auto) out.push_back(r);
  return out;
}

std::string describe(size_t level, size_t n) {
  const size_t full = level > n ? level - n : 0;
  const size_t selective = std::min(level, n) - full;
  return std::to_string(selective) + " of " + std::to_string(n) + " modules selective, " +
         std::to_string(full) + " full";
}

std::string microseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g us", seconds * 1e6);
  return buf;
}

}  // namespace

Expected<std::pair<PlanRung, PlanRung>> lowestFitting(const std::function<Expected<PlanCost>(size_t)>& costOf,
                                                      PlanRung over, PlanRung fits, int64_t budget) {
  int sameEnd = 0;
  bool lastFit = false;
  while (fits.level - over.level > 1) {
    const size_t span = fits.level - over.level;
    size_t next = over.level + span / 2;
    const double drop = static_cast<double>(over.cost.peakBytes - fits.cost.peakBytes);
    if (sameEnd < 2 && drop > 0) {
      const double t = static_cast<double>(over.cost.peakBytes - budget) / drop;
      next = over.level + static_cast<size_t>(std::ceil(t * static_cast<double>(span)));
      next = std::clamp(next, over.level + 1, fits.level - 1);
    }
    SPMD_ASSIGN_OR_RETURN(PlanCost c, costOf(next));
    const bool fit = c.peakBytes <= budget;
    sameEnd = fit == lastFit ? sameEnd + 1 : 1;
    lastFit = fit;
    (fit ? fits : over) = PlanRung{next, c};
  }
  return std::make_pair(fits, over);
}

namespace {

/// The level to try first from `hints`: the one freeing the bytes over
/// `budget` at the bytes per level the layout alike freed (rounded up,
/// within 1..2n), else the level it took.
std::optional<size_t> hintedLevel(const RecomputeHints& hints, int64_t budget, size_t n) {
  if (!hints.level || *hints.level == 0 || !hints.savedAtLevel || *hints.savedAtLevel <= 0 ||
      !hints.peakWithout || *hints.peakWithout <= budget)
    return hints.level;
  const double perLevel = static_cast<double>(*hints.savedAtLevel) / static_cast<double>(*hints.level);
  const double need = std::ceil(static_cast<double>(*hints.peakWithout - budget) / perLevel);
  return static_cast<size_t>(std::clamp(need, 1.0, static_cast<double>(2 * n)));
}

/// The bracket lowestFitting starts from: a level over `budget` and, when
/// one fits, a level within it; `most` gets the top level's cost when no
/// level fits (it was tried). From `hints.level` (and the level next to it)
/// when given (hintedLevel), then every module selective (n), then every module full
/// (2n, only when n does not fit).
Expected<std::pair<PlanRung, std::optional<PlanRung>>> bracket(
    const std::function<Expected<PlanCost>(size_t)>& costOf, PlanRung over, size_t n, int64_t budget,
    const RecomputeHints& hints, PlanCost& most) {
  std::optional<PlanRung> fits;
  auto tryLevel = [&](size_t level) -> Status {
    SPMD_ASSIGN_OR_RETURN(PlanCost c, costOf(level));
    if (c.peakBytes <= budget)
      fits = PlanRung{level, c};
    else
      over = PlanRung{level, c};
    if (level == 2 * n) most = c;
    return Status::ok();
  };
  const std::optional<size_t> first = hintedLevel(hints, budget, n);
  if (first && *first > over.level && *first <= 2 * n) {
    SPMD_RETURN_IF_ERROR(tryLevel(*first));
    const size_t next = fits ? fits->level - 1 : over.level + 1;
    if (next > over.level && (!fits || next < fits->level) && next <= 2 * n)
      SPMD_RETURN_IF_ERROR(tryLevel(next));
  }
  if (!fits && over.level < n) SPMD_RETURN_IF_ERROR(tryLevel(n));
  if (!fits && over.level < 2 * n) SPMD_RETURN_IF_ERROR(tryLevel(2 * n));
  return std::make_pair(over, fits);
}

}  // namespace

Expected<RecomputePlan> chooseRecompute(const program::Program& program,
                                        const std::vector<schema::RecomputeRule>& rules, int64_t budget,
                                        std::optional<RecomputeCollectives> collectives,
                                        const PlanPeak& peakOf, std::string& choice, bool leanestWhenNoFit,
                                        const RecomputeHints& hints) {
  SPMD_ASSIGN_OR_RETURN(std::vector<RecomputeRegion> regions, recomputeRegions(program, rules));
  std::vector<std::string> modules;
  for (const RecomputeRegion& r : regions)
    if (r.rule->mode == schema::RecomputeMode::Auto) modules.push_back(r.path);
  const size_t n = modules.size(), top = 2 * n;
  using RC = RecomputeCollectives;
  auto costAs = [&](RC how) {
    return [&, how](size_t level) { return peakOf({levelRules(rules, modules, level), how, level}); };
  };
  const RC first = collectives.value_or(RC::Save);  // the way tried first: saving adds no time
  // Level 0 recomputes nothing (and reads no collective): the peak known.
  PlanCost none{hints.peakWithout.value_or(0), 0, 0, 0};
  if (!hints.peakWithout || *hints.peakWithout <= budget) {
    SPMD_ASSIGN_OR_RETURN(none, costAs(first)(0));
  }
  auto chose = [&](const PlanRung& r, RC how, const std::string& what) {
    choice = "auto: " + describe(r.level, n) +
             (how == RC::Reissue ? ", collectives of activations re-issued" : "") + ": estimated peak " +
             withCommas(r.cost.peakBytes) + " B/rank " + what + " --memory-budget " + withCommas(budget) +
             " (" + withCommas(none.peakBytes) + " B/rank without recomputation); modeled step " +
             microseconds(r.cost.stepSeconds);
    return RecomputePlan{levelRules(rules, modules, r.level), how, r.level};
  };
  if (none.peakBytes <= budget) return chose({0, none}, first, "within");
  PlanCost most;
  SPMD_ASSIGN_OR_RETURN(auto ends, bracket(costAs(first), {0, none}, n, budget, hints, most));
  auto [over, fits] = ends;
  std::optional<PlanRung> taken;
  RC how = first, leanest = first;
  if (fits) {
    SPMD_ASSIGN_OR_RETURN(auto found, lowestFitting(costAs(first), over, *fits, budget));
    taken = found.first;
    over = found.second;
  }
  // Re-issuing frees at most the saved collectives' bytes: hopeless when the
  // level below the one taken stays over the budget without them.
  const bool hopeless =
      taken && over.cost.collectiveBytes >= 0 && over.cost.peakBytes - over.cost.collectiveBytes > budget;
  if (!collectives && !hopeless && (taken ? taken->cost : most).activationCollectives != 0) {
    // Re-issuing lowers each level's peak: a lower level may fit that way.
    PlanRung hi{top, {}};
    if (taken) hi.level = taken->level;
    SPMD_ASSIGN_OR_RETURN(hi.cost, costAs(RC::Reissue)(hi.level));
    if (hi.cost.peakBytes <= budget) {
      SPMD_ASSIGN_OR_RETURN(auto found, lowestFitting(costAs(RC::Reissue), {0, none}, hi, budget));
      const PlanRung& re = found.first;
      if (!taken || (re.level < taken->level && re.cost.stepSeconds < taken->cost.stepSeconds)) {
        taken = re;
        how = RC::Reissue;
      }
    }
    if (!taken && hi.cost.peakBytes < most.peakBytes) {
      most = hi.cost;
      leanest = RC::Reissue;
    }
  }
  if (taken) return chose(*taken, how, "within");
  if (leanestWhenNoFit) return chose({top, most}, leanest, "(the leanest plan) over");
  return Status::error("recompute: no plan fits --memory-budget " + withCommas(budget) +
                       " B/rank: the smallest estimated peak is " + withCommas(most.peakBytes) +
                       " B/rank, with " + describe(top, n) + " (without recomputation " +
                       withCommas(none.peakBytes) + " B/rank); give a larger budget or shard more");
}

}  // namespace spmd::passes
