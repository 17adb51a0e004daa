// What `spmdc compile` tells its user: a JSON report (--report) and a short
// human summary printed after every compile.
//
//   mlp.pt2 -> mlp.spmd: mesh 8 (x), 5 ops, 1 collective (all_reduce 1: 8,192 B/rank)
//     all_reduce addmm_1 on x: [P(sum)] -> [R] for output user_output addmm_1 (export_models.py:37)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "sharding/DeviceProfile.h"

namespace spmd::passes {

/// Per-rank memory figures of a compiled program.
struct MemoryEstimate {
  int64_t paramBytes = 0;  ///< local parameter, buffer and constant bytes
  int64_t peakBytes = 0;   ///< weights + largest sum of live activations
  /// The node during which the peak is first reached; null without nodes.
  const ir::Node* peakNode = nullptr;
};

/// When one storage the program allocates is live, as the executor holds
/// it: from node `first` through node `last` (node indices). User inputs
/// live from 0 to the last node (the worker holds its batch); a node result
/// from its node to the last node that reads it or any view of it
/// (isViewOp: views allocate nothing), to the last node when a graph output
/// is it or a view of it, during its own node only when nothing reads it.
struct LiveRange {
  const ir::Value* value = nullptr;  ///< the storage's (non-view) value
  int first = 0;
  int last = 0;
  int64_t bytes = 0;  ///< local bytes (symbolic sizes at their hint)
  /// An op's own scratch buffer (a collective's staging, the fused CPU
  /// attention's per-thread blocks: AttentionMemory.h; `value` is the op's
  /// first result).
  bool staging = false;
};

/// The live range of every user input and non-view node result, user
/// inputs first, then results in program order. Weights are not included
/// (see MemoryEstimate::paramBytes). `threads`: the intra-op threads a
/// worker runs (kernels with per-thread scratch). Linear in the graph's size.
std::vector<LiveRange> liveRanges(const ir::ExportedProgram& program, int threads = 1);
/// liveRanges of a compiled program's (local) graph, each worker running
/// intraOpThreads(ranks) threads (AttentionMemory.h).
std::vector<LiveRange> liveRanges(const program::Program& program);

/// Per-rank memory as the runtime's worker holds it (runtime::RankMemory's
/// peak): weights (parameters, buffers, optimizer states, at rank 0's local
/// shapes) throughout, plus the largest sum of live ranges over the nodes.
/// A train step's new weights are outputs: they coexist with the old ones.
MemoryEstimate estimateMemory(const program::Program& program);

/// What a caller adds to a report: the device profile the cost is modeled
/// on, and sections of its own (auto-sharding's choice).
struct ReportExtras {
  /// Null: sharding::defaultDeviceProfile().
  const sharding::DeviceProfile* profile = nullptr;
  /// (key, JSON text) appended to the --report object in order.
  std::vector<std::pair<std::string, std::string>> sections;
  /// Lines (without newline) printed after the summary's cost line.
  std::vector<std::string> summaryLines;
  /// Set: the step's cost to report instead of modelLayout's (a pipelined
  /// program's, priced per pipeline rank by autoshard::pipelinedCost).
  std::optional<LayoutCost> cost;
};

/// The device profile the report prices with: `e.profile`, else the default.
const sharding::DeviceProfile& profileOf(const ReportExtras& e);

/// The "cost" object of a report: device_profile, modeled_step_ms,
/// compute_ms, comm_ms, comm_ms_per_axis, collectives_per_axis,
/// param_bytes_per_rank, peak_bytes_per_rank.
std::string costJson(const LayoutCost& cost, const std::string& profileName);

/// One line: "modeled step 1.234 ms = compute 1.000 + comm 0.234 (tp 0.234
/// ms, 4 collectives), peak 3,288,084 B/rank".
std::string costLine(const LayoutCost& cost);

/// The --report JSON: collective_counts, collectives, per_rank, cost,
/// timings_ms, notes, warnings, then the extras' sections.
std::string reportJson(const CompileResult& result, const ReportExtras& extras = {});

/// The short summary printed after a compile (with a "cost:" line).
std::string summaryText(const CompileResult& result, const std::string& input, const std::string& output,
                        const ReportExtras& extras = {});

}  // namespace spmd::passes
