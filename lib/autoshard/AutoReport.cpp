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
  if (alt.plain) out += " with recomputation (" + withCommas(alt.plain->peakBytes) + " B/rank without)";
  if (!alt.fits) out += " (over the budget)";
  return out;
}

// The joint search's figures of one layout: its peak and step with the
// recomputation chosen for the budget, and without.
nlohmann::ordered_json recomputeJson(const Evaluated& e) {
  nlohmann::ordered_json j;
  j["name"] = e.name;
  j["fits"] = e.fits;
  j["recomputed"] = e.plain.has_value();
  j["peak_bytes_per_rank"] = e.cost.peakBytes;
  j["modeled_step_ms"] = e.cost.stepSeconds() * 1e3;
  const passes::LayoutCost& plain = e.plain ? *e.plain : e.cost;
  j["peak_bytes_without_recompute"] = plain.peakBytes;
  j["memory_saved_bytes"] = plain.peakBytes - e.cost.peakBytes;
  j["extra_compute_ms"] = (e.cost.computeSeconds - plain.computeSeconds) * 1e3;
  j["extra_step_ms"] = (e.cost.stepSeconds() - plain.stepSeconds()) * 1e3;
  return j;
}

// One summary line: what the chosen layout recomputes for the budget.
std::string recomputeLine(const AutoResult& r) {
  const Evaluated& c = r.chosen;
  if (!c.plain)
    return "  recomputes nothing: the layout fits the budget as it is (" +
           std::to_string(r.recomputeTried.size()) + (r.recomputeTried.size() == 1 ? " layout" : " layouts") +
           " priced with " + r.recomputeGlob + " recomputation where needed)";
  const double extra = (c.cost.computeSeconds - c.plain->computeSeconds) * 1e3;
  return "  recomputes " + r.recomputeGlob + " for the budget (the compile note says what): peak " +
         withCommas(c.plain->peakBytes) + " -> " + withCommas(c.cost.peakBytes) + " B/rank (" +
         withCommas(c.plain->peakBytes - c.cost.peakBytes) + " B saved), compute +" + fixed(extra, 3) +
         " ms (+" + fixed(100 * extra / std::max(c.plain->computeSeconds * 1e3, 1e-30), 1) + "%)";
}

// What one pipeline tried (or the layout without one) came to: its
// microbatches, step, peak, bubble and sends, or why nothing compiled.
nlohmann::ordered_json pipelineJson(const PipelineTried& t) {
  nlohmann::ordered_json j;
  j["microbatches"] = t.microbatches;  // 0: no pipeline
  if (!t.error.empty()) {
    j["error"] = t.error;
    return j;
  }
  j["fits"] = t.best.fits;
  j["modeled_step_ms"] = t.best.cost.stepSeconds() * 1e3;
  j["peak_bytes_per_rank"] = t.best.cost.peakBytes;
  if (t.microbatches) {
    j["bubble"] = t.bubble;
    j["p2p_bytes_per_step"] = t.p2pBytesPerStep;
  }
  return j;
}

// One summary line per pipeline tried: why the chosen one won.
std::string pipelineLine(const PipelineTried& t, const Evaluated& chosen) {
  std::string what = t.microbatches ? "1f1b pipeline, " + std::to_string(t.microbatches) + " microbatches"
                                    : std::string("no pipeline");
  if (!t.error.empty()) return "  " + what + ": " + t.error;
  const bool won = (chosen.schema.pipeline ? chosen.schema.pipeline->microbatches : 0) == t.microbatches;
  std::string out = "  " + what + (won ? " (chosen)" : "") + ": modeled step " +
                    fixed(t.best.cost.stepSeconds() * 1e3, 3) + " ms, peak " +
                    withCommas(t.best.cost.peakBytes) + " B/rank" + (t.best.fits ? "" : " (over the budget)");
  if (t.microbatches)
    out += ", bubble " + fixed(100 * t.bubble, 1) + "%, " + withCommas(t.p2pBytesPerStep) +
           " B sent between stages per step";
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
  if (!r.recomputeGlob.empty()) {
    nlohmann::ordered_json rc;
    rc["glob"] = r.recomputeGlob;
    rc["chosen"] = recomputeJson(r.chosen);
    rc["tried"] = nlohmann::ordered_json::array();
    for (const Evaluated& e : r.recomputeTried) rc["tried"].push_back(recomputeJson(e));
    j["recompute"] = rc;
  }
  if (!r.pipelineTried.empty()) {
    j["pipeline"] = nlohmann::ordered_json::array();
    for (const PipelineTried& t : r.pipelineTried) j["pipeline"].push_back(pipelineJson(t));
  }
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
  if (!r.recomputeGlob.empty()) out.push_back(recomputeLine(r));
  for (const auto& a : r.alternatives) out.push_back("  " + why(a, r.chosen));
  for (const PipelineTried& t : r.pipelineTried) out.push_back(pipelineLine(t, r.chosen));
  return out;
}

}  // namespace spmd::autoshard
