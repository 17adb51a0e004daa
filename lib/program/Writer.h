// Writing .spmd files: the program JSON and the sharded weights.
//
//   mesh 2x4 (dp, tp), weight fc1.weight f32[256, 64] spec [R, S(0)]
//   -> 4 blobs, index [-1, 0] .. [-1, 3], each f32[64, 64] (16384 bytes):
//      the dp axis replicates, so its ranks share the blobs; rank 5
//      (coords [1, 1]) reads blob [-1, 1].
//   SPMD_RETURN_IF_ERROR(writeProgram("mlp.spmd", program, source));
//
// The file is written to a temporary beside `path` and renamed into place,
// so a failed write leaves nothing behind and readers never see half a
// file. Identical programs and bytes give byte-identical files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "program/Program.h"
#include "program/WeightSource.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::program {

/// One distinct shard of a weight: its ShardBlob index and the per-dim
/// (offset, size) of the global tensor it holds.
struct ShardPlan {
  /// Chunk index per mesh axis; -1 where the weight is not sharded.
  std::vector<int64_t> index;
  std::vector<sharding::Chunk> chunks;
};

/// The distinct shards of a weight of `globalShape` laid out by `spec`
/// (one placement per mesh axis) over `mesh`, ordered row-major by index.
/// A replicated weight has one shard. Error for Partial placements and for
/// specs that do not fit the tensor or the mesh.
Expected<std::vector<ShardPlan>> planShards(const std::vector<int64_t>& globalShape,
                                            const sharding::ShardingSpec& spec, const sharding::Mesh& mesh);

/// Calls `run(offset, bytes)` for each contiguous run of the block `chunks`
/// (per-dim offset and size) of a row-major tensor of `shape` with
/// `elemSize`-byte elements, in the block's row-major order; offsets count
/// bytes from the tensor's start. A whole tensor is one run; a row shard
/// one; a column shard of [R, C] R runs.
void forEachRun(const std::vector<int64_t>& shape, int64_t elemSize,
                const std::vector<sharding::Chunk>& chunks,
                const std::function<void(uint64_t offset, uint64_t bytes)>& run);

/// Copies the block `chunks` (per-dim offset and size) of the row-major
/// tensor `global` of `shape` with `elemSize`-byte elements into `out`, row
/// major. `out` must hold the block's bytes; `global` must hold the tensor.
void sliceRowMajor(std::span<const std::byte> global, const std::vector<int64_t>& shape, int64_t elemSize,
                   const std::vector<sharding::Chunk>& chunks, std::byte* out);

/// Writes `program` to `path` (format kFormatVersion.formatMinorFor),
/// slicing each weight's global bytes from `source` into its distinct
/// shards (a weight with a `source` has none: its bytes stay in the
/// checkpoint, and recordSources fills its integrity record first). Sets
/// the program's format version, fills every WeightEntry's
/// `shards` (with their checksums) and, when empty, its `localShape` (rank
/// 0's shard). Errors start with `path`: unknown dtype, Partial spec, a
/// given localShape that is not rank 0's, anything else verifyProgram
/// refuses (the reader would), source bytes missing or of the wrong size,
/// I/O.
Status writeProgram(const std::string& path, Program& program, const WeightSource& source);

}  // namespace spmd::program
