// Large CPU buffers from a pool of mmapped blocks reused by exact size: the
// buffers all-gathers write into, Gloo's staging copies, and under a
// forward-only program every allocation of 1 MiB or more. glibc's malloc
// raises its mmap threshold after the first large free, so such buffers
// came from the heap, whose freed pages stay resident: a rank's RSS grew to
// 1.5-1.7x its live tensors (1.13x with the pool). The pool never holds more
// than the most bytes it ever had live at once, and a steady step reuses its
// blocks without a page fault (DECISIONS.md, "Large CPU buffers from a pool
// of mapped blocks, chosen per program").
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
  int64_t reuses = 0;         ///< allocations served from the cache
};
GatherPoolStats gatherPoolStats();

/// For the metering CPU allocator (MemoryMeter.cpp): a pooled block of at
/// least `bytes` (throws std::bad_alloc), and returning one (false when `p`
/// is not the pool's).
void* takePooled(size_t bytes);
bool givePooled(void* p);

/// The policy, chosen per program at worker start-up (DECISIONS.md): on,
/// every CPU allocation of at least kMinPooledBytes comes from the pool (a
/// forward-only program: its gathered weights and temporaries stay within
/// its peak); off (the default), only gather buffers and the large buffers
/// of threads no MemoryMeter watches (Gloo's staging copies) do, so that a
/// train step's activations keep malloc's reuse.
void poolEveryLargeBuffer(bool on);
bool poolsEveryLargeBuffer();

}  // namespace spmd::runtime
