// Fuzzes the zip reader: a file -> ZipArchive, then every member read whole
// (the sizes open() accepted are what a caller allocates).
//
//   build-fuzz/fuzz/zip_fuzz corpus/zip   # seeds: testdata/pt2/*/model.pt2
#include <cstdint>
#include <string>

#include "FuzzFile.h"
#include "io/Zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto zip = spmd::io::ZipArchive::open(spmd::fuzz::fuzzFile(data, size, ".zip"));
  if (!zip) return 0;
  for (const std::string& name : (*zip)->names()) {
    auto bytes = (*zip)->size(name);
    if (!bytes) __builtin_trap();  // a listed member must have a size
    (void)(*zip)->readString(name);
  }
  return 0;
}
