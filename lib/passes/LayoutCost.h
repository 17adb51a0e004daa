// The modeled cost of one compiled layout: compute time per node, the
// alpha-beta time of its collectives per mesh axis, and per-rank peak
// memory. Any two layouts of one model compare by these figures.
//
//   LayoutCost c = modelLayout(program, sharding::defaultDeviceProfile());
//   c.stepSeconds() == c.computeSeconds + c.commSeconds
//
// Compute: matmuls (mm, addmm, bmm, matmul), convolutions and scaled dot
// product attention count their FLOPs exactly on local shapes (backward ops:
// convolution 2x, attention 2.5x the forward) and take max(FLOPs / peak,
// bytes / memory bandwidth); every other op is bytes-bound: the bytes of its
// tensor operands and results over the memory bandwidth. Communication:
// each all-gather, all-reduce, reduce-scatter and all-to-all of the program
// priced by the CostModel with the profile's link of its mesh axis; ring
// attention's point-to-point exchanges ("ring_send", ContextParallelCost.h)
// only where the block compute they overlap does not hide them. Step time
// is their sum: overlap of async collectives is not credited. Memory: weights
// (parameters, buffers, optimizer states) plus the peak of live activations
// and gradients over program order (estimateMemory).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "program/Program.h"
#include "sharding/DeviceProfile.h"

namespace spmd::passes {

/// Communication on one mesh axis.
struct AxisComm {
  std::string axis;
  double seconds = 0;
  int64_t collectives = 0;
  /// (kind, count): all_gather, all_reduce, reduce_scatter, all_to_all,
  /// ring_send (ring attention's exchanges).
  std::vector<std::pair<std::string, int64_t>> byKind;
};

/// Modeled figures of one layout, per rank.
struct LayoutCost {
  double computeSeconds = 0;
  double commSeconds = 0;
  /// One entry per mesh axis, in mesh order.
  std::vector<AxisComm> axes;
  int64_t paramBytes = 0;  ///< weights and optimizer states of one rank
  int64_t peakBytes = 0;   ///< weights + peak of live activations
  double stepSeconds() const { return computeSeconds + commSeconds; }
  /// Number of communicating collectives on all axes.
  int64_t collectives() const;
};

/// Models `program` (a compiled SPMD program with local shapes) on `profile`.
LayoutCost modelLayout(const program::Program& program, const sharding::DeviceProfile& profile);

/// Seconds `cm` gives one collective node (all-gather, all-reduce,
/// reduce-scatter, all-to-all) on its mesh axis and local shapes; 0 for any
/// other node.
double collectiveSeconds(const ir::Node& node, const sharding::Mesh& mesh, const sharding::CostModel& cm);

/// FLOPs of one node on its (local) shapes; 0 for ops counted bytes-bound.
double nodeFlops(const ir::Node& node);

/// Seconds modelLayout gives one node's compute on its (local) shapes; 0
/// for collectives, waits, symbolic ops and views.
double nodeComputeSeconds(const ir::Node& node, const sharding::DeviceProfile& profile);

/// Bytes of a tensor value on its (local) shape; 0 for a non-tensor or null.
double valueBytes(const ir::Value* v);

/// True for ops that return a view of an operand (no bytes move: free).
bool isViewOp(std::string_view target);

/// Seconds of one op that moves `bytes` and computes `flops` (0: bytes-bound)
/// in `dtype`: max(bytes / memory bandwidth, flops / peak).
double opSeconds(double bytes, double flops, ir::ScalarType dtype, const sharding::DeviceProfile& profile);

}  // namespace spmd::passes
