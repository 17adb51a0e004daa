// ThreadSanitizer canary: a deliberate data race in spmd code, run with the
// suppressions of scripts/tsan.supp. Its tests pass only when TSan still
// reports the race, so the suppressions (written for races inside
// uninstrumented LibTorch) are shown not to hide races in our own code.
//
//   tsan_canary plain   # two std::threads write one counter
//   tsan_canary torch   # the same, each thread also running LibTorch ops
//                       # between its writes, as a rank thread does
//
// Exit status: 66 (halt_on_error) when TSan reported; 0 when it did not,
// which the test (PASS_REGULAR_EXPRESSION on TSan's report) counts as a
// failure.
#include <ATen/ATen.h>

#include <cstdio>
#include <string>
#include <thread>

namespace spmd::tsan_canary {

// Written without synchronization by two threads: the race.
long counter = 0;

__attribute__((noinline)) void bump() { counter = counter + 1; }

int plain() {
  std::thread a([] {
    for (int i = 0; i < 1000; ++i) bump();
  });
  std::thread b([] {
    for (int i = 0; i < 1000; ++i) bump();
  });
  a.join();
  b.join();
  return 0;
}

int torch() {
  auto rank = [] {
    at::Tensor t = at::zeros({64});
    for (int i = 0; i < 100; ++i) {
      t = t + 1;  // ATen kernels, allocations and frees between the writes
      bump();
    }
    return t.sum().item<float>() == 100.0F * 64 ? 0 : 1;
  };
  int ra = 0, rb = 0;
  std::thread a([&] { ra = rank(); });
  std::thread b([&] { rb = rank(); });
  a.join();
  b.join();
  return ra + rb;
}

}  // namespace spmd::tsan_canary

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "plain") return spmd::tsan_canary::plain();
  if (mode == "torch") return spmd::tsan_canary::torch();
  std::fprintf(stderr, "usage: tsan_canary plain|torch\n");
  return 2;
}
