// The reshard simulator (see ReshardSimulator.h).
//
//   distribute(g, [S(0), S(0)], 2x2) gives rank (i, j) the rows
//   [4i + 2j, 4i + 2j + 2) of an 8-row g; executeStep(all_gather axis 1) then
//   gives rank (i, j) rows [4i, 4i + 4).
//
// Invariants: distribute and assemble are inverse for every spec; a step
// touches only the ranks of each group, in mesh-coordinate order.
#include "ReshardSimulator.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "support/Strings.h"

namespace spmd::sharding::sim {
namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

/// (outer, size along dim, inner) of a row-major shape.
void splitShape(const std::vector<int64_t>& shape, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) outer *= shape[static_cast<size_t>(d)];
    if (d > dim) inner *= shape[static_cast<size_t>(d)];
  }
}

/// Elementwise reduction of same-shaped tensors.
SimTensor reduce(const std::vector<SimTensor>& parts, ReduceOp op) {
  SimTensor out = parts[0];
  for (size_t p = 1; p < parts.size(); ++p)
    for (size_t i = 0; i < out.data.size(); ++i) {
      double v = parts[p].data[i];
      double& o = out.data[i];
      o = op == ReduceOp::Max ? std::max(o, v) : op == ReduceOp::Min ? std::min(o, v) : o + v;
    }
  if (op == ReduceOp::Avg)
    for (double& v : out.data) v /= static_cast<double>(parts.size());
  return out;
}

/// `n` random tensors whose `op`-reduction is `t`.
std::vector<SimTensor> decompose(const SimTensor& t, int64_t n, ReduceOp op, std::mt19937& rng) {
  std::uniform_real_distribution<double> noise(0.25, 2.0);
  std::vector<SimTensor> parts(static_cast<size_t>(n), t);
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (op == ReduceOp::Max || op == ReduceOp::Min) {
      size_t keep = rng() % static_cast<size_t>(n);  // this part holds the extreme
      for (size_t p = 0; p < parts.size(); ++p)
        if (p != keep) parts[p].data[i] += op == ReduceOp::Max ? -noise(rng) : noise(rng);
      continue;
    }
    double target = op == ReduceOp::Avg ? t.data[i] * static_cast<double>(n) : t.data[i];
    double rest = 0;
    for (size_t p = 0; p + 1 < parts.size(); ++p) {
      parts[p].data[i] = noise(rng) - 1.0;
      rest += parts[p].data[i];
    }
    parts.back().data[i] = target - rest;
  }
  return parts;
}

/// The ranks of every group along `axis`, each ordered by that coordinate.
std::vector<std::vector<int64_t>> groups(const Mesh& mesh, int64_t axis) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    std::vector<int64_t> c = mesh.coords(r);
    if (c[static_cast<size_t>(axis)] != 0) continue;
    std::vector<int64_t> group;
    for (int64_t i = 0; i < mesh.size(axis); ++i) {
      c[static_cast<size_t>(axis)] = i;
      group.push_back(mesh.rankAt(c));
    }
    out.push_back(group);
  }
  return out;
}

/// Runs the step on one group: `locals` holds the members' tensors in order.
void runOnGroup(const ReshardStep& step, std::vector<SimTensor>& locals) {
  auto n = static_cast<int64_t>(locals.size());
  switch (step.kind) {
    case CollectiveKind::AllGather: {
      SimTensor all = concatAlong(locals, step.dim);
      for (SimTensor& t : locals) t = all;
      break;
    }
    case CollectiveKind::AllReduce: {
      SimTensor all = reduce(locals, step.op);
      for (SimTensor& t : locals) t = all;
      break;
    }
    case CollectiveKind::ReduceScatter: {
      SimTensor all = reduce(locals, step.op);
      for (int64_t i = 0; i < n; ++i) locals[static_cast<size_t>(i)] = chunkAlong(all, step.dim, n, i);
      break;
    }
    case CollectiveKind::AllToAll: {
      std::vector<SimTensor> received(locals.size());
      for (int64_t j = 0; j < n; ++j) {
        std::vector<SimTensor> pieces;
        for (const SimTensor& src : locals) pieces.push_back(chunkAlong(src, step.dim, n, j));
        received[static_cast<size_t>(j)] = concatAlong(pieces, step.dim2);
      }
      locals = received;
      break;
    }
    case CollectiveKind::LocalSlice:
      for (int64_t i = 0; i < n; ++i)
        locals[static_cast<size_t>(i)] = chunkAlong(locals[static_cast<size_t>(i)], step.dim, n, i);
      break;
    case CollectiveKind::ZeroPartial:
      for (int64_t i = 1; i < n; ++i) std::fill(locals[i].data.begin(), locals[i].data.end(), 0.0);
      break;
    case CollectiveKind::MarkPartial:
      break;
    case CollectiveKind::ScalePartial:
      for (SimTensor& t : locals)
        for (double& v : t.data) v *= step.scale;
      break;
  }
}

}  // namespace

SimTensor randomTensor(const std::vector<int64_t>& shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  SimTensor t{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
  for (double& v : t.data) v = value(rng);
  return t;
}

SimTensor chunkAlong(const SimTensor& t, int64_t dim, int64_t parts, int64_t index) {
  Chunk c = chunkOf(t.shape[static_cast<size_t>(dim)], parts, index);
  int64_t outer = 0, inner = 0;
  splitShape(t.shape, dim, outer, inner);
  SimTensor out{t.shape, {}};
  out.shape[static_cast<size_t>(dim)] = c.size;
  int64_t size = t.shape[static_cast<size_t>(dim)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = c.offset; k < c.offset + c.size; ++k)
      for (int64_t i = 0; i < inner; ++i)
        out.data.push_back(t.data[static_cast<size_t>((o * size + k) * inner + i)]);
  return out;
}

SimTensor concatAlong(const std::vector<SimTensor>& parts, int64_t dim) {
  SimTensor out{parts[0].shape, {}};
  out.shape[static_cast<size_t>(dim)] = 0;
  for (const SimTensor& p : parts) out.shape[static_cast<size_t>(dim)] += p.shape[static_cast<size_t>(dim)];
  int64_t outer = 0, inner = 0;
  splitShape(out.shape, dim, outer, inner);
  for (int64_t o = 0; o < outer; ++o)
    for (const SimTensor& p : parts) {
      int64_t rows = p.shape[static_cast<size_t>(dim)] * inner;
      auto begin = p.data.begin() + o * rows;
      out.data.insert(out.data.end(), begin, begin + rows);
    }
  return out;
}

std::vector<SimTensor> distribute(const SimTensor& global, const ShardingSpec& spec, const Mesh& mesh,
                                  std::mt19937& rng) {
  // Pieces keyed by the mesh coordinates of the axes handled so far.
  std::map<std::vector<int64_t>, SimTensor> pieces{{{}, global}};
  for (int64_t a = 0; a < mesh.numAxes(); ++a) {
    const Placement& p = spec.placements[static_cast<size_t>(a)];
    int64_t n = mesh.size(a);
    std::map<std::vector<int64_t>, SimTensor> next;
    for (const auto& [prefix, piece] : pieces) {
      std::vector<SimTensor> parts;
      if (p.isPartial()) parts = decompose(piece, n, p.reduce, rng);
      for (int64_t c = 0; c < n; ++c) {
        std::vector<int64_t> key = prefix;
        key.push_back(c);
        next[key] = p.isShard()     ? chunkAlong(piece, p.dim, n, c)
                    : p.isPartial() ? parts[static_cast<size_t>(c)]
                                    : piece;
      }
    }
    pieces = std::move(next);
  }
  std::vector<SimTensor> ranks;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) ranks.push_back(pieces.at(mesh.coords(r)));
  return ranks;
}

std::string executeStep(const ReshardStep& step, const Mesh& mesh, std::vector<SimTensor>& ranks,
                        const std::vector<int64_t>& global) {
  // Uneven layouts: each rank's own shape; step.localShape* are rank 0's.
  auto shapeAt = [&](const ShardingSpec& s, const std::vector<int64_t>& rank0, size_t r) {
    return global.empty() ? rank0 : localShape(global, s, mesh, mesh.coords(static_cast<int64_t>(r)));
  };
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].shape != shapeAt(step.before, step.localShapeBefore, r))
      return "step " + step.str() + " expects local shape " +
             formatShape(shapeAt(step.before, step.localShapeBefore, r)) + " but rank " + std::to_string(r) +
             " holds " + formatShape(ranks[r].shape);
  for (const std::vector<int64_t>& group : groups(mesh, step.axis)) {
    std::vector<SimTensor> locals;
    for (int64_t r : group) locals.push_back(ranks[static_cast<size_t>(r)]);
    runOnGroup(step, locals);
    for (size_t i = 0; i < group.size(); ++i) ranks[static_cast<size_t>(group[i])] = locals[i];
  }
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].shape != shapeAt(step.after, step.localShapeAfter, r))
      return "step " + step.str() + " promises local shape " +
             formatShape(shapeAt(step.after, step.localShapeAfter, r)) + " but rank " + std::to_string(r) +
             " gave " + formatShape(ranks[r].shape);
  return "";
}

bool assemble(const std::vector<SimTensor>& ranks, const ShardingSpec& spec, const Mesh& mesh, SimTensor& out,
              std::string& why) {
  std::map<std::vector<int64_t>, SimTensor> pieces;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) pieces[mesh.coords(r)] = ranks[static_cast<size_t>(r)];
  for (int64_t a = mesh.numAxes() - 1; a >= 0; --a) {
    const Placement& p = spec.placements[static_cast<size_t>(a)];
    std::map<std::vector<int64_t>, std::vector<SimTensor>> children;  // ordered by coordinate a
    for (auto& [key, piece] : pieces)
      children[std::vector<int64_t>(key.begin(), key.end() - 1)].push_back(std::move(piece));
    pieces.clear();
    for (auto& [prefix, parts] : children) {
      if (p.isShard()) {
        pieces[prefix] = concatAlong(parts, p.dim);
      } else if (p.isPartial()) {
        pieces[prefix] = reduce(parts, p.reduce);
      } else {
        for (const SimTensor& part : parts)
          if (std::string diff = compare(part, parts[0]); !diff.empty()) {
            why = "replicas along mesh axis " + std::to_string(a) + " differ: " + diff;
            return false;
          }
        pieces[prefix] = parts[0];
      }
    }
  }
  out = pieces.at({});
  return true;
}

std::string compare(const SimTensor& a, const SimTensor& b) {
  if (a.shape != b.shape) return "shape " + formatShape(a.shape) + " vs " + formatShape(b.shape);
  for (size_t i = 0; i < a.data.size(); ++i)
    if (std::abs(a.data[i] - b.data[i]) > 1e-9 * std::max(1.0, std::abs(b.data[i])))
      return "element " + std::to_string(i) + ": " + std::to_string(a.data[i]) + " vs " +
             std::to_string(b.data[i]);
  return "";
}

}  // namespace spmd::sharding::sim
