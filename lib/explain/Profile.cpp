// readProfile and the page's "measured" object (see Explain.h): what
// `spmd-run --profile` wrote, {"format": 1, "program", "mesh": [sizes],
// "ranks": [{"rank", "peak_bytes", "step_ms", "bytes_sent"}]}.
#include <filesystem>
#include <map>

#include "explain/Internal.h"
#include "support/File.h"
#include "support/Strings.h"

namespace spmd::explain {
namespace {

// One file's ranks, added to `byRank` (error naming the file).
Status readOne(const std::string& path, const program::Program& p, std::map<int64_t, Profile::Rank>& byRank) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(path));
  auto bad = [&](const std::string& what) {
    return Status::error(path + ": " + what + " (expected a file written by spmd-run --profile)");
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object() || j.value("format", 0) != 1 || !j.contains("mesh") || !j.contains("ranks") ||
      !j["ranks"].is_array())
    return bad("not a format 1 profile with \"mesh\" and \"ranks\"");
  std::vector<int64_t> mesh;
  try {
    mesh = j["mesh"].get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception&) {
    return bad("\"mesh\" is not a list of sizes");
  }
  if (mesh != p.mesh.shape())
    return Status::error(path + ": measured on mesh " + sharding::Mesh::formatShape(mesh) +
                         ", but the program's mesh is " + sharding::Mesh::formatShape(p.mesh.shape()) +
                         ": profile a run of this program");
  for (const auto& e : j["ranks"]) {
    Profile::Rank r;
    try {
      r.rank = e.at("rank").get<int64_t>();
      r.peakBytes = e.at("peak_bytes").get<int64_t>();
      r.stepMs = e.at("step_ms").get<double>();
      r.bytesSent = e.at("bytes_sent").get<int64_t>();
      r.stateBytes = e.value("state_bytes", int64_t{0});  // older profiles lack them
      r.rssGrowthBytes = e.value("rss_growth_bytes", int64_t{0});
    } catch (const nlohmann::json::exception&) {
      return bad("a rank entry lacks a numeric rank, peak_bytes, step_ms or bytes_sent");
    }
    if (r.rank < 0 || r.rank >= p.mesh.numRanks())
      return bad("rank " + std::to_string(r.rank) + " is outside the mesh");
    if (!byRank.emplace(r.rank, r).second)
      return Status::error(path + ": rank " + std::to_string(r.rank) + " is given twice");
  }
  return Status::ok();
}

}  // namespace

Expected<Profile> readProfile(const std::vector<std::string>& paths, const program::Program& p) {
  std::map<int64_t, Profile::Rank> byRank;
  Profile out;
  for (const std::string& path : paths) {
    SPMD_RETURN_IF_ERROR(readOne(path, p, byRank));
    out.files.push_back(std::filesystem::path(path).filename().string());
  }
  std::string all = joined(paths);
  for (int64_t r = 0; r < p.mesh.numRanks(); ++r) {
    auto it = byRank.find(r);
    if (it == byRank.end())
      return Status::error(all + ": rank " + std::to_string(r) + " of " + std::to_string(p.mesh.numRanks()) +
                           " is missing (with --nnodes, give every node's profile)");
    out.ranks.push_back(it->second);
  }
  return out;
}

namespace detail {

Json measuredData(const Profile& profile) {
  Json ranks = Json::array();
  for (const auto& r : profile.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"peak_bytes", r.peakBytes},
                     {"state_bytes", r.stateBytes},
                     {"rss_growth_bytes", r.rssGrowthBytes},
                     {"step_ms", r.stepMs},
                     {"bytes_sent", r.bytesSent}});
  return {{"files", profile.files}, {"ranks", ranks}};
}

}  // namespace detail
}  // namespace spmd::explain
