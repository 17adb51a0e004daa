// The one checksum of the project: XXH3-64 (seed 0) from Debian's
// libxxhash-dev, compiled in (XXH_INLINE_ALL), so no tool needs libxxhash at
// run time. .spmd programs store it per weight blob and for their JSON,
// checkpoints per rank shard.
//
//   checksum("") == 0x2d06800538d394c2, checksumHex(that) == "2d06800538d394c2"
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace spmd {

/// XXH3-64 (seed 0) of `bytes`.
uint64_t checksum(std::span<const std::byte> bytes);
/// checksum() of the characters of `text`.
uint64_t checksum(std::string_view text);
/// `sum` as files store it: 16 lowercase hex digits.
std::string checksumHex(uint64_t sum);
/// Parses what checksumHex() prints; false for anything else.
bool parseChecksumHex(std::string_view text, uint64_t& sum);

}  // namespace spmd
