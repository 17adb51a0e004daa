// `spmdc placements` and `spmdc reshard`: the two layout decisions that
// happen before any graph is rewritten, printed as text for lit tests.
//
//   spmdc placements mlp.ir --schema megatron.json
//     mesh 4 (x)
//     input fc1.weight: [S(0)]
//     input x: [R]
//     output output.0: [R]
//
//   spmdc reshard --shape 64x32 --mesh 2x4 --from "[P(sum), S(0)]" --to "[S(1), R]"
//     reduce_scatter(axis=0, op=sum, dim=1) [P(sum), S(0)] -> [S(1), S(0)]
//     all_gather(axis=1, dim=0) [S(1), S(0)] -> [S(1), R]
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace spmdc {

/// Flags of `spmdc placements`.
struct PlacementsArgs {
  std::string model, schema, mesh;
};

/// Flags of `spmdc reshard`.
struct ReshardArgs {
  std::string shape, mesh, axes, from, to;
  int64_t elementBytes = 4;
};

/// Adds the `placements` subcommand to `app`, filling `a`.
CLI::App* addPlacementsCommand(CLI::App& app, PlacementsArgs& a);

/// Adds the `reshard` subcommand to `app`, filling `a`.
CLI::App* addReshardCommand(CLI::App& app, ReshardArgs& a);

/// Resolves a.schema (a file or preset) against a.model (.pt2 or IR text)
/// and prints the mesh, one line per graph input and output (the name a
/// schema rule matches, its placements; an output left to propagation is
/// `any`; a parameter gathered before use adds `gathered [..]`), then the
/// notes and warnings. Returns the exit status.
int runPlacements(const PlacementsArgs& a);

/// Prints the redistribution plan from a.from to a.to (one step per line,
/// then the step count), or `no steps` when the layouts are the same.
/// Returns the exit status.
int runReshard(const ReshardArgs& a);

}  // namespace spmdc
