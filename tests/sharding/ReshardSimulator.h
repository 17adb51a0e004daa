// A reference simulator of sharded tensors on N ranks, for testing reshards.
//
//   Mesh mesh = *Mesh::create({2, 2});
//   SimTensor g = randomTensor({4, 4}, rng);
//   auto ranks = distribute(g, spec([P(sum), S(0)]), mesh, rng);  // 4 locals
//   for (auto& step : plan.steps) executeStep(step, mesh, ranks);
//   assemble(ranks, to, mesh) == g  (up to rounding)
//
// Meaning of a spec (the planner's, see Reshard.h): the global tensor is
// split along mesh axis 0 first, each piece then along axis 1, and so on. A
// Partial axis splits its piece into random parts whose reduction is the
// piece, so assembling reduces the last axis first.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sharding/Placement.h"
#include "sharding/Reshard.h"

namespace spmd::sharding::sim {

/// A dense row-major tensor of doubles.
struct SimTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// A tensor of `shape` with values uniform in [-4, 4].
SimTensor randomTensor(const std::vector<int64_t>& shape, std::mt19937& rng);

/// Chunk `index` of `t` split in `parts` along `dim` (torch.chunk semantics).
SimTensor chunkAlong(const SimTensor& t, int64_t dim, int64_t parts, int64_t index);

/// The tensors concatenated along `dim`.
SimTensor concatAlong(const std::vector<SimTensor>& parts, int64_t dim);

/// Each rank's local tensor when `global` is laid out as `spec` (normalized).
std::vector<SimTensor> distribute(const SimTensor& global, const ShardingSpec& spec, const Mesh& mesh,
                                  std::mt19937& rng);

/// Runs `step` on every group of the simulated ranks; "" or what went wrong
/// (e.g. a local shape that disagrees with the step).
/// `global` (the tensor's global shape) checks each rank's own local shape
/// (uneven layouts); without it every rank must hold the step's (rank 0's).
std::string executeStep(const ReshardStep& step, const Mesh& mesh, std::vector<SimTensor>& ranks,
                        const std::vector<int64_t>& global = {});

/// Rebuilds the global tensor from the ranks' locals laid out as `spec`;
/// `why` says what is inconsistent (e.g. replicas that differ) on failure.
bool assemble(const std::vector<SimTensor>& ranks, const ShardingSpec& spec, const Mesh& mesh, SimTensor& out,
              std::string& why);

/// "" when `a` and `b` have the same shape and agree within 1e-9 (relative).
std::string compare(const SimTensor& a, const SimTensor& b);

}  // namespace spmd::sharding::sim
