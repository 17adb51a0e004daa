// Communication for SPMD programs: one c10d process group per mesh-axis
// slice, and the thread-local context the collective kernels run in.
//
//   auto store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
//   SPMD_ASSIGN_OR_RETURN(auto comm, MeshComm::create(store, mesh, rank, {}));
//   CollectiveScope scope(comm.get());      // kernels of this thread use it
//   executor.run(inputs);                   // spmd.all_reduce(...) -> comm
//
// On a 2x4 mesh (dp, tp), rank 6 (coords 1, 2) talks over two groups: its
// dp group {2, 6} and its tp group {4, 5, 6, 7}. Groups are built with
// Gloo for CPU tensors (CUDA tensors over Gloo too) and NCCL when the build
// has it and the device is CUDA.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Options of MeshComm::create.
struct CommOptions {
  /// A collective that does not complete in this time fails (no hang).
  std::chrono::milliseconds timeout{60000};
  /// Use NCCL for the groups (CUDA builds with CUDA tensors).
  bool nccl = false;
  /// Address the Gloo transport binds to (peers on other nodes connect to
  /// it, so it must be reachable from them; see runWorker).
  std::string hostname = "127.0.0.1";
  /// Network interface to bind instead (GLOO_SOCKET_IFNAME); wins when set.
  std::string interface;
};

/// Bytes and counts this rank communicated.
struct CommStats {
  int64_t collectives = 0;
  int64_t bytesSent = 0;
  /// Per global expert, the tokens this rank routed to it (every MoE
  /// experts forward, summed over layers and steps; MoeOps.cpp).
  std::vector<int64_t> expertTokens;
  /// Bytes the MoE experts kernels sent (their all-to-alls, part of
  /// bytesSent), and what torchtitan's expert parallelism would send for
  /// the same routing: 2 (rows out + rows back) * hidden * element size.
  int64_t moeBytesSent = 0;
  int64_t moeTorchtitanBytes = 0;
  /// Attention scores the ring-attention kernels computed (query rows x
  /// key rows x batch x heads, forward and backward; RingAttentionOps.cpp):
  /// the per-rank work a load-balanced causal split evens out.
  int64_t ringScores = 0;
};

/// A rank's view of the mesh: coordinates and one process group per axis.
class MeshComm {
 public:
  /// Builds the axis groups of `rank` (collective over all ranks: every
  /// rank must call it with the same mesh and store).
  static Expected<std::unique_ptr<MeshComm>> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const sharding::Mesh& mesh, int64_t rank,
                                                    const CommOptions& options);

  /// A rank of a pipelined program (program::PipelinePlan): `mesh` is the
  /// program's, whose axis `microbatchAxis` has no group (its coordinate is
  /// the microbatch being run: setMicrobatch); world rank = stage * (the
  /// other axes' ranks) + rank among them; pipelineGroup() links the stages.
  static Expected<std::unique_ptr<MeshComm>> createPipelined(const c10::intrusive_ptr<c10d::Store>& store,
                                                             const sharding::Mesh& mesh,
                                                             const std::string& microbatchAxis,
                                                             int64_t stages, int64_t rank,
                                                             const CommOptions& options);
  /// Sets the microbatch axis's coordinate (pipelined programs).
  void setMicrobatch(int64_t i) { coords_[static_cast<size_t>(microbatchAxis_)] = i; }
  /// The group of this rank's copies over the stages (group rank = stage).
  c10d::Backend& pipelineGroup() { return *pipelineGroup_; }
  /// This rank's stage (0 without a pipeline).
  int64_t stage() const { return stage_; }

  const sharding::Mesh& mesh() const { return mesh_; }
  int64_t rank() const { return rank_; }
  const std::vector<int64_t>& coords() const { return coords_; }
  /// Index of axis `name`; -1 when the mesh has none.
  int64_t axisIndex(std::string_view name) const { return mesh_.axisIndex(name); }
  /// The process group of axis `axis` (this rank's slice).
  c10d::Backend& group(int64_t axis) {
    const auto& g = groups_[static_cast<size_t>(axis)];
    if (!g)
      throw std::runtime_error("mesh axis '" + mesh_.axisNames()[static_cast<size_t>(axis)] +
                               "' is the pipeline's microbatch axis: nothing communicates over it");
    return *g;
  }
  /// True when groups are NCCL.
  bool nccl() const { return nccl_; }
  CommStats& stats() { return stats_; }
  /// The exported program's symbols bound from the global inputs of the
  /// step about to run (spmd.global_symbol reads them).
  void setSymbols(std::unordered_map<std::string, int64_t> symbols) { symbols_ = std::move(symbols); }
  /// The value of symbol `name`; nullptr when no input bound it.
  const int64_t* symbol(const std::string& name) const {
    auto it = symbols_.find(name);
    return it == symbols_.end() ? nullptr : &it->second;
  }

  /// An in-flight collective: wait() completes it and yields the result.
  struct Pending {
    c10::intrusive_ptr<c10d::Work> work;
    std::function<at::Tensor()> finish;
  };
  /// Records `p` as producing the tensor `handle` (an spmd.wait on it
  /// completes p).
  void addPending(const at::Tensor& handle, Pending p);
  /// Completes the collective that produced `handle`; returns its result.
  /// A tensor with no pending collective is returned as it is.
  Expected<at::Tensor> wait(const at::Tensor& handle);
  /// Completes every pending collective (end of a run).
  Status waitAll();
  /// Drops this rank's reference to a completed `work` once the backend's
  /// worker thread has dropped its own (Gloo: just after it marks the work
  /// done; waits at most a few milliseconds), so that the buffers the work
  /// holds are freed now, not at some later point of the step (measured
  /// memory: MemoryMeter). Works of NCCL groups are left to failed().
  void release(c10::intrusive_ptr<c10d::Work>& work) const;
  /// Records an issued collective for failed() (NCCL groups only: their
  /// wait() does not block the host, so it cannot report a failure).
  void track(const c10::intrusive_ptr<c10d::Work>& work);
  /// After the device has synchronized: an error naming the first tracked
  /// collective that failed (a timeout or a dead peer, after c10d's watchdog
  /// aborted the communicator), else ok; forgets the tracked ones.
  Status failed();
  /// Forgets what an earlier run left: stats, symbols, pending and tracked
  /// collectives (a communicator kept between runs: ThreadedWorld).
  void beginRun();

 private:
  sharding::Mesh mesh_;
  int64_t rank_ = 0;
  std::vector<int64_t> coords_;
  std::vector<c10::intrusive_ptr<c10d::Backend>> groups_;
  c10::intrusive_ptr<c10d::Backend> pipelineGroup_;
  int64_t microbatchAxis_ = -1;
  int64_t stage_ = 0;
  std::unordered_map<const void*, Pending> pending_;
  std::vector<c10::intrusive_ptr<c10d::Work>> issued_;
  bool nccl_ = false;
  CommStats stats_;
  std::unordered_map<std::string, int64_t> symbols_;
};

/// Makes `comm` the communicator of the collective kernels on this thread
/// for the scope's lifetime.
class CollectiveScope {
 public:
  explicit CollectiveScope(MeshComm* comm);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
  /// The communicator of this thread, or null.
  static MeshComm* current();

 private:
  MeshComm* previous_;
};

}  // namespace spmd::runtime
