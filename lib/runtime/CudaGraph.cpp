// CUDA-graph eligibility, pool sizing and the two-stream schedule (see
// CudaGraph.h). Pure functions of the program: no CUDA here.
#include "runtime/CudaGraph.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "ir/Collectives.h"

namespace spmd::runtime {
namespace {

// Ops whose output size, or whose result on the host, depends on tensor
// data: each one synchronizes the host with the device, which a capture
// cannot do (CUDA refuses the sync; the replay would reuse the first size).
constexpr std::array<std::string_view, 14> kHostSyncOps = {
    "aten._local_scalar_dense.default",
    "aten.item.default",
    "aten.nonzero.default",
    "aten.nonzero_static.default",  // static size, but it syncs to check it
    "aten.masked_select.default",
    "aten.unique.default",
    "aten._unique2.default",
    "aten.unique_consecutive.default",
    "aten.unique_dim.default",
    "aten.repeat_interleave.Tensor",
    "aten.bincount.default",
    "aten._assert_async.msg",
    "aten._assert_scalar.default",
    "aten.equal.default",
};

std::string nodeLabel(const ir::Node& n) { return "node %" + n.name() + " (" + n.target() + ")"; }

// The first symbolic tensor among `values`, or null.
const ir::Value* firstDynamic(const std::vector<ir::Value*>& values) {
  for (const ir::Value* v : values)
    if (v != nullptr && v->isTensor() && !v->type().isStatic()) return v;
  return nullptr;
}

bool isAsyncCollective(const ir::Node& n) {
  if (!ir::isCommunicating(n.target())) return false;
  const ir::Argument* a = n.input("async");
  return a != nullptr && a->kind == ir::Argument::Kind::Bool && !a->ints.empty() && a->ints[0] != 0;
}

}  // namespace

Expected<CudaGraphMode> parseCudaGraphMode(std::string_view text) {
  if (text == "on") return CudaGraphMode::On;
  if (text == "off") return CudaGraphMode::Off;
  if (text == "auto") return CudaGraphMode::Auto;
  return Status::error("--cuda-graph " + std::string(text) + ": expected on, off or auto");
}

GraphEligibility cudaGraphEligibility(const program::Program& program, const GraphTarget& target) {
  auto no = [](std::string why) { return GraphEligibility{false, std::move(why)}; };
  if (!target.cuda) return no("the device is not a GPU");
  if (program.pipeline) return no("a pipeline schedule's sends and receives are driven from the host");
  if (program.mesh.numRanks() > 1 && !target.nccl)
    return no("collectives on Gloo run on the host (NCCL needs one GPU per rank)");
  const ir::Graph& g = program.graph.graph;
  if (const ir::Value* v = firstDynamic(g.inputs()))
    return no("input %" + v->name() + " has a symbolic shape " + v->type().str() +
              " (export with static shapes)");
  for (const auto& n : g.nodes()) {
    if (n->target() == ir::kGlobalSymbol)
      return no(nodeLabel(*n) + ": a symbol bound from each step's inputs (dynamic shapes)");
    if (std::find(kHostSyncOps.begin(), kHostSyncOps.end(), n->target()) != kHostSyncOps.end())
      return no(nodeLabel(*n) + ": it synchronizes with the host (data-dependent result)");
    if (const ir::Value* v = firstDynamic(n->outputValues()))
      return no(nodeLabel(*n) + ": output %" + v->name() + " has a symbolic shape " + v->type().str());
  }
  return {true, ""};
}

Expected<bool> resolveCudaGraph(CudaGraphMode mode, const GraphEligibility& eligibility, bool cuda) {
  if (mode == CudaGraphMode::Off) return false;
  if (mode == CudaGraphMode::Auto) return cuda && eligibility.eligible;
  if (!cuda)
    return Status::error(
        "--cuda-graph on: the run is on the CPU; CUDA graphs need --device cuda "
        "(pass --cuda-graph auto or off)");
  if (!eligibility.eligible)
    return Status::error("--cuda-graph on: this program cannot be captured: " + eligibility.reason +
                         " (pass --cuda-graph auto or off)");
  return true;
}

int64_t graphPoolBytes(int64_t predictedPeak, int64_t paramBytes) {
  constexpr int64_t kBlock = int64_t{2} << 20;  // the caching allocator's large-block rounding
  if (predictedPeak <= 0) return 0;
  int64_t activations = std::max<int64_t>(predictedPeak - std::max<int64_t>(paramBytes, 0), 0);
  int64_t withHeadroom = activations + activations / 8;
  return (withHeadroom + kBlock - 1) / kBlock * kBlock;
}

Expected<std::vector<StreamSlot>> deriveStreamSchedule(const ir::Graph& graph) {
  std::vector<StreamSlot> slots;
  std::unordered_map<const ir::Value*, size_t> pending;  // async result -> its slot
  for (const auto& n : graph.nodes()) {
    if (n->target() == ir::kWait) {
      const ir::Argument* in = n->input("self");
      auto it = in != nullptr ? pending.find(in->value()) : pending.end();
      if (it == pending.end())
        return Status::error(nodeLabel(*n) + ": waits on a value that is no pending async collective");
      slots[it->second].waitNode = n->index();
      pending.erase(it);
      continue;
    }
    if (!ir::isCommunicating(n->target())) continue;
    StreamSlot slot{n->index(), -1, static_cast<int>(slots.size()), n->name()};
    if (isAsyncCollective(*n)) {
      std::vector<ir::Value*> outs = n->outputValues();
      if (outs.size() != 1) return Status::error(nodeLabel(*n) + ": an async collective needs one result");
      pending.emplace(outs[0], slots.size());
    }
    slots.push_back(std::move(slot));
  }
  if (!pending.empty()) {
    const StreamSlot& open = slots[std::min_element(pending.begin(), pending.end(), [](auto& a, auto& b) {
                                     return a.second < b.second;
                                   })->second];
    return Status::error("node %" + open.name + ": async collective without an spmd.wait");
  }
  return slots;
}

std::vector<std::vector<int>> computeWaits(const std::vector<StreamSlot>& schedule, size_t nodeCount) {
  std::vector<std::vector<int>> waits(nodeCount);
  for (const StreamSlot& s : schedule) {
    // A synchronous collective's result is read by the next node at the
    // earliest: the compute stream waits right after it.
    int at = s.waitNode >= 0 ? s.waitNode : s.node + 1;
    if (at < static_cast<int>(nodeCount)) waits[static_cast<size_t>(at)].push_back(s.event);
  }
  return waits;
}

}  // namespace spmd::runtime
