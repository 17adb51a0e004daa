// The buffer pool of large CPU allocations (runtime/GatherPool.h): reuse by
// size class, the bound of its own peak, and a miss past the peak served by
// resizing a cached block. Its own executable: the pool is process-wide and
// these figures assume nothing else used it.
//
//   void* p = takePooled(64 << 20);  ...  givePooled(p);  // cached, reused
#include "runtime/GatherPool.h"  // before Catch2: c10's logging defines a CHECK Catch must replace

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "../TestCatch.h"

using spmd::runtime::GatherPoolStats;
using spmd::runtime::gatherPoolStats;
using spmd::runtime::givePooled;
using spmd::runtime::takePooled;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Live + cached never exceed the most bytes the pool had live at once.
void checkBound() {
  GatherPoolStats s = gatherPoolStats();
  CHECK(s.liveBytes + s.cachedBytes <= s.peakLiveBytes);
}

void* touched(size_t bytes) {
  void* p = takePooled(bytes);
  REQUIRE(p != nullptr);
  std::memset(p, 0x5a, bytes);  // every page usable
  return p;
}

}  // namespace

// One case, in order: the pool's state carries from each step to the next.
TEST_CASE("the pool reuses by size class and stays within its peak", "[runtime][pool]") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  REQUIRE(gatherPoolStats().peakLiveBytes == 0);  // a fresh pool (this test's own process)

  // Reuse: a block of up to 1.25x the size asked, the smallest that fits.
  void* a = touched(8 * kMiB);
  CHECK(givePooled(a));
  CHECK_FALSE(givePooled(a));              // not live any more: not the pool's to take back
  void* b = touched(8 * kMiB - 3 * page);  // a few pages smaller: the same block
  CHECK(b == a);
  void* c = touched(6 * kMiB);  // none cached: a new block, within the new peak of 14 MiB
  CHECK(c != a);
  CHECK(givePooled(b));
  CHECK(givePooled(c));
  void* d = touched(6 * kMiB);  // the 6 MiB block; 8 MiB is over 1.25x
  CHECK(d == c);
  CHECK(givePooled(d));
  GatherPoolStats s = gatherPoolStats();
  CHECK(s.maps == 2);
  CHECK(s.reuses == 2);
  CHECK(s.remaps == 0);
  CHECK(s.liveBytes == 0);
  CHECK(s.cachedBytes == static_cast<int64_t>(14 * kMiB));
  CHECK(s.peakLiveBytes == static_cast<int64_t>(14 * kMiB));
  checkBound();

  // Past the peak: the cached block nearest in size is resized (mremap, not
  // a new mapping) and the others unmapped until live + cached fit the peak.
  void* big = touched(32 * kMiB);  // 14 cached + 32 > the new peak of 32
  s = gatherPoolStats();
  CHECK(s.remaps == 1);  // the 8 MiB block
  CHECK(s.maps == 2);
  CHECK(s.cachedBytes == 0);  // the 6 MiB block unmapped
  CHECK(s.peakLiveBytes == static_cast<int64_t>(32 * kMiB));
  checkBound();
  CHECK(givePooled(big));
  void* again = touched(30 * kMiB);  // within 1.25x: the resized block
  CHECK(again == big);
  CHECK(gatherPoolStats().reuses == 3);
  CHECK(givePooled(again));
  checkBound();

  int local = 0;
  CHECK_FALSE(givePooled(&local));  // a pointer the pool did not hand out
}
