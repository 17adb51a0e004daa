// Fuzzes the pickle reader and the DCP metadata layer on top of it (a DCP
// checkpoint's .metadata): read, and when it reads, write it again and read
// that back equal; interpret it as DCP metadata, and when that is accepted,
// format it and parse the result again.
//
//   build-fuzz/fuzz/dcp_metadata_fuzz corpus/dcp_metadata
#include <cstdint>
#include <string>

#include "io/Pickle.h"
#include "runtime/DcpMetadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto value = spmd::io::readPickle(bytes, ".metadata");
  if (value) {
    auto written = spmd::io::writePickle(**value);  // may refuse a cyclic tree
    if (written) {
      auto again = spmd::io::readPickle(*written, "again");
      if (!again || !spmd::io::samePyValue(**value, **again)) __builtin_trap();
    }
  }
  auto md = spmd::runtime::parseDcpMetadata(bytes, ".metadata");
  if (!md) return 0;
  auto text = spmd::runtime::formatDcpMetadata(*md);
  if (!text || !spmd::runtime::parseDcpMetadata(*text, "again")) __builtin_trap();
  return 0;
}
