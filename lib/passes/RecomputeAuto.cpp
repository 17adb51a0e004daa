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
// after it, then estimateMemory); the peak falls as the level rises, so a
// binary search finds the lowest level that fits in about log2(2L) + 2
// tries. Collectives of activations (tensor-parallel all-reduces) in a
// recomputed module are saved on that ladder; unless told one way, a
// second search re-issues them instead, and that plan is taken when it
// fits at a lower level with a faster modeled step (fewer recomputed ops
// outweigh the all-reduces run again), or when only it fits.
#include <algorithm>
#include <cstdio>

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

/// The ladder of one way with collectives of activations: the lowest level
/// whose peak fits `budget`, found by binary search in [lo, hi] (the caller
/// knows hi fits), with its cost.
struct Rung {
  size_t level = 0;
  PlanCost cost;
};

Expected<Rung> lowestFitting(const std::function<Expected<PlanCost>(size_t)>& costOf, size_t lo, Rung hi,
                             int64_t budget) {
  while (lo < hi.level) {
    const size_t mid = lo + (hi.level - lo) / 2;
    SPMD_ASSIGN_OR_RETURN(PlanCost c, costOf(mid));
    if (c.peakBytes <= budget)
      hi = {mid, c};
    else
      lo = mid + 1;
  }
  return hi;
}

std::string microseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g us", seconds * 1e6);
  return buf;
}

}  // namespace

Expected<RecomputePlan> chooseRecompute(const program::Program& program,
                                        const std::vector<schema::RecomputeRule>& rules, int64_t budget,
                                        std::optional<RecomputeCollectives> collectives,
                                        const PlanPeak& peakOf, std::string& choice, bool leanestWhenNoFit) {
  SPMD_ASSIGN_OR_RETURN(std::vector<RecomputeRegion> regions, recomputeRegions(program, rules));
  std::vector<std::string> modules;
  for (const RecomputeRegion& r : regions)
    if (r.rule->mode == schema::RecomputeMode::Auto) modules.push_back(r.path);
  const size_t n = modules.size(), top = 2 * n;
  using RC = RecomputeCollectives;
  auto costAs = [&](RC how) {
    return [&, how](size_t level) { return peakOf({levelRules(rules, modules, level), how}); };
  };
  const RC first = collectives.value_or(RC::Save);  // the way tried first: saving adds no time
  SPMD_ASSIGN_OR_RETURN(PlanCost none, costAs(first)(0));
  auto chose = [&](const Rung& r, RC how, const std::string& what) {
    choice = "auto: " + describe(r.level, n) +
             (how == RC::Reissue ? ", collectives of activations re-issued" : "") + ": estimated peak " +
             withCommas(r.cost.peakBytes) + " B/rank " + what + " --memory-budget " + withCommas(budget) +
             " (" + withCommas(none.peakBytes) + " B/rank without recomputation); modeled step " +
             microseconds(r.cost.stepSeconds);
    return RecomputePlan{levelRules(rules, modules, r.level), how};
  };
  if (none.peakBytes <= budget) return chose({0, none}, first, "within");
  SPMD_ASSIGN_OR_RETURN(PlanCost most, costAs(first)(top));
  std::optional<Rung> taken;
  RC how = first, leanest = first;
  if (most.peakBytes <= budget) {
    SPMD_ASSIGN_OR_RETURN(taken, lowestFitting(costAs(first), 1, {top, most}, budget));
  }
  if (!collectives && most.activationCollectives != 0) {
    // Re-issuing lowers each level's peak: a lower level may fit that way.
    SPMD_ASSIGN_OR_RETURN(PlanCost most2, costAs(RC::Reissue)(top));
    if (most2.peakBytes <= budget) {
      Rung r{taken ? taken->level : top, most2};
      if (taken) {
        SPMD_ASSIGN_OR_RETURN(r.cost, costAs(RC::Reissue)(r.level));
      }
      SPMD_ASSIGN_OR_RETURN(Rung re, lowestFitting(costAs(RC::Reissue), 1, r, budget));
      if (!taken || (re.level < taken->level && re.cost.stepSeconds < taken->cost.stepSeconds)) {
        taken = re;
        how = RC::Reissue;
      }
    }
    if (most2.peakBytes < most.peakBytes) {
      most = most2;
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
