// Fuzzes the .spmd program reader end to end: header, checksummed JSON,
// verifier, then every blob of every weight for every rank.
//
//   build-fuzz/fuzz/program_fuzz corpus/program   # seeds: .spmd files compiled by spmdc
#include <cstdint>

#include "FuzzFile.h"
#include "program/Reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto loaded = spmd::program::readProgram(spmd::fuzz::fuzzFile(data, size, ".spmd"));
  if (!loaded) return 0;
  const spmd::program::Program& p = loaded->program();
  for (const spmd::program::WeightEntry& w : p.weights)
    for (int64_t rank = 0; rank < p.mesh.numRanks() && rank < 64; ++rank) (void)loaded->shardFor(w, rank);
  return 0;
}
