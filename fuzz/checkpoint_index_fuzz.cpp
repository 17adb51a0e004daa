// Fuzzes the checkpoint index parser (index.json of a sharded checkpoint):
// parse and verify, then format what was accepted and parse it again.
//
//   build-fuzz/fuzz/checkpoint_index_fuzz corpus/checkpoint_index
#include <cstdint>
#include <string>

#include "runtime/CheckpointIndex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto index = spmd::runtime::parseCheckpointIndex(text, "index.json");
  if (!index) return 0;
  // What the writer prints of an accepted index must read back.
  if (!spmd::runtime::parseCheckpointIndex(spmd::runtime::formatCheckpointIndex(*index), "index.json"))
    __builtin_trap();
  return 0;
}
