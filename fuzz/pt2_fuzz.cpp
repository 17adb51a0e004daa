// Fuzzes the .pt2 reader end to end: zip layout, model JSON -> IR, payload
// configs and weight bytes.
//
//   build-fuzz/fuzz/pt2_fuzz corpus/pt2   # seeds: testdata/pt2/*/model.pt2
#include <cstdint>

#include "FuzzFile.h"
#include "pt2/Archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)spmd::pt2::readArchive(spmd::fuzz::fuzzFile(data, size, ".pt2"));
  return 0;
}
