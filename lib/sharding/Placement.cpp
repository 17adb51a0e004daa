// Placements, meshes and local shard geometry.
//
//   parsePlacement(" S( -1 ) ")        -> S(-1)
//   Mesh::parseShape("2x4")            -> {2, 4}
//   Mesh m = *Mesh::create({2, 4}, {"dp", "tp"});
//   m.coords(6) == {1, 2}, m.rankAt({1, 2}) == 6
//   chunkOf(5, 4, i).size for i = 0..3 -> 2, 2, 1, 0
//   localChunks({16, 8}, [S(0), S(0)], m, {1, 2})
//     -> dim 0: 'dp' keeps rows [8, 16), 'tp' keeps [8+2*2, 8+3*2) = [12, 14)
//
// Invariants:
//   - chunkOf(n, p, i) for i in [0, p) tiles [0, n) in order; every chunk is
//     ceil(n/p) long except a short last non-empty one and empty ones after.
//   - Axes that shard the same dim split it in mesh-axis order: axis a splits
//     the chunk that axes < a left (DTensor's nested sharding).
//   - coords() and rankAt() are inverse, row-major (last axis fastest).
#include "sharding/Placement.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>

#include "support/Strings.h"

namespace spmd::sharding {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Parses a whole (trimmed) decimal integer with optional sign.
bool parseInt(std::string_view s, int64_t& out) {
  s = trim(s);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

Status badPlacement(std::string_view text) {
  return Status::error("invalid placement '" + std::string(text) +
                       "': expected R, S(<dim>), P, or P(sum|avg|max|min)");
}

int64_t normalizedDim(int64_t dim, size_t rank) {
  int64_t d = dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
  SPMD_CHECK(d >= 0 && d < static_cast<int64_t>(rank));
  return d;
}

}  // namespace

std::string_view reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

std::string Placement::str() const {
  switch (kind) {
    case Kind::Replicate:
      return "R";
    case Kind::Shard:
      return "S(" + std::to_string(dim) + (splitFactor != 1 ? ",sf=" + std::to_string(splitFactor) : "") +
             ")";
    case Kind::Partial:
      return "P(" + std::string(reduceOpName(reduce)) + ")";
  }
  return "?";
}

Expected<Placement> parsePlacement(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return badPlacement(text);
  char head = s.front();
  std::string_view rest = trim(s.substr(1));
  if (head == 'R') return rest.empty() ? Expected<Placement>(Placement::replicate()) : badPlacement(text);
  if (head != 'S' && head != 'P') return badPlacement(text);
  if (head == 'P' && rest.empty()) return Placement::partial(ReduceOp::Sum);
  if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')') return badPlacement(text);
  std::string_view arg = trim(rest.substr(1, rest.size() - 2));
  if (head == 'S') {
    // "S(d)", or a strided shard "S(d,sf=k)" as Placement::str() prints it.
    int64_t dim = 0, sf = 1;
    size_t comma = arg.find(',');
    if (comma != std::string_view::npos) {
      std::string_view tail = trim(arg.substr(comma + 1));
      if (tail.substr(0, 3) != "sf=" || !parseInt(trim(tail.substr(3)), sf) || sf < 1)
        return badPlacement(text);
      arg = trim(arg.substr(0, comma));
    }
    if (!parseInt(arg, dim)) return badPlacement(text);
    return Placement::stridedShard(dim, sf);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min})
    if (arg == reduceOpName(op)) return Placement::partial(op);
  return badPlacement(text);
}

Expected<Mesh> Mesh::create(std::vector<int64_t> shape, std::vector<std::string> axisNames) {
  if (shape.empty()) return Status::error("mesh has no axes: give at least one axis size, e.g. 8 or 2x4");
  for (size_t a = 0; a < shape.size(); ++a)
    if (shape[a] < 1)
      return Status::error("mesh axis " + std::to_string(a) + " has size " + std::to_string(shape[a]) +
                           ": every mesh axis needs size >= 1");
  if (axisNames.empty()) {
    if (shape.size() == 1) axisNames.emplace_back("x");
    for (size_t a = 0; shape.size() > 1 && a < shape.size(); ++a)
      axisNames.push_back("d" + std::to_string(a));
  }
  if (axisNames.size() != shape.size())
    return Status::error("mesh has " + std::to_string(shape.size()) + " axes but " +
                         std::to_string(axisNames.size()) + " axis names: give one name per axis");
  std::set<std::string> seen;
  for (const std::string& name : axisNames) {
    if (name.empty()) return Status::error("mesh axis name is empty: give every axis a name");
    if (!seen.insert(name).second)
      return Status::error("mesh axis name '" + name + "' is used twice: give every axis a distinct name");
  }
  Mesh mesh;
  mesh.shape_ = std::move(shape);
  mesh.names_ = std::move(axisNames);
  return mesh;
}

Expected<std::vector<int64_t>> Mesh::parseShape(std::string_view text) {
  std::vector<int64_t> shape;
  std::string_view rest = text;
  while (true) {
    size_t x = rest.find('x');
    std::string_view part = rest.substr(0, x);
    int64_t size = 0;
    if (!parseInt(part, size) || size < 1)
      return Status::error("invalid mesh shape '" + std::string(text) +
                           "': expected positive sizes joined by 'x', e.g. 8 or 2x4");
    shape.push_back(size);
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  return shape;
}

int64_t Mesh::numRanks() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t Mesh::axisIndex(std::string_view name) const {
  for (size_t a = 0; a < names_.size(); ++a)
    if (names_[a] == name) return static_cast<int64_t>(a);
  return -1;
}

std::vector<int64_t> Mesh::coords(int64_t rank) const {
  SPMD_CHECK(rank >= 0 && rank < numRanks());
  std::vector<int64_t> c(shape_.size());
  for (size_t a = shape_.size(); a-- > 0;) {
    c[a] = rank % shape_[a];
    rank /= shape_[a];
  }
  return c;
}

int64_t Mesh::rankAt(const std::vector<int64_t>& coords) const {
  SPMD_CHECK(coords.size() == shape_.size());
  int64_t rank = 0;
  for (size_t a = 0; a < shape_.size(); ++a) {
    SPMD_CHECK(coords[a] >= 0 && coords[a] < shape_[a]);
    rank = rank * shape_[a] + coords[a];
  }
  return rank;
}

std::string Mesh::formatShape(std::span<const int64_t> shape) {
  std::string out;
  for (size_t a = 0; a < shape.size(); ++a) out.append(a ? "x" : "").append(std::to_string(shape[a]));
  return out;
}

std::string Mesh::str() const { return formatShape(shape_) + " (" + joined(names_) + ")"; }

bool ShardingSpec::isReplicated() const {
  for (const Placement& p : placements)
    if (!p.isReplicate()) return false;
  return true;
}

bool ShardingSpec::hasPartial() const {
  for (const Placement& p : placements)
    if (p.isPartial()) return true;
  return false;
}

bool ShardingSpec::shardsDim(int64_t d) const {
  for (const Placement& p : placements)
    if (p.isShard(d)) return true;
  return false;
}

std::string ShardingSpec::str() const {
  std::string out = "[";
  for (size_t a = 0; a < placements.size(); ++a) out += (a ? ", " : "") + placements[a].str();
  return out + "]";
}

Expected<ShardingSpec> ShardingSpec::parse(std::string_view text) {
  std::string_view s = trim(text);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']')
    return Status::error("bad sharding spec '" + std::string(text) + "' (expected e.g. [S(0), R])");
  ShardingSpec spec;
  std::string_view body = s.substr(1, s.size() - 2);
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] == '(') ++depth;
    if (i < body.size() && body[i] == ')') --depth;
    if (i < body.size() && (body[i] != ',' || depth > 0)) continue;
    if (trim(body).empty()) break;
    SPMD_ASSIGN_OR_RETURN(Placement p, parsePlacement(body.substr(start, i - start)));
    spec.placements.push_back(p);
    start = i + 1;
  }
  return spec;
}

Chunk chunkOf(int64_t size, int64_t parts, int64_t index) {
  SPMD_CHECK(size >= 0 && parts >= 1 && index >= 0 && index < parts);
  int64_t chunk = (size + parts - 1) / parts;
  int64_t offset = std::min(index * chunk, size);
  return {offset, std::min(chunk, size - offset)};
}

Expected<ShardingSpec> normalizeSpec(const ShardingSpec& spec, int64_t rank, const Mesh& mesh) {
  if (static_cast<int64_t>(spec.placements.size()) != mesh.numAxes())
    return Status::error("sharding " + spec.str() + " has " + std::to_string(spec.placements.size()) +
                         " placements but mesh " + mesh.str() + " has " + std::to_string(mesh.numAxes()) +
                         " axes: give one placement per mesh axis");
  ShardingSpec out = spec;
  for (size_t a = 0; a < out.placements.size(); ++a) {
    Placement& p = out.placements[a];
    if (!p.isShard()) {  // canonical form: only the fields that mean something
      p = p.isPartial() ? Placement::partial(p.reduce) : Placement::replicate();
      continue;
    }
    int64_t d = p.dim < 0 ? p.dim + rank : p.dim;
    if (d < 0 || d >= rank)
      return Status::error("placement " + p.str() + " on mesh axis '" + mesh.axisNames()[a] +
                           "' names no dim of a rank-" + std::to_string(rank) + " tensor: use a dim in [-" +
                           std::to_string(rank) + ", " + std::to_string(rank) + ")");
    p.dim = d;
  }
  return out;
}

namespace {

/// Piece `index` of `cur` split by `p` over `n` ranks (see localChunks);
/// nullopt where the pieces would not be runs of equal length.
std::optional<Chunk> splitChunk(const Chunk& cur, const Placement& p, int64_t n, int64_t index) {
  if (p.isStrided()) {  // each of the sf rows split as torch.chunk splits it
    if (cur.blocks != 1 || cur.size % p.splitFactor != 0) return std::nullopt;
    int64_t row = cur.size / p.splitFactor;
    Chunk piece = chunkOf(row, n, index);
    if (piece.size == row) return cur;  // one rank (a size-1 axis): the runs touch
    return Chunk{cur.offset + piece.offset, piece.size * p.splitFactor, p.splitFactor, row};
  }
  if (cur.blocks == 1) {
    Chunk piece = chunkOf(cur.size, n, index);
    return Chunk{cur.offset + piece.offset, piece.size, 1, 0};
  }
  // A plain split of runs: whole runs, or a piece of one run. An empty
  // piece (a strided row of torch.chunk's trailing ranks) splits into empty
  // pieces: its runs have size 0, no divisor.
  int64_t run = cur.blockSize();
  if (run == 0) return Chunk{cur.offset, 0, 1, 0};
  if (cur.size % n != 0) return std::nullopt;
  int64_t c = cur.size / n, start = index * c;
  if (c % run == 0)
    return Chunk{cur.offset + (start / run) * cur.blockStride, c, c / run, c == run ? 0 : cur.blockStride};
  if (run % c != 0) return std::nullopt;
  return Chunk{cur.offset + (start / run) * cur.blockStride + start % run, c, 1, 0};
}

}  // namespace

std::vector<Chunk> localChunks(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh,
                               const std::vector<int64_t>& coords) {
  SPMD_CHECK(static_cast<int64_t>(spec.placements.size()) == mesh.numAxes());
  SPMD_CHECK(coords.size() == spec.placements.size());
  std::vector<Chunk> chunks(global.size());
  for (size_t d = 0; d < global.size(); ++d) chunks[d] = {0, global[d]};
  for (size_t a = 0; a < spec.placements.size(); ++a) {
    const Placement& p = spec.placements[a];
    if (!p.isShard()) continue;
    Chunk& cur = chunks[static_cast<size_t>(normalizedDim(p.dim, global.size()))];
    std::optional<Chunk> piece = splitChunk(cur, p, mesh.size(static_cast<int64_t>(a)), coords[a]);
    SPMD_CHECK(piece.has_value());  // checkShardable refuses the others
    cur = *piece;
  }
  return chunks;
}

std::vector<int64_t> localShape(const std::vector<int64_t>& global, const ShardingSpec& spec,
                                const Mesh& mesh, const std::vector<int64_t>& coords) {
  std::vector<int64_t> shape;
  for (const Chunk& c : localChunks(global, spec, mesh, coords)) shape.push_back(c.size);
  return shape;
}

namespace {

/// The checks of checkEvenlyDivisible (`even`) or checkShardable (not `even`).
Status checkSplits(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh,
                   bool even) {
  SPMD_CHECK(static_cast<int64_t>(spec.placements.size()) == mesh.numAxes());
  std::vector<Chunk> local(global.size());
  for (size_t d = 0; d < global.size(); ++d) local[d] = {0, global[d]};
  std::vector<std::string> splitBy(global.size());  // earlier axes that split each dim
  std::vector<bool> uneven(global.size(), false);   // ranks' pieces of each dim differ
  for (size_t a = 0; a < spec.placements.size(); ++a) {
    const Placement& p = spec.placements[a];
    if (!p.isShard()) continue;
    size_t d = static_cast<size_t>(normalizedDim(p.dim, global.size()));
    int64_t n = mesh.size(static_cast<int64_t>(a)), sf = p.splitFactor;
    const std::string& name = mesh.axisNames()[a];
    std::string where = "dim " + std::to_string(d) + " of size " + std::to_string(global[d]);
    if (!splitBy[d].empty())
      where += " (" + std::to_string(local[d].size) + " per shard after mesh axes " + splitBy[d] + ")";
    // torch.chunk splits a plain run, or each of a strided shard's sf rows,
    // at any size; a split of strided runs must divide them.
    bool runs = !p.isStrided() && local[d].blocks != 1;
    if (p.isStrided() && local[d].size % sf != 0)  // the sf rows, whatever the mesh
      return Status::error(where + " does not split into " + std::to_string(sf) + " equal rows for " +
                           p.str() + " on mesh axis '" + name +
                           "': a strided shard views the dim as [sf, size / sf], "
                           "so sf must divide it (a fused weight of k parts has k * n rows: sf=k); the mesh "
                           "axis need not divide it");
    if ((even && local[d].size % (n * sf) != 0) || (runs && local[d].size % n != 0))
      return Status::error(where + " does not divide evenly over mesh axis '" + name + "' of size " +
                           std::to_string(n) + (p.isStrided() ? " in " + std::to_string(sf) + " rows" : "") +
                           (even || !runs ? ": shard it over axes whose sizes divide it, or pad it"
                                          : ": the strided runs an earlier axis left do not split into "
                                            "equal pieces; shard that dim on axes whose sizes divide it"));
    if (uneven[d] && (p.isStrided() || runs))
      return Status::error(where + ": " + p.str() + " on mesh axis '" + name +
                           "' would split rows that earlier axes split unevenly (ranks' pieces differ); "
                           "shard that dim on fewer axes, or on axes whose sizes divide it");
    std::optional<Chunk> piece = splitChunk(local[d], p, n, 0);
    if (!piece)
      return Status::error(where + ": " + p.str() + " on mesh axis '" + name +
                           "' would split the strided rows " +
                           "an earlier axis left into unequal runs; shard that dim on fewer axes");
    uneven[d] = uneven[d] || (local[d].size / (p.isStrided() ? sf : 1)) % n != 0;
    local[d] = *piece;
    splitBy[d] += (splitBy[d].empty() ? "'" : ", '") + name + "'";
  }
  return Status::ok();
}

}  // namespace

Status checkEvenlyDivisible(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh) {
  return checkSplits(global, spec, mesh, true);
}

Status checkShardable(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh) {
  return checkSplits(global, spec, mesh, false);
}

bool isUneven(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh) {
  return !checkEvenlyDivisible(global, spec, mesh).isOk();
}

int64_t paddingElements(const std::vector<int64_t>& global, const ShardingSpec& spec, const Mesh& mesh) {
  if (!isUneven(global, spec, mesh)) return 0;
  std::vector<int64_t> numel;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    int64_t n = 1;
    for (int64_t d : localShape(global, spec, mesh, mesh.coords(r))) n *= d;
    numel.push_back(n);
  }
  int64_t most = *std::max_element(numel.begin(), numel.end()), pad = 0;
  for (int64_t n : numel) pad += most - n;
  return pad;
}

int64_t shardCount(const ShardingSpec& spec, int64_t dim, const Mesh& mesh) {
  int64_t k = 1;
  for (size_t a = 0; a < spec.placements.size(); ++a)
    if (spec.placements[a].isShard(dim)) k *= mesh.size(static_cast<int64_t>(a));
  return k;
}

std::vector<int64_t> pieceBefore(const std::vector<int64_t>& global, const ShardingSpec& spec,
                                 const Mesh& mesh, const std::vector<int64_t>& coords, int64_t axis) {
  ShardingSpec earlier = spec;
  for (size_t a = static_cast<size_t>(axis); a < earlier.placements.size(); ++a)
    earlier.placements[a] = Placement::replicate();
  return localShape(global, earlier, mesh, coords);
}

}  // namespace spmd::sharding
