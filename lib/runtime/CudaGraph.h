// Whether and how a step runs as one CUDA graph (spmd-run --cuda-graph),
// decided on the host from the program alone: no CUDA needed, so the
// decisions are unit-tested on the CPU (tests/runtime/CudaGraphTest.cpp).
// The capture itself lives in GraphStep.{h,cpp}.
//
//   auto why = cudaGraphEligibility(program, {.cuda = true, .nccl = true});
//   // why.eligible == false, why.reason == "node %nonzero (aten.nonzero.default):
//   //   a data-dependent output size needs a host sync"
//   SPMD_ASSIGN_OR_RETURN(bool use, resolveCudaGraph(CudaGraphMode::Auto, why, /*cuda=*/true));
//   int64_t pool = graphPoolBytes(predictedPeak, paramBytes);  // activations + headroom
//
// Stream order for the NCCL path (compute and communication on separate
// streams, joined by events) is derived from the same node list:
//
//   %ag = spmd.all_gather(%w, "x", 0, async=True)   -> comm stream waits on compute (event e0 in),
//                                                      the all-gather runs, records e1 (out)
//   %mm = aten.mm.default(%x, %w2)                  -> compute stream, overlaps the all-gather
//   %w_1 = spmd.wait(%ag)                           -> compute stream waits on e1
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::runtime {

/// spmd-run --cuda-graph.
enum class CudaGraphMode : uint8_t { Off, On, Auto };

/// "on", "off" or "auto"; an error naming the flag otherwise.
Expected<CudaGraphMode> parseCudaGraphMode(std::string_view text);

/// Where a program would run: the facts eligibility depends on besides
/// the program.
struct GraphTarget {
  bool cuda = false;  ///< the device is a GPU
  bool nccl = false;  ///< collectives go over NCCL (Gloo's run on the host)
};

/// Whether a step can be captured once and replayed; `reason` names the
/// first obstacle (a node, an input, the backend) when it cannot.
struct GraphEligibility {
  bool eligible = false;
  std::string reason;
};

/// The capture-eligibility of `program` on `target`: static shapes on every
/// input and value, no node whose output size or control depends on data
/// (`.item()`, nonzero, ...: a host sync breaks capture), no symbol bound
/// per step (spmd.global_symbol), no pipeline schedule (its sends are
/// host-driven), collectives on NCCL or a single rank, and a GPU.
GraphEligibility cudaGraphEligibility(const program::Program& program, const GraphTarget& target);

/// The decision for `mode`: Off -> false; Auto -> eligible and on a GPU;
/// On -> true when eligible on a GPU, else an error naming why (the
/// device, or eligibility's reason) and what to pass instead.
Expected<bool> resolveCudaGraph(CudaGraphMode mode, const GraphEligibility& eligibility, bool cuda);

/// Bytes to reserve in the graph's private memory pool before capture: the
/// compiler's predicted per-rank peak less the weights (allocated before
/// capture, outside the pool), plus 1/8 headroom, rounded up to the CUDA
/// caching allocator's 2 MiB large-block size. 0 when no prediction is
/// known (predictedPeak <= 0): the pool then grows during capture.
int64_t graphPoolBytes(int64_t predictedPeak, int64_t paramBytes);

/// One collective's place in the two-stream schedule.
struct StreamSlot {
  int node = 0;       ///< the collective's node index
  int waitNode = -1;  ///< index of the spmd.wait that ends it (-1: synchronous, waits at once)
  int event = 0;      ///< the event recorded on the comm stream when it is done
  std::string name;   ///< the collective's node name (for logs and tests)
};

/// The schedule of a program's collectives over a compute and a
/// communication stream, in program order: every collective runs on the
/// comm stream after it waits on the compute stream (its input is ready);
/// its event is recorded there; the compute stream waits on that event at
/// the collective's spmd.wait (async) or right after it (synchronous).
/// Compute between a start and its wait overlaps the collective. An
/// spmd.wait whose input is no async collective, or an async collective
/// without a wait, is an error naming the node.
Expected<std::vector<StreamSlot>> deriveStreamSchedule(const ir::Graph& graph);

/// The compute stream's waits in program order: for node index i, the
/// events it must wait on before it runs (empty for most nodes).
std::vector<std::vector<int>> computeWaits(const std::vector<StreamSlot>& schedule, size_t nodeCount);

}  // namespace spmd::runtime
