// The buffer pool (see GatherPool.h): blocks mmapped by whole pages, kept
// when freed. A request takes the smallest cached block of its size up to
// 1.25x; else a new block, made (past the pool's peak) by resizing the
// cached block nearest in size and unmapping the oldest others until live +
// cached + the new block fit within the most bytes ever live at once.
#include "runtime/GatherPool.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>

#include "runtime/MemoryMeter.h"

namespace spmd::runtime {
namespace {

class Pool {
 public:
  void* take(size_t want) {
    size_t bytes = roundUp(want);
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    auto it = closest(bytes, bytes + bytes / kFitSlack);
    if (it != cached_.end()) {
      p = it->data;
      bytes = it->bytes;
      cached_.erase(it);
      stats_.cachedBytes -= static_cast<int64_t>(bytes);
      stats_.reuses += 1;
    } else {
      p = fresh(bytes);
    }
    live_.emplace(p, bytes);
    stats_.liveBytes += static_cast<int64_t>(bytes);
    return p;
  }

  bool give(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    cached_.push_back({p, it->second});
    stats_.liveBytes -= static_cast<int64_t>(it->second);
    stats_.cachedBytes += static_cast<int64_t>(it->second);
    live_.erase(it);
    return true;
  }

  GatherPoolStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  int64_t releaseCached() {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t released = stats_.cachedBytes;
    for (const Block& b : cached_) ::munmap(b.data, b.bytes);
    cached_.clear();
    stats_.cachedBytes = 0;
    return released;
  }

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
  // A cached block up to 1/kFitSlack larger than asked serves the request
  // as it is (its extra pages are already resident, like malloc's slack).
  static constexpr size_t kFitSlack = 4;

  // The smallest cached block of lo..hi bytes (cached_.end() when none).
  std::list<Block>::iterator closest(size_t lo, size_t hi) {
    auto best = cached_.end();
    for (auto c = cached_.begin(); c != cached_.end(); ++c)
      if (c->bytes >= lo && c->bytes <= hi && (best == cached_.end() || c->bytes < best->bytes)) best = c;
    return best;
  }

  // A block no cached one fits. Within the pool's peak a new mapping; past
  // it, the cached block nearest in size is resized (mremap keeps its
  // resident pages: no page faults but for growth) and the oldest others
  // unmapped until live + cached + the block fit within the peak.
  void* fresh(size_t bytes) {
    auto b = static_cast<int64_t>(bytes);
    stats_.peakLiveBytes = std::max(stats_.peakLiveBytes, stats_.liveBytes + b);
    void* p = nullptr;
    if (!cached_.empty() && stats_.liveBytes + stats_.cachedBytes + b > stats_.peakLiveBytes) {
      auto near = std::min_element(cached_.begin(), cached_.end(), [&](const Block& x, const Block& y) {
        return distance(x.bytes, bytes) < distance(y.bytes, bytes);
      });
      Block reuse = *near;
      cached_.erase(near);
      stats_.cachedBytes -= static_cast<int64_t>(reuse.bytes);
      p = ::mremap(reuse.data, reuse.bytes, bytes, MREMAP_MAYMOVE);
      if (p == MAP_FAILED) {
        ::munmap(reuse.data, reuse.bytes);
        p = nullptr;
      } else {
        stats_.remaps += 1;
      }
    }
    while (!cached_.empty() && stats_.liveBytes + stats_.cachedBytes + b > stats_.peakLiveBytes) {
      ::munmap(cached_.front().data, cached_.front().bytes);
      stats_.cachedBytes -= static_cast<int64_t>(cached_.front().bytes);
      cached_.pop_front();
    }
    if (p != nullptr) return p;
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    stats_.maps += 1;
    return p;
  }

  static size_t distance(size_t a, size_t b) { return a > b ? a - b : b - a; }
  static size_t roundUp(size_t n) {
    static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(n, 1) + page - 1) / page * page;
  }
  std::mutex mutex_;
  std::list<Block> cached_;  // oldest first
  std::unordered_map<void*, size_t> live_;
  GatherPoolStats stats_;
};

Pool& pool() {
  static auto* p = new Pool();  // never destroyed: tensors may be freed at exit
  return *p;
}

void releaseBlock(void* p) {
  MemoryMeter::release(p);
  pool().give(p);
}

// The pool as a c10 allocator: its DataPtrs are simple (context == data).
class PoolAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = pool().take(n);
    MemoryMeter::charge(p, static_cast<int64_t>(n));
    return {p, p, &releaseBlock, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &releaseBlock; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

at::Tensor emptyGatherBuffer(at::IntArrayRef shape, const at::TensorOptions& options) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(options.dtype().toScalarType()));
  if (!options.device().is_cpu() || bytes < kMinPooledBytes) return at::empty(shape, options);
  static auto* allocator = new PoolAllocator();
  return at::detail::empty_generic(shape, allocator, c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   options.dtype().toScalarType(), std::nullopt);
}

void* takePooled(size_t bytes) { return pool().take(bytes); }
bool givePooled(void* p) { return pool().give(p); }

GatherPoolStats gatherPoolStats() { return pool().stats(); }

int64_t releaseCachedGatherBlocks() { return pool().releaseCached(); }

}  // namespace spmd::runtime
