// Fuzzes the .spmd program JSON and its verifier alone (the file's checksum
// would stop most mutations of a whole .spmd before the JSON is parsed).
//
//   build-fuzz/fuzz/program_json_fuzz corpus/program_json   # seeds: the JSON of .spmd files
#include <cstdint>
#include <string_view>

#include "program/ProgramJson.h"
#include "program/Verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto program = spmd::program::programFromJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!program) return 0;
  (void)spmd::program::verifyProgram(*program, uint64_t{1} << 20);
  return 0;
}
