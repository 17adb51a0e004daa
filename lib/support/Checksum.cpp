// XXH3-64 checksums (see Checksum.h).
#include "support/Checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace spmd {

uint64_t checksum(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

uint64_t checksum(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

std::string checksumHex(uint64_t sum) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, sum >>= 4) out[static_cast<size_t>(i)] = kDigits[sum & 0xf];
  return out;
}

bool parseChecksumHex(std::string_view text, uint64_t& sum) {
  if (text.size() != 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  sum = v;
  return true;
}

}  // namespace spmd
