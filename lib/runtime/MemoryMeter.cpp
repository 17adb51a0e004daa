// The metering CPU allocator and a rank's memory probe (see MemoryMeter.h).
#include "runtime/MemoryMeter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/GatherPool.h"

#ifdef SPMD_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace spmd::runtime {
namespace {

using Counters = MemoryMeter::Counters;

thread_local std::shared_ptr<Counters> activeMeter;

// Which meter each live metered allocation was charged to, by address (the
// DataPtr stays "simple", its context its data, so that raw_allocate, which
// some kernels use, keeps working). Striped locks: ranks allocate at once.
class Charges {
 public:
  void add(void* p, std::shared_ptr<Counters> c, int64_t bytes) {
    Stripe& s = stripe(p);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.live.emplace(p, Charge{std::move(c), bytes});
  }
  void remove(void* p) {
    Stripe& s = stripe(p);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(p);
    if (it == s.live.end()) return;  // allocated with no meter active
    it->second.counters->current.fetch_sub(it->second.bytes);
    s.live.erase(it);
  }

 private:
  struct Charge {
    std::shared_ptr<Counters> counters;
    int64_t bytes = 0;
  };
  struct Stripe {
    std::mutex mutex;
    std::unordered_map<void*, Charge> live;
  };
  static constexpr size_t kStripes = 16;
  Stripe& stripe(void* p) { return stripes_[(reinterpret_cast<uintptr_t>(p) >> 6) % kStripes]; }
  std::array<Stripe, kStripes> stripes_;
};

Charges& charges() {
  static auto* c = new Charges();  // never destroyed: frees may come at exit
  return *c;
}

c10::DeleterFnPtr wrappedDelete = nullptr;  // the wrapped allocator's raw deleter

void release(void* p) {
  charges().remove(p);
  if (!givePooled(p)) wrappedDelete(p);
}

void charge(Counters& c, int64_t bytes) {
  int64_t now = c.current.fetch_add(bytes) + bytes;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}

// c10's CPU allocator (its DataPtrs are simple: context == data, freed by
// its raw deleter), with allocations made under an active meter charged to
// that meter until freed.
class MeteringAllocator final : public c10::Allocator {
 public:
  explicit MeteringAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(size_t n) override {
    // Large buffers from the pool (GatherPool.h): a rank's RSS then stays
    // near its live tensors.
    bool pooled = static_cast<int64_t>(n) >= kMinPooledBytes;
    void* q = pooled ? takePooled(n) : nullptr;
    c10::DataPtr p = q ? c10::DataPtr(q, q, &release, c10::Device(c10::kCPU)) : wrapped_->allocate(n);
    void* data = p.get();
    if (data == nullptr || p.get_context() != data) return p;
    c10::Device device = p.device();
    p.release_context();
    if (const std::shared_ptr<Counters>& meter = activeMeter) {
      charge(*meter, static_cast<int64_t>(n));
      charges().add(data, meter, static_cast<int64_t>(n));
    }
    return {data, data, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* wrapped_;
};

void installOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* cpu = c10::GetCPUAllocator();
    wrappedDelete = cpu->raw_deleter();
    if (wrappedDelete == nullptr) return;  // not a simple allocator: nothing is metered
    // Never freed: tensors of every thread may reach it until exit.
    static auto* metering = new MeteringAllocator(cpu);
    c10::SetCPUAllocator(metering, /*priority=*/100);
  });
}

// A "<key>: <n> kB" line of /proc/self/status in bytes; 0 when absent.
int64_t procStatusBytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (long long kb = 0;
        line.rfind(key + ":", 0) == 0 && std::sscanf(line.c_str() + key.size() + 1, "%lld", &kb) == 1)
      return static_cast<int64_t>(kb) * 1024;
  return 0;
}

}  // namespace

MemoryMeter::MemoryMeter() : counters_(std::make_shared<Counters>()) { installOnce(); }

int64_t MemoryMeter::activeCurrentBytes() { return activeMeter ? activeMeter->current.load() : -1; }
int64_t MemoryMeter::activePeakBytes() { return activeMeter ? activeMeter->peak.load() : -1; }

void MemoryMeter::charge(void* p, int64_t bytes) {
  if (const std::shared_ptr<Counters>& meter = activeMeter) {
    spmd::runtime::charge(*meter, bytes);
    charges().add(p, meter, bytes);
  }
}

void MemoryMeter::release(void* p) { charges().remove(p); }

MemoryMeter::Scope::Scope(MemoryMeter& meter) : previous_(std::move(activeMeter)) {
  activeMeter = meter.counters_;
}

MemoryMeter::Scope::~Scope() { activeMeter = std::move(previous_); }

RankMemoryProbe::RankMemoryProbe(c10::Device device) : device_(device), active_(meter_) {
#ifdef SPMD_TORCH_CUDA
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
  // "5" resets VmHWM to the current RSS (Linux >= 4.0); without it the
  // peak may include what the process held before.
  std::ofstream("/proc/self/clear_refs") << "5";
  rssBase_ = procStatusBytes("VmRSS");
}

void RankMemoryProbe::markState() {
  stateBytes_ = meter_.currentBytes();
#ifdef SPMD_TORCH_CUDA
  if (device_.is_cuda())
    stateBytes_ = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index()).allocated_bytes[0].current;
#endif
}

RankMemory RankMemoryProbe::figures() const {
  RankMemory m;
  m.stateBytes = stateBytes_;
  m.peakBytes = meter_.peakBytes();
  m.rssGrowthBytes = std::max<int64_t>(0, procStatusBytes("VmHWM") - rssBase_);
#ifdef SPMD_TORCH_CUDA
  if (device_.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    m.peakBytes = stats.allocated_bytes[0].peak;
    m.reservedBytes = stats.reserved_bytes[0].peak;
  }
#endif
  return m;
}

}  // namespace spmd::runtime
