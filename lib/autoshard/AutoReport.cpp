// What --schema auto tells its user (see AutoShard.h): the choice, its
// modeled cost, and what the alternatives would cost.
//
//   auto: modeled step 0.512 ms (compute 0.300, comm 0.212), peak 1,645,204 B/rank of 2,000,000
//     chose *layers.*.wq.weight [S(0)], tokens [S(1)], ... (local search, 212 layouts in 1,234 ms)
//     dp would cost 1.31x: 14 more all_gather
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "autoshard/AutoShard.h"
#include "passes/Report.h"
#include "support/Strings.h"

namespace spmd::autoshard {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::map<std::string, int64_t> kindCounts(const passes::LayoutCost& c) {
  std::map<std::string, int64_t> m;
  for (const auto& a : c.axes)
    for (const auto& [k, n] : a.byKind) m[k] += n;
  return m;
}

// "1.31x: 14 more all_gather, 2 fewer all_reduce; peak 2.0x" against `chosen`.
std::string why(const Evaluated& alt, const Evaluated& chosen) {
  double ratio = alt.cost.stepSeconds() / std::max(chosen.cost.stepSeconds(), 1e-30);
  std::string out = alt.name + " would cost " + fixed(ratio, 2) + "x";
  std::string diffs;
  auto a = kindCounts(alt.cost), c = kindCounts(chosen.cost);
  for (const auto& [k, n] : a) c.emplace(k, 0);
  for (const auto& [k, n] : c) {
    int64_t d = (a.count(k) ? a[k] : 0) - n;
    if (d != 0)
      diffs +=
          (diffs.empty() ? "" : ", ") + std::to_string(std::llabs(d)) + (d > 0 ? " more " : " fewer ") + k;
  }
  double dc = (alt.cost.computeSeconds - chosen.cost.computeSeconds) * 1e3;
  out += ": " + (diffs.empty() ? std::string("same collectives") : diffs) + ", compute " +
         (dc >= 0 ? "+" : "") + fixed(dc, 3) + " ms, peak " + withCommas(alt.cost.peakBytes) + " B/rank";
  if (!alt.fits) out += " (over the budget)";
  return out;
}

}  // namespace

std::string autoReportJson(const AutoResult& r, const std::optional<int64_t>& budget) {
  nlohmann::ordered_json j;
  j["method"] = r.method;
  j["ilp"] = "not built: this build has no ILP solver (CBC); the search is exhaustive or local";
  j["groups"] = r.groups;
  j["evaluations"] = r.evaluations;
  j["quick_evaluations"] = r.quickEvaluations;
  j["quick_unalike"] = r.quickUnalike;
  j["build_ms"] = r.buildMs;
  j["solve_ms"] = r.solveMs;
  j["search_ms"] = r.searchMs;
  j["timed_out"] = r.timedOut;
  j["layouts_skipped_on_internal_errors"] = r.crashedLayouts;
  if (budget)
    j["memory_budget_bytes"] = *budget;
  else
    j["memory_budget_bytes"] = nullptr;
  j["chosen"] = nlohmann::ordered_json::parse(passes::costJson(r.chosen.cost, ""));
  j["chosen"].erase("device_profile");
  nlohmann::ordered_json choices = nlohmann::ordered_json::object();
  for (const auto& [match, option] : r.choices) choices[match] = option;
  j["choices"] = choices;
  nlohmann::ordered_json alts = nlohmann::ordered_json::array();
  for (const auto& a : r.alternatives) {
    nlohmann::ordered_json e;
    e["name"] = a.name;
    e["modeled_step_ms"] = a.cost.stepSeconds() * 1e3;
    e["ratio"] = a.cost.stepSeconds() / std::max(r.chosen.cost.stepSeconds(), 1e-30);
    e["peak_bytes_per_rank"] = a.cost.peakBytes;
    e["fits"] = a.fits;
    e["why"] = why(a, r.chosen);
    alts.push_back(e);
  }
  j["alternatives"] = alts;
  return j.dump();
}

std::vector<std::string> autoSummaryLines(const AutoResult& r, const std::optional<int64_t>& budget) {
  std::vector<std::string> out;
  const passes::LayoutCost& c = r.chosen.cost;
  std::string quick;
  if (r.quickEvaluations) {
    quick = std::to_string(r.quickEvaluations) + " layouts priced";
    if (r.quickUnalike) quick += " (" + std::to_string(r.quickUnalike) + " refused: layers plan unalike)";
    quick += ", ";
  }
  out.push_back("auto (" + r.method + ", " + quick + std::to_string(r.evaluations) + " compiled, " +
                std::to_string(r.groups) + " groups, " + fixed(r.buildMs + r.solveMs, 0) + " ms): peak " +
                withCommas(c.peakBytes) + " B/rank" +
                (budget ? " of a " + withCommas(*budget) + " B budget" : " (no budget)") +
                (r.timedOut ? "; time limit reached" : "") +
                (r.crashedLayouts ? "; " + std::to_string(r.crashedLayouts) +
                                        " layouts skipped: the compiler stopped on an internal error"
                                  : ""));
  std::string chose;
  for (const auto& [match, option] : r.choices)
    if (option != "[R]" && option.find_first_not_of("[R, ]") != std::string::npos)
      chose += (chose.empty() ? "" : ", ") + match + " " + option;
  out.push_back("  chose " + (chose.empty() ? std::string("everything replicated") : chose));
  for (const auto& a : r.alternatives) out.push_back("  " + why(a, r.chosen));
  return out;
}

}  // namespace spmd::autoshard
