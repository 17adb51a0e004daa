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
// after it, then estimateMemory); the peak falls as the level rises, so a binary search finds the
// lowest level that fits in about log2(2L) + 2 tries.
#include <algorithm>

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

}  // namespace

Expected<std::vector<schema::RecomputeRule>> chooseRecompute(const program::Program& program,
                                                             const std::vector<schema::RecomputeRule>& rules,
                                                             int64_t budget, const PlanPeak& peakOf,
                                                             std::string& choice) {
  SPMD_ASSIGN_OR_RETURN(std::vector<RecomputeRegion> regions, recomputeRegions(program, rules));
  std::vector<std::string> modules;
  for (const RecomputeRegion& r : regions)
    if (r.rule->mode == schema::RecomputeMode::Auto) modules.push_back(r.path);
  const size_t top = 2 * modules.size();
  auto peak = [&](size_t level) { return peakOf(levelRules(rules, modules, level)); };
  SPMD_ASSIGN_OR_RETURN(int64_t none, peak(0));
  SPMD_ASSIGN_OR_RETURN(int64_t most, peak(top));
  if (most > budget)
    return Status::error("recompute: no plan fits --memory-budget " + withCommas(budget) +
                         " B/rank: the smallest estimated peak is " + withCommas(most) + " B/rank, with " +
                         describe(top, modules.size()) + " (without recomputation " + withCommas(none) +
                         " B/rank); give a larger budget or shard more");
  size_t lo = 1, hi = top;  // peak(hi) fits, peak(lo - 1) does not
  int64_t fits = most;
  if (none <= budget) {
    hi = 0;
    fits = none;
  }
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    SPMD_ASSIGN_OR_RETURN(int64_t p, peak(mid));
    if (p <= budget) {
      hi = mid;
      fits = p;
    } else {
      lo = mid + 1;
    }
  }
  choice = "auto: " + describe(hi, modules.size()) + ": estimated peak " + withCommas(fits) +
           " B/rank within --memory-budget " + withCommas(budget) + " (" + withCommas(none) +
           " B/rank without recomputation)";
  return levelRules(rules, modules, hi);
}

}  // namespace spmd::passes
