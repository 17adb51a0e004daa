// The .spmd container layout (format 2.x), shared by the writer and reader.
//
//   offset 0   "SPMDPROG"                 8-byte magic
//   offset 8   u32 major, u32 minor       little-endian format version
//   offset 16  u64 json length            little-endian
//   offset 24  u64 json checksum          little-endian XXH3-64 of the JSON bytes
//   offset 32  the program JSON           (schemas/program.schema.json)
//   ...        zero padding               to a multiple of 64
//   data start the data section           weight blobs, each 64-byte aligned
//
// A blob's "offset" in the JSON counts from the data section's start, so a
// file with a 100-byte JSON has its data section at 192 and a blob at
// offset 64 lies at file offset 256. Every blob carries its own XXH3-64
// ("xxh3" in the JSON, 16 hex digits), checked before its bytes are used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "support/Checksum.h"  // the format's checksum: spmd::checksum (XXH3-64)

namespace spmd::program {

/// The 8 bytes every .spmd file starts with.
inline constexpr std::string_view kMagic = "SPMDPROG";
/// Bytes before the JSON: magic, major, minor, JSON length, JSON checksum.
inline constexpr uint64_t kHeaderSize = 32;
/// Alignment of the data section and of every blob in it.
inline constexpr uint64_t kAlignment = 64;
/// Most ranks a program's mesh may have (a reader refuses larger meshes
/// before anything iterates ranks or shards).
inline constexpr int64_t kMaxRanks = 65536;

/// `n` rounded up to a multiple of kAlignment.
constexpr uint64_t alignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

/// File offset of the data section for a JSON of `jsonLength` bytes.
constexpr uint64_t dataSectionOffset(uint64_t jsonLength) { return alignUp(kHeaderSize + jsonLength); }

}  // namespace spmd::program
