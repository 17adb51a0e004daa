// Large CPU buffers from a pool of mmapped blocks: every CPU allocation of
// 1 MiB or more (gathered weights, activations, gradients, Gloo's staging
// copies). glibc's malloc raises its mmap threshold after the first large
// free, so such buffers came from the heap, whose freed pages stay
// resident: a rank's RSS grew to 1.5-1.7x its live tensors (forward and
// train steps alike; about 1.1x with the pool). A request takes the
// smallest cached block of its size up to 1.25x; the pool never holds more
// than the most bytes it ever had live at once, and a miss past that peak
// resizes a cached block (mremap: its pages stay resident) rather than
// faulting in a new one (DECISIONS.md, "Large CPU buffers from a pool of
// mapped blocks").
//
//   at::Tensor buf = emptyGatherBuffer({4, 1024, 2048}, x.options());
//   ...                                   // freed: its block goes back to the pool
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace spmd::runtime {

/// An uninitialized contiguous tensor of `shape` and `options`' dtype: a
/// CPU tensor of at least kMinPooledBytes takes its storage from the
/// process's gather pool (charged to the calling thread's MemoryMeter like
/// any CPU allocation); any other is at::empty's. Thread-safe.
at::Tensor emptyGatherBuffer(at::IntArrayRef shape, const at::TensorOptions& options);

/// Smaller buffers come from malloc: a block costs at least a page and a mapping.
constexpr int64_t kMinPooledBytes = int64_t{1} << 20;

/// The pool's counters (bytes are whole pages).
struct GatherPoolStats {
  int64_t liveBytes = 0;      ///< in tensors now
  int64_t cachedBytes = 0;    ///< freed, kept mapped for reuse
  int64_t peakLiveBytes = 0;  ///< the most liveBytes has been; live + cached never exceed it
  int64_t maps = 0;           ///< blocks mapped
  int64_t remaps = 0;         ///< cached blocks resized (mremap) for a request none fitted
  int64_t reuses = 0;         ///< allocations served from the cache
};
GatherPoolStats gatherPoolStats();

/// Unmaps every cached (freed) block: the process's resident memory falls
/// to its live tensors. For the end of a run, when no step reuses them.
/// Returns the bytes released.
int64_t releaseCachedGatherBlocks();

/// For the metering CPU allocator (MemoryMeter.cpp): a pooled block of at
/// least `bytes` (throws std::bad_alloc), and returning one (false when `p`
/// is not the pool's).
void* takePooled(size_t bytes);
bool givePooled(void* p);

}  // namespace spmd::runtime
