// `spmdc explain`: a compiled program as one self-contained HTML page.
//
//   SPMD_ASSIGN_OR_RETURN(auto lp, program::readProgram("llama.spmd"));
//   SPMD_ASSIGN_OR_RETURN(std::string json, explainJson({{&lp.program(), "llama.spmd"}}));
//   SPMD_RETURN_IF_ERROR(writeFileAtomic("report.html", explainHtml(json)));
//
// The page's data is deterministic JSON (same programs, same bytes: no
// times, no absolute paths, stable order) embedded in a
// <script type="application/json" id="spmd-data"> tag; the page's renderer
// (lib/explain/page.js, plain JavaScript writing SVG) is inlined too, so the
// file needs no network. Views: module tree (placements and local shapes
// per rank), program timeline grouped by module with the collectives and
// why each exists, memory per rank over program order, communication per
// mesh axis and kind, and, for two programs, what differs between them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::explain {

/// What `spmd-run --profile` measured for each rank of one run.
struct Profile {
  /// One rank's figures.
  struct Rank {
    int64_t rank = 0;
    int64_t peakBytes = 0;       ///< peak live tensor bytes (see runtime::RankMemory)
    int64_t stateBytes = 0;      ///< live tensor bytes before the first step; 0 when not given
    int64_t rssGrowthBytes = 0;  ///< resident-set growth; 0 when not given
    double stepMs = 0;
    int64_t bytesSent = 0;  ///< per step
  };
  std::vector<std::string> files;  ///< the profile files' names (not paths)
  std::vector<Rank> ranks;         ///< every rank of the mesh, in rank order
};

/// Reads the profiles of one run (one file, or one per node with --nnodes)
/// and checks them against `program`: error naming the file for bad JSON,
/// another mesh, or a rank missing or given twice.
Expected<Profile> readProfile(const std::vector<std::string>& paths, const program::Program& program);

/// One program to explain and the name the page shows for it (a file name,
/// not a path, so the page stays the same wherever it was made).
struct ExplainInput {
  const program::Program* program = nullptr;
  std::string label;
  /// Measured figures shown beside the estimates (the data's "measured"
  /// object); none when null.
  const Profile* profile = nullptr;
};

/// The page's data as JSON text: {"version", "programs": [...], "diff"}
/// with one program's views for one input, and both programs plus their
/// comparison ("diff") for two. Error for no input or more than two.
Expected<std::string> explainJson(const std::vector<ExplainInput>& inputs);

/// The self-contained HTML page embedding `json` (explainJson's text);
/// "</" inside the data is escaped so no string can end the script tag.
std::string explainHtml(std::string_view json);

/// The text of the data tag of a page explainHtml wrote (the embedded JSON,
/// unescaped), or an error when `html` has none.
Expected<std::string> embeddedJson(std::string_view html);

}  // namespace spmd::explain
