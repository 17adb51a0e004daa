// The buffer pool (see GatherPool.h): blocks mmapped by whole pages, kept
// by size when freed. A request no cached block fits maps a new block after
// unmapping cached ones (oldest first) until live + cached + the new block
// fit within the most gather bytes ever live at once.
#include "runtime/GatherPool.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
    auto it = std::find_if(cached_.begin(), cached_.end(), [&](const Block& b) { return b.bytes == bytes; });
    if (it != cached_.end()) {
      p = it->data;
      cached_.erase(it);
      stats_.cachedBytes -= static_cast<int64_t>(bytes);
      stats_.reuses += 1;
    } else {
      auto b = static_cast<int64_t>(bytes);
      stats_.peakLiveBytes = std::max(stats_.peakLiveBytes, stats_.liveBytes + b);
      while (!cached_.empty() && stats_.liveBytes + stats_.cachedBytes + b > stats_.peakLiveBytes) {
        ::munmap(cached_.front().data, cached_.front().bytes);
        stats_.cachedBytes -= static_cast<int64_t>(cached_.front().bytes);
        cached_.pop_front();
      }
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      stats_.maps += 1;
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

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
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

namespace {
std::atomic<bool> everyLarge{false};
}  // namespace

void poolEveryLargeBuffer(bool on) { everyLarge.store(on); }
bool poolsEveryLargeBuffer() { return everyLarge.load(); }

GatherPoolStats gatherPoolStats() { return pool().stats(); }

}  // namespace spmd::runtime
