// The mesh axis a custom kernel exchanges over (MoE all-to-all, ring
// attention), found in the thread's CollectiveScope:
//
//   ScopedAxis ax = scopedAxis("ep", "spmd.moe_experts");   // ax.size == 4, ax.coord == 1 on rank 1
//   ax.comm->group(ax.index).alltoall_base(...);
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "runtime/Comm.h"

namespace spmd::runtime {

/// One axis of the current scope's mesh; the default is no axis (one rank).
struct ScopedAxis {
  MeshComm* comm = nullptr;
  int64_t index = -1;
  int64_t size = 1;   ///< ranks on the axis
  int64_t coord = 0;  ///< this rank's coordinate on it
};

/// The axis called `name` of the current CollectiveScope's mesh. Throws,
/// naming kernel `op`, outside a distributed run or for an axis the mesh
/// lacks.
inline ScopedAxis scopedAxis(const std::string& name, const std::string& op) {
  MeshComm* c = CollectiveScope::current();
  if (!c) throw std::runtime_error(op + " outside a distributed run: this program needs spmd-run -n");
  int64_t a = c->axisIndex(name);
  if (a < 0) throw std::runtime_error("mesh has no axis '" + name + "'");
  return {c, a, c->mesh().size(a), c->coords()[static_cast<size_t>(a)]};
}

}  // namespace spmd::runtime
