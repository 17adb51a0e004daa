// Fuzzes the .pt2 model JSON -> IR step alone (no zip around it, so the
// fuzzer's mutations reach the graph builder).
//
//   build-fuzz/fuzz/pt2_json_fuzz corpus/pt2_json   # seeds: models/model.json of testdata/pt2
#include <cstdint>
#include <string_view>

#include "serialize/FromExportJson.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)spmd::serialize::parseExportedProgram(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
