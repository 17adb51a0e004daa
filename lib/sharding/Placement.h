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
#include <string>
#include <string_view>
#include <vector>

#include "support/Status.h"

namespace spmd::sharding {

/// The pending reduction of a Partial placement.
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };
std::string_view reduceOpName(ReduceOp op);

/// How a tensor is laid out along one mesh axis.
struct Placement {
  enum class Kind : uint8_t { Replicate, Shard, Partial };
  Kind kind = Kind::Replicate;
  /// Tensor dim for Shard (normalized to >= 0 once the rank is known).
  int64_t dim = 0;
  ReduceOp reduce = ReduceOp::Sum;

  static Placement replicate() { return {}; }
  static Placement shard(int64_t d) { return {Kind::Shard, d, ReduceOp::Sum}; }
  static Placement partial(ReduceOp op = ReduceOp::Sum) { return {Kind::Partial, 0, op}; }
  bool isReplicate() const { return kind == Kind::Replicate; }
  bool isShard() const { return kind == Kind::Shard; }
  bool isShard(int64_t d) const { return kind == Kind::Shard && dim == d; }
  bool isPartial() const { return kind == Kind::Partial; }
  /// "R", "S(0)", "P(sum)".
  std::string str() const;
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
  /// Parses "8" or "2x4".
  static Expected<std::vector<int64_t>> parseShape(std::string_view text);

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& axisNames() const { return names_; }
  int64_t numAxes() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t axis) const { return shape_[static_cast<size_t>(axis)]; }
  /// Total number of ranks.
  int64_t numRanks() const;
  /// Index of axis `name`, or -1.
  int64_t axisIndex(std::string_view name) const;
  /// Coordinates of `rank` (row-major).
  std::vector<int64_t> coords(int64_t rank) const;
  /// Rank at `coords`.
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
  std::vector<Placement> placements;

  /// All replicated on `numAxes` axes.
  static ShardingSpec replicated(int64_t numAxes) {
    return {std::vector<Placement>(static_cast<size_t>(numAxes))};
  }
  bool isReplicated() const;
  bool hasPartial() const;
  /// "[S(0), R]".
  std::string str() const;
  bool operator==(const ShardingSpec&) const = default;
};

/// Size and offset of one chunk of `size` split in `parts` with torch.chunk
/// semantics (chunk = ceil(size/parts); trailing chunks may be short or empty).
struct Chunk {
  int64_t offset = 0;
  int64_t size = 0;
};
Chunk chunkOf(int64_t size, int64_t parts, int64_t index);

/// Local shape on a rank at mesh coordinates `coords` (uneven splits follow
/// torch.chunk). Axes that shard the same dim split it in axis order.
std::vector<int64_t> localShape(const std::vector<int64_t>& global, const ShardingSpec& spec,
                                const Mesh& mesh, const std::vector<int64_t>& coords);
/// Per-dim (offset, size) of the local shard at `coords`.
std::vector<Chunk> localChunks(const std::vector<int64_t>& global, const ShardingSpec& spec,
                               const Mesh& mesh, const std::vector<int64_t>& coords);
/// Error naming dim, size and axis when some Shard does not divide evenly.
Status checkEvenlyDivisible(const std::vector<int64_t>& global, const ShardingSpec& spec,
                            const Mesh& mesh);

}  // namespace spmd::sharding
