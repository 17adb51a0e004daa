// The verifier of programs read from a file: what every later stage may
// take for granted once it passes.
//
//   mesh 2 (x), weight w f32[8, 6] [S(0)] local [4, 6], blobs [0] at 0 (96
//   bytes), [1] at 64 (96 bytes)
//   -> "weight 'w' blob [0]: bytes [0, 96) overlap weight 'w' blob [1]: bytes [64, 160)"
//
// Checked: the mesh has 1..kMaxRanks ranks; every weight's FQN is unique,
// its global shape non-negative with a byte size in int64 range, its local
// shape rank 0's shard, its blobs those its spec plans (count, index,
// bytes), 64-byte aligned, inside the data section and pairwise disjoint
// (also across weights); every tensor value of the graph and every
// boundary type has non-negative static sizes whose byte size fits int64;
// a weight read by the graph has the graph input's dtype and static sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::program {

/// Checks `program` (as read from a file whose data section holds
/// `dataSize` bytes) against the invariants above. The error is one line
/// naming the weight, blob or value and what is wrong; the file is then
/// damaged or was not written by spmdc.
Status verifyProgram(const Program& program, uint64_t dataSize);

}  // namespace spmd::program
