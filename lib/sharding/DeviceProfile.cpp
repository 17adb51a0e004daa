// Device profile JSON (format at the top of DeviceProfile.h).
//
// Invariants: every figure of a parsed profile is finite and > 0 (alphas
// >= 0); every key of the file was either understood or refused.
#include "sharding/DeviceProfile.h"

#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "support/File.h"

namespace spmd::sharding {
namespace {

using Json = nlohmann::json;

// Errors name the file and the dotted key path.
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status keysIn(const Json& j, const std::string& at, std::initializer_list<std::string_view> allowed) const {
    if (!j.is_object()) return error(at, "expected an object");
    for (const auto& [key, value] : j.items()) {
      if (key == "source" && value.is_string()) continue;
      bool known = false;
      std::string list;
      for (std::string_view a : allowed) {
        known = known || key == a;
        list += (list.empty() ? "" : ", ") + std::string(a);
      }
      if (!known) return error(join(at, key), "unknown key; expected " + list + " (or a \"source\" string)");
    }
    return Status::ok();
  }

  Expected<double> number(const Json& j, const std::string& at, bool allowZero) const {
    if (!j.is_number()) return error(at, "expected a number");
    double v = j.get<double>();
    if (!std::isfinite(v) || v < 0 || (!allowZero && v == 0))
      return error(at, allowZero ? "expected a number >= 0" : "expected a number > 0");
    return v;
  }

  Expected<LinkCost> link(const Json& j, const std::string& at) const {
    SPMD_RETURN_IF_ERROR(keysIn(j, at, {"alpha_seconds", "bytes_per_second"}));
    for (const char* k : {"alpha_seconds", "bytes_per_second"})
      if (!j.contains(k)) return error(join(at, k), "missing");
    LinkCost l;
    SPMD_ASSIGN_OR_RETURN(l.alphaSeconds, number(j["alpha_seconds"], join(at, "alpha_seconds"), true));
    SPMD_ASSIGN_OR_RETURN(l.bytesPerSecond,
                          number(j["bytes_per_second"], join(at, "bytes_per_second"), false));
    return l;
  }

  Status error(const std::string& at, const std::string& what) const {
    return Status::error(std::string(source_) + ": key '" + at + "': " + what);
  }

  static std::string join(const std::string& at, const std::string& key) {
    return at.empty() ? key : at + "." + key;
  }

 private:
  std::string_view source_;
};

Status parseCompute(const Parser& ps, const Json& c, DeviceProfile& p) {
  SPMD_RETURN_IF_ERROR(ps.keysIn(c, "compute", {"flops_per_second", "memory_bytes_per_second"}));
  if (!c.contains("flops_per_second")) return ps.error("compute.flops_per_second", "missing");
  const Json& f = c["flops_per_second"];
  if (!f.is_object() || f.empty())
    return ps.error("compute.flops_per_second", "expected an object of dtype name -> FLOP/s");
  for (const auto& [dtype, v] : f.items()) {
    if (dtype == "source") continue;
    if (dtype != "default" && !ir::scalarTypeFromName(dtype) && dtype.find("float") == std::string::npos &&
        dtype.find("int") == std::string::npos)
      return ps.error("compute.flops_per_second." + dtype,
                      "unknown dtype; use float32, bfloat16, ... or default");
    SPMD_ASSIGN_OR_RETURN(double x, ps.number(v, "compute.flops_per_second." + dtype, false));
    p.flopsPerSecond[dtype] = x;
  }
  if (!c.contains("memory_bytes_per_second")) return ps.error("compute.memory_bytes_per_second", "missing");
  SPMD_ASSIGN_OR_RETURN(p.memoryBytesPerSecond,
                        ps.number(c["memory_bytes_per_second"], "compute.memory_bytes_per_second", false));
  return Status::ok();
}

Status parseLinks(const Parser& ps, const Json& j, DeviceProfile& p) {
  if (!j.contains("links")) return ps.error("links", "missing");
  const Json& l = j["links"];
  SPMD_RETURN_IF_ERROR(ps.keysIn(l, "links", {"intra_node", "inter_node"}));
  for (const char* k : {"intra_node", "inter_node"})
    if (!l.contains(k)) return ps.error(std::string("links.") + k, "missing");
  SPMD_ASSIGN_OR_RETURN(p.intraNode, ps.link(l["intra_node"], "links.intra_node"));
  SPMD_ASSIGN_OR_RETURN(p.interNode, ps.link(l["inter_node"], "links.inter_node"));
  if (j.contains("axes")) {
    const Json& a = j["axes"];
    if (!a.is_object()) return ps.error("axes", "expected an object of mesh-axis name -> link");
    for (const auto& [name, link] : a.items()) {
      if (name == "source" && link.is_string()) continue;
      SPMD_ASSIGN_OR_RETURN(p.axes[name], ps.link(link, "axes." + name));
    }
  }
  return Status::ok();
}

// "float32" for f32 and so on: the names calibrate writes.
std::string_view longDtypeName(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::Float:
      return "float32";
    case ir::ScalarType::BFloat16:
      return "bfloat16";
    case ir::ScalarType::Half:
      return "float16";
    case ir::ScalarType::Double:
      return "float64";
    default:
      return "";
  }
}

}  // namespace

double DeviceProfile::flopsFor(ir::ScalarType dtype) const {
  for (std::string_view name : {longDtypeName(dtype), ir::scalarTypeName(dtype)})
    if (auto it = flopsPerSecond.find(name); !name.empty() && it != flopsPerSecond.end()) return it->second;
  if (auto it = flopsPerSecond.find("default"); it != flopsPerSecond.end()) return it->second;
  double best = 0;
  for (const auto& [k, v] : flopsPerSecond) best = std::max(best, v);
  return best > 0 ? best : 5e10;
}

const DeviceProfile& defaultDeviceProfile() {
  static const DeviceProfile p = [] {
    DeviceProfile d;
    d.name = "builtin-cpu-loopback";
    d.flopsPerSecond = {{"float32", 5e10}, {"bfloat16", 5e10}, {"default", 5e10}};
    return d;
  }();
  return p;
}

Expected<DeviceProfile> parseDeviceProfile(std::string_view text, std::string_view source) {
  Parser ps(source);
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return Status::error(std::string(source) + ": not a JSON device profile: " + e.what());
  }
  SPMD_RETURN_IF_ERROR(ps.keysIn(j, "", {"name", "compute", "links", "ranks_per_node", "axes"}));
  DeviceProfile p;
  if (j.contains("name")) {
    if (!j["name"].is_string()) return ps.error("name", "expected a string");
    p.name = j["name"].get<std::string>();
  }
  if (!j.contains("compute")) return ps.error("compute", "missing");
  SPMD_RETURN_IF_ERROR(parseCompute(ps, j["compute"], p));
  SPMD_RETURN_IF_ERROR(parseLinks(ps, j, p));
  if (j.contains("ranks_per_node")) {
    if (!j["ranks_per_node"].is_number_integer() || j["ranks_per_node"].get<int64_t>() < 1)
      return ps.error("ranks_per_node", "expected an integer >= 1");
    p.ranksPerNode = j["ranks_per_node"].get<int64_t>();
  }
  if (p.name.empty()) p.name = std::string(source);
  return p;
}

Expected<DeviceProfile> loadDeviceProfile(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(path));
  return parseDeviceProfile(text, path);
}

LinkCost axisLinkFor(const DeviceProfile& profile, const Mesh& mesh, int64_t axis) {
  const std::string& name = mesh.axisNames()[static_cast<size_t>(axis)];
  if (auto it = profile.axes.find(name); it != profile.axes.end()) return it->second;
  int64_t stride = 1;
  for (int64_t a = axis + 1; a < mesh.numAxes(); ++a) stride *= mesh.size(a);
  return stride * mesh.size(axis) <= profile.ranksPerNode ? profile.intraNode : profile.interNode;
}

CostModel costModelFor(const DeviceProfile& profile, const Mesh& mesh) {
  CostModel cm(profile.intraNode);
  for (int64_t a = 0; a < mesh.numAxes(); ++a) cm.setAxisLink(a, axisLinkFor(profile, mesh, a));
  return cm;
}

}  // namespace spmd::sharding
