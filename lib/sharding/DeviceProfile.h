// Device profiles: what one rank computes per second and what each mesh
// axis's links cost, as the JSON that `spmd-run --calibrate` writes and
// profiles/*.json ship:
//
//   {"name": "cpu-loopback",
//    "compute": {"flops_per_second": {"float32": 5e10, "default": 5e10},
//                "memory_bytes_per_second": 1e10},
//    "links": {"intra_node": {"alpha_seconds": 2e-5, "bytes_per_second": 1e9},
//              "inter_node": {"alpha_seconds": 5e-5, "bytes_per_second": 1e9}},
//    "ranks_per_node": 8,
//    "axes": {"tp": {"alpha_seconds": 1.9e-5, "bytes_per_second": 1.2e9}}}
//
//   auto p = loadDeviceProfile("profiles/h100-nvlink.json");
//   CostModel cm = costModelFor(*p, mesh);   // one link per mesh axis
//
// A mesh axis takes its link from "axes" when the profile names it, else
// intra_node when the ranks of one group along it stay inside one node
// (rank stride * axis size <= ranks_per_node), else inter_node. "source"
// strings (anywhere) document where a figure came from; any other unknown
// key is an error naming the key and the file.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/Types.h"
#include "sharding/CostModel.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::sharding {

/// A device's compute throughput and its links.
struct DeviceProfile {
  std::string name;
  /// Peak FLOP/s by dtype name as written in the file ("float32",
  /// "bfloat16", ...); "default" for dtypes not listed.
  std::map<std::string, double, std::less<>> flopsPerSecond;
  /// Memory bandwidth of one rank, bytes per second.
  double memoryBytesPerSecond = 1e10;
  LinkCost intraNode{2e-5, 1e9};
  LinkCost interNode{5e-5, 1e9};
  int64_t ranksPerNode = 8;
  /// Measured links by mesh-axis name (override intra/inter).
  std::map<std::string, LinkCost, std::less<>> axes;

  /// FLOP/s for `dtype`: its entry, else "default", else the largest given.
  double flopsFor(ir::ScalarType dtype) const;
};

/// The profile used when none is given: a CPU-loopback-like machine (the
/// figures of the example above; name "builtin-cpu-loopback").
const DeviceProfile& defaultDeviceProfile();

/// Parses profile JSON; `source` names it in errors ("p.json: key
/// 'compute.flops': unknown key; expected flops_per_second,
/// memory_bytes_per_second"). Errors: not JSON, unknown keys, missing
/// compute/links, numbers <= 0 (alpha may be 0).
Expected<DeviceProfile> parseDeviceProfile(std::string_view text, std::string_view source);

/// Reads and parses the file at `path`.
Expected<DeviceProfile> loadDeviceProfile(const std::string& path);

/// The link mesh axis `axis` of `mesh` uses under `profile` (see the top).
LinkCost axisLinkFor(const DeviceProfile& profile, const Mesh& mesh, int64_t axis);

/// A CostModel with every axis of `mesh` given its link from `profile`
/// (local steps keep CostModel's default bandwidth).
CostModel costModelFor(const DeviceProfile& profile, const Mesh& mesh);

}  // namespace spmd::sharding
