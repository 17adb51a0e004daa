// What two compiled programs do differently, from their page data:
// placements changed, weights only in one, collectives added or removed
// (matched by kind, axis, value and placements, counted), bytes per axis
// and kind, memory.
//
//   "diff": {"placements": [{"fqn": "w1.weight", "a": ["S(0)"], "b": ["R"]}],
//            "collectives": {"removed": [{"kind": "all_gather", ..., "count": 2}], "added": []},
//            "bytes_by_axis": [{"axis": "x", "a": 8192, "b": 0}], ...}
#include <map>
#include <tuple>

#include "explain/Internal.h"

namespace spmd::explain::detail {
namespace {

using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;

std::map<Key, std::pair<int64_t, int64_t>> collectiveCounts(const Json& program) {
  std::map<Key, std::pair<int64_t, int64_t>> out;  // key -> (count, bytes of one)
  for (const Json& c : program["collectives"]) {
    auto& e = out[{c["kind"], c["axis"], c["value"], c["from"], c["to"]}];
    e.first += 1;
    e.second = c["bytes"].get<int64_t>();
  }
  return out;
}

Json keyJson(const Key& k, int64_t count, int64_t bytes) {
  return {{"kind", std::get<0>(k)}, {"axis", std::get<1>(k)}, {"value", std::get<2>(k)},
          {"from", std::get<3>(k)}, {"to", std::get<4>(k)},   {"count", count},
          {"bytes", bytes}};
}

// Rows {key: k, a: x, b: y} over the union of two "by_axis"-style lists.
Json sideBySide(const Json& a, const Json& b, const char* key) {
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  for (const Json& r : a) rows[r[key].get<std::string>()].first = r["bytes"].get<int64_t>();
  for (const Json& r : b) rows[r[key].get<std::string>()].second = r["bytes"].get<int64_t>();
  Json out = Json::array();
  for (const auto& [k, v] : rows) out.push_back({{key, k}, {"a", v.first}, {"b", v.second}});
  return out;
}

Json placementDiff(const Json& a, const Json& b, Json& onlyA, Json& onlyB) {
  std::map<std::string, const Json*> wa, wb;
  for (const Json& w : a["weights"]) wa[w["fqn"].get<std::string>()] = &w;
  for (const Json& w : b["weights"]) wb[w["fqn"].get<std::string>()] = &w;
  Json changed = Json::array();
  for (const auto& [fqn, w] : wa) {
    auto it = wb.find(fqn);
    if (it == wb.end()) {
      onlyA.push_back(fqn);
      continue;
    }
    const Json& x = *it->second;
    if ((*w)["spec"] != x["spec"] || (*w)["local"] != x["local"])
      changed.push_back({{"fqn", fqn},
                         {"a", (*w)["spec"]},
                         {"b", x["spec"]},
                         {"a_local", (*w)["local"]},
                         {"b_local", x["local"]},
                         {"a_bytes", (*w)["bytes_per_rank"]},
                         {"b_bytes", x["bytes_per_rank"]}});
  }
  for (const auto& [fqn, w] : wb)
    if (!wa.count(fqn)) onlyB.push_back(fqn);
  return changed;
}

}  // namespace

Json compareData(const Json& a, const Json& b) {
  Json d;
  Json onlyA = Json::array(), onlyB = Json::array();
  d["placements"] = placementDiff(a, b, onlyA, onlyB);
  d["weights_only_in_a"] = onlyA;
  d["weights_only_in_b"] = onlyB;
  auto ca = collectiveCounts(a), cb = collectiveCounts(b);
  Json removed = Json::array(), added = Json::array();
  for (const auto& [k, v] : ca) {
    int64_t other = cb.count(k) ? cb[k].first : 0;
    if (v.first > other) removed.push_back(keyJson(k, v.first - other, v.second));
  }
  for (const auto& [k, v] : cb) {
    int64_t other = ca.count(k) ? ca[k].first : 0;
    if (v.first > other) added.push_back(keyJson(k, v.first - other, v.second));
  }
  d["collectives"] = {{"removed", removed}, {"added", added}};
  d["bytes_by_axis"] = sideBySide(a["communication"]["by_axis"], b["communication"]["by_axis"], "axis");
  d["bytes_by_kind"] = sideBySide(a["communication"]["by_kind"], b["communication"]["by_kind"], "kind");
  Json summary = Json::array();
  for (const auto& [k, v] : a["summary"].items())
    summary.push_back({{"what", k}, {"a", v}, {"b", b["summary"][k]}});
  d["summary"] = summary;
  return d;
}

}  // namespace spmd::explain::detail
