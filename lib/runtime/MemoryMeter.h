// Live tensor bytes of one rank, as the allocator sees them: a wrapper
// around c10's CPU allocator (installed once) charges each allocation to
// the meter active on the allocating thread, and its free to that same
// meter, whichever thread frees it. On a GPU the caching allocator's own
// statistics say the same. The resident-set growth is kept beside it: it
// also counts allocator caches and library state.
//
//   MemoryMeter meter;
//   {
//     MemoryMeter::Scope active(meter);      // this thread's CPU allocations
//     at::Tensor t = at::empty({1024});      // meter.currentBytes() == 4096
//   }
//   meter.peakBytes();                       // 4096, also after `t` is freed
//
// runThreaded's ranks are threads of one process: each rank's thread has
// its own active meter, so each rank measures its own tensors.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace spmd::runtime {

/// Live and peak bytes of the CPU tensors allocated while this meter was
/// active on the allocating thread. Thread-safe.
class MemoryMeter {
 public:
  /// Installs the metering CPU allocator (first call; later calls do nothing).
  MemoryMeter();

  /// Bytes allocated under this meter and not yet freed.
  int64_t currentBytes() const { return counters_->current.load(); }
  /// The most currentBytes() has been since construction or resetPeak().
  int64_t peakBytes() const { return counters_->peak.load(); }
  /// Starts a new peak at the current bytes.
  void resetPeak() { counters_->peak.store(counters_->current.load()); }
  /// currentBytes() and peakBytes() of the calling thread's active meter;
  /// -1 without one.
  static int64_t activeCurrentBytes();
  static int64_t activePeakBytes();
  /// For allocators of their own (the gather pool): charges `bytes` at `p`
  /// to the calling thread's active meter, if any, until release(p).
  static void charge(void* p, int64_t bytes);
  static void release(void* p);

  /// Shared with every allocation it counts (they may outlive the meter).
  struct Counters {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
  };

  /// Makes `meter` the calling thread's active meter until destroyed (the
  /// previous one, if any, is active again afterwards).
  class Scope {
   public:
    explicit Scope(MemoryMeter& meter);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<Counters> previous_;
  };

 private:
  std::shared_ptr<Counters> counters_;
};

/// One rank's measured memory (bytes). On the CPU from MemoryMeter; on a GPU
/// from the caching allocator of the rank's device.
struct RankMemory {
  /// Live tensor bytes once the weights, optimizer states and input batches
  /// are loaded, before the first step.
  int64_t stateBytes = 0;
  /// Peak live tensor bytes from loading to the end of the last step
  /// (gathering outputs to rank 0 afterwards is not counted).
  int64_t peakBytes = 0;
  /// Growth of the process's peak resident set over the run (VmHWM over the
  /// RSS before loading): allocator caches, library state and, under
  /// runThreaded, every rank's memory. 0 when unknown.
  int64_t rssGrowthBytes = 0;
  /// GPU: the caching allocator's peak reserved bytes; 0 on the CPU.
  int64_t reservedBytes = 0;
};

/// Measures one rank from construction (just before its weights load):
/// activates a MemoryMeter on the calling thread for the probe's lifetime.
class RankMemoryProbe {
 public:
  explicit RankMemoryProbe(c10::Device device);
  /// Records RankMemory::stateBytes (call once everything is loaded).
  void markState();
  /// The figures so far.
  RankMemory figures() const;

 private:
  c10::Device device_;
  MemoryMeter meter_;
  MemoryMeter::Scope active_;
  int64_t rssBase_ = 0;
  int64_t stateBytes_ = 0;
};

}  // namespace spmd::runtime
