// Sequence parallelism (Megatron-SP; Korthikanti et al. 2022): the residual
// stream between transformer blocks stays sharded on its sequence dim over
// the tensor-parallel axis. Before propagation, layout anchors pin
//
//   * each residual-stream value (a norm's input that also feeds a residual
//     add, or the result of such an add) and the block output added to it
//     to S(seq) on the axis, and
//   * each norm output read by a matmul to R on the axis,
//
// and propagation does the rest: the all-reduce after a row-parallel linear
// becomes a reduce-scatter, an all-gather precedes the column-parallel
// linears, and the norms, residual adds and their backward run on 1/t of
// the sequence.
//
//   %add_4 = aten.add.Tensor(%embedding, %view_19)          (tp = 2, [2, 16, 64])
//   =>
//   %embedding_sp = aten.alias.default(%embedding) {spmd_layout: "[S(1)]"}  # local slice
//   %view_19_sp   = aten.alias.default(%view_19)   {spmd_layout: "[S(1)]"}  # reduce-scatter
//   %add_4        = aten.add.Tensor(%embedding_sp, %view_19_sp)
//   %add_4_sp     = aten.alias.default(%add_4)     {spmd_layout: "[S(1)]"}
//   ... RMSNorm on [2, 8, 64] ...
//   %mul_11_sp    = aten.alias.default(%mul_11)    {spmd_layout: "[R]"}     # all-gather
#pragma once

#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "support/Status.h"

namespace spmd::passes {

/// What the sequence-parallel pass found in a graph.
struct SequenceParallelPlan {
  /// Residual-stream values (norm inputs, residual-add results): S(seq).
  std::vector<ir::Value*> stream;
  /// Block outputs added to the residual stream: S(seq) (a reduce-scatter
  /// after a row-parallel linear).
  std::vector<ir::Value*> blockOutputs;
  /// Train steps: the gradient of each block output, read by the backward of
  /// the linear that produced it: R (an all-gather, the backward of the
  /// reduce-scatter).
  std::vector<ir::Value*> blockOutputGrads;
  /// Norm outputs read by a matmul: R (an all-gather).
  std::vector<ir::Value*> normOutputs;
  /// Train steps: the gradient an embedding's backward (embedding_dense_backward,
  /// or index_put over the same indices) reads, when the embedding's output
  /// is in the stream: R (an all-gather of that gradient, the backward of
  /// scattering the embedding's output), with the embedding's weight.
  std::vector<std::pair<ir::Value*, const ir::Value*>> embeddingGrads;
  /// The sequence dim of the residual stream.
  int64_t seqDim = 1;
  /// How seqDim was chosen, for the note ("given", "found from ...").
  std::string seqDimHow;
};

/// Finds the residual stream, block outputs and norm outputs of `g`
/// (forward nodes: a norm is a mean over the last dim, layer_norm or
/// rms_norm), and the sequence dim (`dim` when given). Errors: no norm whose
/// input feeds a residual add, a given dim out of range or the hidden dim.
Expected<SequenceParallelPlan> findSequenceParallelPlan(const ir::Graph& g, std::optional<int64_t> dim);

/// When `schema` asks for sequence parallelism, inserts the layout anchors
/// of findSequenceParallelPlan into `program` (placements on other mesh
/// axes: what propagation gives those values without the anchors) and adds
/// a note saying what it pinned. Errors name the schema pointer: an unknown
/// axis, no transformer blocks found, a sequence dim that does not divide
/// the axis.
Status applySequenceParallel(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                             schema::ResolvedPlacements& placements, const CompileOptions& options);

}  // namespace spmd::passes
