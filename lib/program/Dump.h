// `spmdc dump`: a stable, line-per-op text form of a compiled program.
//
//   spmd program mlp (format 2.0)
//   mesh 8 (x=8), 8 ranks
//   graph schema 8.17, torch 2.11.0+cu130
//   provenance source: mlp.pt2
//   input %p_fc1_weight: f32[32, 64] parameter fc1.weight  [S(0)] global f32[256, 64]
//   input %x: f32[32, 64] user_input  [R] global f32[32, 64]
//   %permute: f32[64, 32] = aten.permute.default(%p_fc1_weight, [1, 0])  # export_models.py:37
//   %all_reduce: f32[32, 256] = spmd.all_reduce(%addmm_1, "x", "sum")
//   output %all_reduce user_output  [R] global f32[32, 256]
//   weight fc1.weight  [S(0)] f32[256, 64] -> [32, 64]  blobs 8  bytes/rank 8192
//   weights 4  bytes/rank 16640
//   collective all_reduce  count 1  bytes/rank 32768
//
// The text is a pure function of the program: no absolute paths, times or
// host names (provenance entries that carry them are shortened or left
// out), so golden files compare byte for byte across runs and machines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "program/Program.h"

namespace spmd::program {

/// Number and traffic of one kind of collective in a program.
struct CollectiveSummary {
  int64_t count = 0;
  /// Bytes each rank sends, summed over the kind's nodes (the compiler's
  /// CollectiveRecord where one names the node, else the local bytes of the
  /// node's tensor input; symbolic sizes count 0).
  int64_t bytesPerRank = 0;
};

/// Communicating collective nodes (all_gather, all_reduce, reduce_scatter,
/// all_to_all) of the graph by kind ("all_reduce"), sorted by kind.
std::map<std::string, CollectiveSummary> summarizeCollectives(const Program& program);

/// A boundary tensor or weight that ranks hold in different sizes (uneven
/// shards, torch.chunk).
struct UnevenTensor {
  std::string what;  ///< "input %x", "output %addmm_1", "weight fc1.weight"
  std::string spec;  ///< "[S(0)]"
  /// Each rank's local shape, in rank order.
  std::vector<std::vector<int64_t>> perRank;
  /// Bytes padding adds when every rank's shard is padded to the largest
  /// (what a collective of the whole tensor moves beyond its data).
  int64_t paddingBytes = 0;
};

/// The program's inputs, outputs and weights with uneven layouts, in that
/// order (static shapes only).
std::vector<UnevenTensor> unevenTensors(const Program& program);

/// The provenance entries fit for golden text: machine-specific keys
/// (time, date, host, user, cwd, ...) left out, absolute paths in values
/// shortened to their file name; order kept.
std::vector<std::pair<std::string, std::string>> stableProvenance(const Program& program);

/// The declaration of a boundary value as the dump prints it:
/// "%x: f32[8, 64]", "%s0: sym(s52)", "lr = 0.01" for a constant input.
std::string inputDecl(const ir::InputSpec& input);

/// The dump text (see the example above); one trailing newline per line.
std::string dumpProgram(const Program& program);

}  // namespace spmd::program
