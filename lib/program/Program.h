// The distributed program: what `spmdc compile` writes and `spmd-run`
// executes. One SPMD graph for all ranks (ATen ops on local shapes plus
// collective ops naming a mesh axis), the mesh, the placement of every input
// and output, and the weights, sharded.
//
//   program mlp on mesh 8 (x)
//   input %p_fc1_weight: f32[32, 64] parameter fc1.weight  [S(0)] global f32[256, 64]
//   %all_reduce: f32[32, 64] = spmd.all_reduce(%addmm_1, "x", "sum")  # for output addmm_1: [P(sum)] -> [R]
//
// Collective nodes have targets in the "spmd." namespace (see Collectives.h
// for their arguments); everything else is an ATen op as in torch.export.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/Graph.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::program {

/// The .spmd format major version this build writes; readers accept an
/// equal major (and any minor). 2: a checksum on the JSON and on every blob.
constexpr int kFormatVersion = 2;
/// The .spmd format minor version this build writes for a program whose
/// weights are all in the file (kFormatMinorByReference when some are not).
constexpr int kFormatMinor = 0;
/// 2.1: weights by reference (a WeightEntry's `source`, Program::weightsRoot).
constexpr int kFormatMinorByReference = 1;
/// 2.2: a pipeline plan (Program::pipeline).
constexpr int kFormatMinorPipeline = 2;

/// Placement and global type of one graph input or output.
struct BoundaryInfo {
  sharding::ShardingSpec spec;
  /// Global type (the local type is the graph value's type).
  ir::TensorType globalType;
};

/// Why a collective was inserted (for reports and `spmdc explain`).
struct CollectiveRecord {
  std::string node;  ///< the collective node's name
  std::string kind;  ///< all_reduce, all_gather, reduce_scatter, all_to_all
  std::string axis;  ///< mesh axis name
  int64_t bytesPerRank = 0;
  std::string consumer;    ///< node (or "output <name>") that needed it
  std::string value;       ///< the value redistributed
  std::string from;        ///< placements before, e.g. "[P(sum)]"
  std::string to;          ///< placements after
  std::string sourceLine;  ///< user's Python line of the consumer, if known
};

/// Where one shard of a weight lies in the file's data section.
struct ShardBlob {
  /// Chunk index per mesh axis along which the weight is sharded; -1 for
  /// axes it is replicated over (all ranks on that axis share the blob).
  std::vector<int64_t> index;
  uint64_t offset = 0;  ///< from the start of the data section
  uint64_t bytes = 0;
  uint64_t checksum = 0;  ///< XXH3-64 of the blob's bytes (see Format.h)
};

/// Where a weight's bytes come from when the program does not hold them
/// (weights by reference, docs/WEIGHTS.md):
///
///   weight model.embed_tokens.weight  bf16[32000, 2048]  [S(0)]
///     source {file "model-00001-of-00002.safetensors", tensor
///             "model.embed_tokens.weight", dtype bf16, file_bytes 4965..,
///             header_xxh3 .., sample_xxh3 ..}
///   rank 3 of 8 reads rows [12000, 16000) of the file's tensor, nothing else.
///
/// Or `zeros`: the runtime makes the tensor (optimizer states start so).
struct WeightSourceRef {
  bool zeros = false;
  /// Safetensors file, relative to Program::weightsRoot unless absolute.
  std::string file;
  /// The tensor's name in that file.
  std::string tensor;
  /// The file's dtype; the runtime converts to the entry's where they differ.
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  /// Integrity record taken at compile time (see ExternalWeights.h): the
  /// file's size, XXH3 of its header, XXH3 of sampled blocks of the tensor.
  uint64_t fileBytes = 0;
  uint64_t headerChecksum = 0;
  uint64_t sampleChecksum = 0;
};

/// A parameter, buffer or constant, stored sharded.
struct WeightEntry {
  std::string fqn;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  sharding::ShardingSpec spec;
  /// One blob per distinct shard (contiguous, row-major local tensor);
  /// empty when `source` is set.
  std::vector<ShardBlob> shards;
  /// Set when the bytes live outside the program (by reference).
  std::optional<WeightSourceRef> source;
};

/// One step of a pipeline rank's schedule: the forward or the backward of
/// one microbatch on one (virtual) stage (docs/PIPELINE.md). A zero-bubble
/// schedule splits the backward in two, as PyTorch's BACKWARD_INPUT and
/// BACKWARD_WEIGHT: Input ("I"), the gradients the stage sends back, and
/// Weight ("W"), its weights' gradients, run later to fill the bubble.
struct PipelineAction {
  enum class Kind : uint8_t { Forward, Backward, Input, Weight };
  Kind kind = Kind::Forward;
  int64_t microbatch = 0;
  /// The virtual stage it runs (interleaved schedules); -1: the rank's one
  /// stage (a plan with one stage per rank).
  int64_t stage = -1;
  bool operator==(const PipelineAction&) const = default;
};

/// Where a node of a pipelined program runs: on one stage in one phase, or
/// (stage -1, Free) wherever a phase reads it (it depends on no parameter:
/// masks, position tables, the labels' bookkeeping).
struct PipelinePlace {
  enum class Phase : uint8_t { Free, Forward, Backward, Step, Prologue };
  Phase phase = Phase::Free;
  int64_t stage = -1;
  bool operator==(const PipelinePlace&) const = default;
};

/// Pipeline parallelism of a train step. The graph is the step of one
/// microbatch: the mesh's `microbatchAxis` is an axis of time, not of ranks
/// (its coordinate is the microbatch being run), and its all-reduces are
/// accumulations over the microbatches. `stages` copies of the mesh's other
/// axes run the stages; world rank = stage * (ranks of the other axes) +
/// rank among them. With `virtualStages` v > 1 (interleaved 1F1B) the model
/// is cut into stages * v virtual stages, virtual stage c on pipeline rank
/// c mod stages (PyTorch's ScheduleInterleaved1F1B layout); places then
/// name virtual stages and actions carry theirs ("2F0": virtual stage 2's
/// forward of microbatch 0).
///
///   pipeline axis pp stages 2 schedule 1f1b microbatches 4 (mesh axis mb)
///   stage 0: F0 F1 B0 F2 B1 F3 B2 B3
///   stage 1: F0 B0 F1 B1 F2 B2 F3 B3
struct PipelinePlan {
  std::string axis;            ///< the pipeline axis's name ("pp")
  int64_t stages = 0;          ///< its size (pipeline ranks)
  int64_t virtualStages = 1;   ///< virtual stages per pipeline rank
  std::string microbatchAxis;  ///< the mesh axis of microbatches ("mb")
  std::string schedule;        ///< "gpipe", "1f1b", "interleaved-1f1b" or "zero-bubble"
  /// One per graph node, in node order.
  std::vector<PipelinePlace> places;
  /// One list per pipeline rank.
  std::vector<std::vector<PipelineAction>> actions;
  bool operator==(const PipelinePlan&) const = default;

  /// Virtual stages in all (stages * virtualStages).
  int64_t chunks() const { return stages * virtualStages; }
  /// The pipeline rank running virtual stage `c`.
  int64_t rankOf(int64_t c) const { return c % stages; }
  /// The virtual stage action `a` of rank `rank`'s list runs.
  int64_t stageOf(int64_t rank, const PipelineAction& a) const { return a.stage < 0 ? rank : a.stage; }
};

/// A compiled distributed program.
struct Program {
  /// Format major version (the writer always writes kFormatVersion).
  int formatVersion = kFormatVersion;
  /// Format minor version (the writer always writes kFormatMinor).
  int formatMinor = kFormatMinor;
  sharding::Mesh mesh;
  /// The SPMD graph with local shapes; its signature is the source's.
  ir::ExportedProgram graph;
  /// One per signature input / output (same order).
  std::vector<BoundaryInfo> inputs;
  std::vector<BoundaryInfo> outputs;
  std::vector<WeightEntry> weights;
  /// Folder that relative WeightSourceRef files are found in (recorded at
  /// compile time; spmd-run --weights-root overrides it). Empty when no
  /// weight is by reference.
  std::string weightsRoot;
  std::vector<CollectiveRecord> collectives;
  /// Free-form provenance: source file, schema, compiler version, options
  /// (keys unique; `spmdc dump` leaves out machine-specific entries).
  std::vector<std::pair<std::string, std::string>> provenance;
  /// Set for a pipelined train step.
  std::optional<PipelinePlan> pipeline;
};

/// A deep copy of `p`, its graph cloned (ir::ExportedProgram::clone): what
/// programFromJson(programToJsonText(p)) gives, without the text.
inline Program copyProgram(const Program& p) {
  return Program{p.formatVersion, p.formatMinor, p.mesh,        p.graph.clone(), p.inputs,  p.outputs,
                 p.weights,       p.weightsRoot, p.collectives, p.provenance,    p.pipeline};
}

/// Number of processes that run `p`: the mesh's ranks, times the stages
/// over the microbatches for a pipeline.
inline int64_t worldSize(const Program& p) {
  if (!p.pipeline) return p.mesh.numRanks();
  int64_t mb = p.mesh.size(p.mesh.axisIndex(p.pipeline->microbatchAxis));
  return p.mesh.numRanks() / mb * p.pipeline->stages;
}

/// The format minor version `p` is written in: the lowest that can hold it,
/// so programs without weights by reference stay byte-identical to 2.0's.
inline int formatMinorFor(const Program& p) {
  if (p.pipeline) return kFormatMinorPipeline;
  for (const auto& w : p.weights)
    if (w.source) return kFormatMinorByReference;
  return kFormatMinor;
}

}  // namespace spmd::program
