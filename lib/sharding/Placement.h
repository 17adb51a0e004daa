// Placements and meshes, with PyTorch DTensor's meaning.
//
//   Mesh mesh = *Mesh::create({2, 4}, {"dp", "tp"});
//   ShardingSpec s = {{Placement::shard(0), Placement::replicate()}};
//   s.str() == "[S(0), R]"
//   localShape({64, 128}, s, mesh) == {32, 128}
//
// S(d) splits tensor dim d over a mesh axis with torch.chunk semantics, R is
// a full copy, P(op) a pending reduction (sum, avg, max, min).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/Status.h"

namespace spmd::sharding {

/// The pending reduction of a Partial placement.
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };
/// "sum", "avg", "max" or "min".
std::string_view reduceOpName(ReduceOp op);

/// How a tensor is laid out along one mesh axis.
struct Placement {
  enum class Kind : uint8_t { Replicate, Shard, Partial };
  Kind kind = Kind::Replicate;
  /// Tensor dim for Shard (normalized to >= 0 once the rank is known).
  int64_t dim = 0;
  /// The pending reduction for Partial (Sum otherwise).
  ReduceOp reduce = ReduceOp::Sum;
  /// Shard only: a strided shard (DTensor's _StridedShard). The dim is
  /// viewed as [splitFactor, size / splitFactor] and the inner part is split;
  /// a rank holds, for each of the splitFactor outer rows, its chunk of the
  /// inner part. It arises when a view merges a sharded dim into a minor
  /// position (flattening [B, H] with H sharded). 1 = plain shard.
  int64_t splitFactor = 1;

  /// R: a full copy on every rank of the axis.
  static Placement replicate() { return {}; }
  /// S(d): tensor dim d split over the axis with torch.chunk semantics.
  static Placement shard(int64_t d) { return {Kind::Shard, d, ReduceOp::Sum, 1}; }
  /// S(d, sf): a strided shard of dim d (see splitFactor).
  static Placement stridedShard(int64_t d, int64_t splitFactor) {
    return {Kind::Shard, d, ReduceOp::Sum, splitFactor};
  }
  /// P(op): the value is the `op`-reduction of the ranks' local tensors.
  static Placement partial(ReduceOp op = ReduceOp::Sum) { return {Kind::Partial, 0, op, 1}; }
  /// True for a shard with splitFactor != 1.
  bool isStrided() const { return kind == Kind::Shard && splitFactor != 1; }
  /// Kind tests; isShard(d) also checks the dim.
  bool isReplicate() const { return kind == Kind::Replicate; }
  bool isShard() const { return kind == Kind::Shard; }
  bool isShard(int64_t d) const { return kind == Kind::Shard && dim == d; }
  bool isPartial() const { return kind == Kind::Partial; }
  /// "R", "S(0)", "S(0,sf=2)", "P(sum)".
  std::string str() const;
  /// One integer per placement (equal placements, equal keys), for memo
  /// keys: dims in [-64, 4031], split factors below 2^44.
  uint64_t key() const {
    return static_cast<uint64_t>(kind) | (static_cast<uint64_t>(reduce) << 2) |
           (static_cast<uint64_t>(dim + 64) << 8) | (static_cast<uint64_t>(splitFactor) << 20);
  }
  bool operator==(const Placement&) const = default;
};

/// Parses "R", "S(d)" (d may be negative), "P", "P(sum|avg|max|min)".
Expected<Placement> parsePlacement(std::string_view text);

/// A device mesh: shape and axis names (row-major rank order).
class Mesh {
 public:
  Mesh() = default;
  /// Error when sizes are < 1, names repeat, or counts differ. Empty names
  /// give "x" for a 1-D mesh and "d0", "d1", ... otherwise.
  static Expected<Mesh> create(std::vector<int64_t> shape, std::vector<std::string> axisNames = {});
  /// Parses "8", "2x4" or "2x2x2" (whitespace around numbers allowed); error
  /// for empty parts, non-numbers and sizes < 1.
  static Expected<std::vector<int64_t>> parseShape(std::string_view text);
  /// The form parseShape reads and --mesh takes: "8", "2x4". A mesh's
  /// shape is written so everywhere; a tensor's is formatShape's "[2, 4]".
  static std::string formatShape(std::span<const int64_t> shape);

  /// Axis sizes, outermost first.
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Axis names, one per axis.
  const std::vector<std::string>& axisNames() const { return names_; }
  /// Number of mesh axes.
  int64_t numAxes() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of mesh axis `axis` (0 <= axis < numAxes()).
  int64_t size(int64_t axis) const { return shape_[static_cast<size_t>(axis)]; }
  /// Total number of ranks.
  int64_t numRanks() const;
  /// Index of axis `name`, or -1.
  int64_t axisIndex(std::string_view name) const;
  /// Coordinates of `rank` (row-major: the last axis varies fastest).
  std::vector<int64_t> coords(int64_t rank) const;
  /// Rank at `coords`; the inverse of coords().
  int64_t rankAt(const std::vector<int64_t>& coords) const;
  /// "2x4 (dp, tp)".
  std::string str() const;
  bool operator==(const Mesh&) const = default;

 private:
  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
};

/// Placements of one tensor, one per mesh axis.
struct ShardingSpec {
  /// placements[a] is the placement along mesh axis a.
  std::vector<Placement> placements;

  /// All replicated on `numAxes` axes.
  static ShardingSpec replicated(int64_t numAxes) {
    return {std::vector<Placement>(static_cast<size_t>(numAxes))};
  }
  /// True when every placement is R (also for an empty spec).
  bool isReplicated() const;
  /// True when some placement is P.
  bool hasPartial() const;
  /// True when some placement is S(d) for this (normalized) dim.
  bool shardsDim(int64_t d) const;
  /// "[S(0), R]".
  std::string str() const;
  /// Parses what str() prints ("[S(0,sf=2), R]"); error names the text.
  static Expected<ShardingSpec> parse(std::string_view text);
  bool operator==(const ShardingSpec&) const = default;
};

/// The indices of one dim that a shard holds: `size` indices in `blocks`
/// equal runs, run b starting at offset + b * blockStride (a strided shard
/// S(d, sf) holds sf runs; a plain one, one run). chunkOf() gives the
/// torch.chunk split of one run (chunk = ceil(size/parts); trailing chunks
/// may be short or empty).
struct Chunk {
  int64_t offset = 0;
  int64_t size = 0;
  int64_t blocks = 1;
  int64_t blockStride = 0;
  bool operator==(const Chunk&) const = default;
  /// Length of one run.
  int64_t blockSize() const { return blocks > 0 ? size / blocks : 0; }
};
/// Chunk `index` of `size` split in `parts`: e.g. 5 in 4 gives sizes 2,2,1,0.
Chunk chunkOf(int64_t size, int64_t parts, int64_t index);

/// Checks that `spec` has one placement per mesh axis and that every S(d)
/// names a dim of a rank-`rank` tensor; returns it with negative dims made
/// non-negative (S(-1) -> S(rank-1)).
Expected<ShardingSpec> normalizeSpec(const ShardingSpec& spec, int64_t rank, const Mesh& mesh);

/// Local shape on a rank at mesh coordinates `coords` (uneven splits follow
/// torch.chunk). Axes that shard the same dim split it in axis order: the
/// earlier axis splits first, the later one splits that chunk (DTensor).
/// `spec` must fit the mesh and the tensor (see normalizeSpec); negative
/// shard dims are accepted.
std::vector<int64_t> localShape(const std::vector<int64_t>& global, const ShardingSpec& spec,
                                const Mesh& mesh, const std::vector<int64_t>& coords);
/// Per-dim indices of the local shard at `coords`. A strided S(d, sf) views
/// what the earlier axes left of dim d as [sf, rest] and splits rest; a later
/// plain split of those sf runs takes whole runs or a piece of one run
/// (checkShardable refuses the rest).
std::vector<Chunk> localChunks(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh,
                               const std::vector<int64_t>& coords);
/// Error naming dim, size and axis when some Shard does not divide evenly
/// (for nested shards: the chunk left by the earlier axes must divide too;
/// a strided shard splits only a dim no earlier axis made strided, and a
/// later split of strided runs takes whole runs or pieces of one).
Status checkEvenlyDivisible(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh);
/// Error when `spec` cannot lay out a tensor of `global` at all: plain
/// shards split at any size (torch.chunk: trailing ranks may hold fewer rows
/// or none), but a strided shard, or a later split of strided runs, must
/// divide evenly (the message names dim, size and axis).
Status checkShardable(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh);
/// True when some shard of `spec` does not divide evenly (ranks differ in size).
bool isUneven(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh);
/// Elements of padding when every rank's shard is padded to the largest
/// (rank 0's), as collectives over uneven shards do: the sum over ranks of
/// the largest local numel minus the rank's. 0 for even layouts.
int64_t paddingElements(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh);
/// Product of the sizes of the mesh axes that shard dim `dim` (1: none).
int64_t shardCount(const ShardingSpec& spec, int64_t dim, const Mesh& mesh);
/// The local shape at `coords` when only the axes before `axis` have split
/// the tensor: the piece that axis `axis` and the later ones divide.
std::vector<int64_t> pieceBefore(const std::vector<int64_t>& global, const ShardingSpec& spec,
                                 const Mesh& mesh, const std::vector<int64_t>& coords, int64_t axis);

}  // namespace spmd::sharding
