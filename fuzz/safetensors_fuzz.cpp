// Fuzzes the safetensors reader: a file -> SafetensorsFile, then every byte
// of every tensor is read (ASan catches a pointer past the map).
//
//   build-fuzz/fuzz/safetensors_fuzz corpus/safetensors   # seeds: testdata/pt2/*/*.safetensors
#include <cstdint>

#include "FuzzFile.h"
#include "io/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = spmd::io::SafetensorsFile::open(spmd::fuzz::fuzzFile(data, size, ".safetensors"));
  if (!file) return 0;
  volatile uint8_t sum = 0;
  for (const spmd::io::SafetensorsEntry& e : file->entries()) {
    const auto* bytes = static_cast<const uint8_t*>(e.data);
    for (uint64_t i = 0; i < e.bytes; ++i) sum = sum + bytes[i];
  }
  return 0;
}
