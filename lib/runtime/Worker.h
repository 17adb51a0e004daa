// One rank of a distributed run: load this rank's shard of the program's
// weights and inputs, execute, and assemble the global outputs on rank 0.
//
//   SPMD_ASSIGN_OR_RETURN(auto program, program::readProgram("llama.spmd"));
//   auto store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
//   SPMD_ASSIGN_OR_RETURN(RankResult r, runRank(program, rank, store, globalInputs, {}));
//   // rank 0: r.outputs["output.0"] is the global output
//
// runThreaded runs every rank of a program in threads of this process
// (c10d over an in-memory store): the tests' simulated world.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program/Reader.h"
#include "runtime/Checkpoint.h"
#include "runtime/Comm.h"
#include "runtime/Dcp.h"
#include "runtime/MemoryMeter.h"
#include "runtime/TensorIO.h"

namespace spmd::runtime {

/// Options of one rank.
struct RankOptions {
  c10::Device device = c10::kCPU;
  CommOptions comm;
  /// Number of times the program runs (benchmarks); outputs are the last run's.
  int repeat = 1;
  /// Train steps: after each run, parameter and buffer mutation outputs
  /// (optimizer updates, running statistics) replace the weights they name.
  int steps = 1;
  /// Extra batches, cycled over the steps (step i, counted from the start
  /// of training also after a resume, uses batch i % (1 + n); the first is
  /// runRank's `inputs`).
  std::vector<TensorMap> moreBatches;
  /// Load this rank's weights and optimizer states from a checkpoint (a
  /// root with `latest`, or a step folder), resharding when its layout differs.
  std::string resume;
  /// Save a sharded checkpoint to this folder after the last step.
  std::string save;
  /// Write `save` as a PyTorch Distributed Checkpoint folder (Dcp.h) instead
  /// (a pipelined run's stages write one folder together).
  bool saveDcp = false;
  /// The layout `saveDcp` writes.
  DcpFormat dcpFormat = DcpFormat::Torch;
  /// Also save after every `saveEvery` steps (0: only after the last).
  int saveEvery = 0;
  /// Whether a run of `runs` steps saves after its step `i` (from 0).
  bool savesAfter(int i, int runs) const {
    return !save.empty() && (i + 1 == runs || (saveEvery > 0 && (i + 1) % saveEvery == 0));
  }
  /// Step folders of `save` to keep (0: all).
  int keep = 2;
  /// Called on every rank after each step with the step number (counting
  /// from the resumed step), the loss (NaN without one) and its seconds.
  std::function<void(int64_t step, double loss, double seconds)> onStep;
  /// Capture the step as a CUDA graph after warm-up and replay it
  /// (GraphStep.h; the caller checked eligibility: CudaGraph.h).
  bool cudaGraph = false;
  /// The compiler's predicted per-rank peak (0: unknown): sizes the
  /// graph's memory pool (graphPoolBytes).
  int64_t predictedPeakBytes = 0;
};

/// What a rank produced.
struct RankResult {
  /// Global outputs by name (rank 0 only; empty elsewhere).
  TensorMap outputs;
  CommStats stats;
  /// Median seconds of an execution (without loading; the first of several
  /// left out as warm-up); on a GPU, until its kernels finished.
  double stepSeconds = 0;
  /// Seconds to read and place this rank's weights (its blobs, or its
  /// regions of the checkpoint for a program by reference).
  double loadSeconds = 0;
  /// The loss of each step (train-step programs).
  std::vector<double> losses;
  /// This rank's measured memory (MemoryMeter.h).
  RankMemory memory;
};

/// Runs rank `rank` of `program` with global inputs `inputs` (names as for
/// single-device runs: "input.<i>" or the signature's). Errors name the
/// input, node or rank.
Expected<RankResult> runRank(const program::LoadedProgram& program, int64_t rank,
                             const c10::intrusive_ptr<c10d::Store>& store, const TensorMap& inputs,
                             const RankOptions& options);

/// Every rank of a simulated world kept between runThreaded calls: one
/// store and each rank's process groups of one mesh, built once. Building
/// Gloo groups costs tens of milliseconds a run; tests that run thousands
/// of small programs on a few meshes (numeric_test) pay it once.
///
///   SPMD_ASSIGN_OR_RETURN(auto world, ThreadedWorld::create(mesh, {}));
///   for (const auto& program : programs) runThreaded(program, inputs, {}, world.get());
class ThreadedWorld {
 public:
  /// Builds every rank's groups of `mesh`, one thread per rank.
  static Expected<std::unique_ptr<ThreadedWorld>> create(const sharding::Mesh& mesh,
                                                         const CommOptions& options);
  const sharding::Mesh& mesh() const { return mesh_; }
  /// False once a run on it failed: its groups may hold unmatched
  /// collectives, so runs build their own groups again (make a new world).
  bool usable() const { return usable_; }

 private:
  friend Expected<std::vector<RankResult>> runThreadedRanks(const program::LoadedProgram&, const TensorMap&,
                                                            const RankOptions&, ThreadedWorld*);
  sharding::Mesh mesh_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::vector<std::unique_ptr<MeshComm>> comms_;
  bool usable_ = true;
};

/// Runs all ranks of `program` as threads of this process; returns rank 0's
/// result. The first failing rank's error is returned. With `world` (whose
/// mesh is the program's; not for pipelined programs, checkpoint saves or
/// resumes, which build their own groups) the ranks use its groups.
Expected<RankResult> runThreaded(const program::LoadedProgram& program, const TensorMap& inputs,
                                 const RankOptions& options = {}, ThreadedWorld* world = nullptr);

/// runThreaded, returning every rank's result in rank order (global outputs
/// on rank 0's only).
Expected<std::vector<RankResult>> runThreadedRanks(const program::LoadedProgram& program,
                                                   const TensorMap& inputs, const RankOptions& options = {},
                                                   ThreadedWorld* world = nullptr);

/// Checks global inputs against the program: every user input present
/// (as "input.<i>" or by name), with the program's dtype and global shape,
/// shardable by its placement (plain shards at any size, strided ones
/// evenly). Errors name the input.
Status checkGlobalInputs(const program::Program& program, const TensorMap& inputs);

/// Saves rank `rank`'s `weights` after step `step` as `options` ask: --save
/// (saveCheckpoint), --save-dcp (saveDcpCheckpoint) or --save-dcp with
/// --save-every (saveDcpStep); `stages` as those take it (pipelined runs).
Status saveAfterStep(const RankOptions& options, const program::Program& program, int64_t rank,
                     const TensorMap& weights, int64_t step, c10d::Store& store,
                     const StageSave* stages = nullptr);

/// The local shard of global tensor `global` laid out as `spec` at `coords`
/// (torch.chunk sizes: trailing ranks may hold fewer rows or none)
/// (Partial: axis coordinate 0 keeps the value, the others hold zeros for
/// sum, copies for avg/max/min).
at::Tensor shardOf(const at::Tensor& global, const sharding::ShardingSpec& spec, const sharding::Mesh& mesh,
                   const std::vector<int64_t>& coords);

}  // namespace spmd::runtime
