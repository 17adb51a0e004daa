// Passes over the exported (global) graph, before propagation: they add
// nodes that placement and propagation then see (an optimizer update,
// layout anchors). Like a Pass (Pass.h), each is one class with a name, a
// one-line description and run(); `spmdc --list-passes` lists them ahead of
// the passes after expansion, and `--print-after NAME` prints the graph
// after one.
//
//   GatherParams p;   // "gather-params"
//   GraphPassContext ctx{schema, options, &placements};
//   SPMD_RETURN_IF_ERROR(p.run(archive.program, ctx));
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"

namespace spmd::passes {

/// What a graph pass reads besides the graph (not owned).
struct GraphPassContext {
  const schema::PlacementSchema& schema;
  const CompileOptions& options;
  /// The schema's placements, resolved against the graph that the passes
  /// before left; null while passes whose needsPlacements() is false run.
  schema::ResolvedPlacements* placements = nullptr;
};

/// One transformation of the exported graph before propagation.
class GraphPass {
 public:
  virtual ~GraphPass() = default;
  /// Stable name ("gather-params").
  virtual std::string_view name() const = 0;
  /// One line saying what it does.
  virtual std::string_view description() const = 0;
  /// False for a pass that must run before the placements are resolved (it
  /// adds inputs that need placements of their own); context.placements is
  /// null then.
  virtual bool needsPlacements() const { return true; }
  /// Transforms `program` in place; the graph stays valid (verify()).
  virtual Status run(ir::ExportedProgram& program, GraphPassContext& context) = 0;
};

/// Appends the update of --optimizer to a train-step graph (appendOptimizer,
/// Optimizer.cpp).
class AppendOptimizer : public GraphPass {
 public:
  std::string_view name() const override { return "append-optimizer"; }
  std::string_view description() const override {
    return "append the --optimizer update of every parameter to a train step";
  }
  bool needsPlacements() const override { return false; }
  Status run(ir::ExportedProgram& program, GraphPassContext& context) override;
};

/// Reads each parameter stored sharded through an all-gather anchor
/// (insertParameterGathers, GatherParams.cpp).
class GatherParams : public GraphPass {
 public:
  std::string_view name() const override { return "gather-params"; }
  std::string_view description() const override {
    return "read each parameter stored sharded (fsdp) through an all-gather before its first use";
  }
  Status run(ir::ExportedProgram& program, GraphPassContext& context) override;
};

/// Pins the residual stream sharded on its sequence dim when the schema
/// asks (applySequenceParallel, SequenceParallel.cpp).
class SequenceParallel : public GraphPass {
 public:
  std::string_view name() const override { return "sequence-parallel"; }
  std::string_view description() const override {
    return "keep the residual stream sharded on its sequence dim between blocks (schema sequence_parallel)";
  }
  Status run(ir::ExportedProgram& program, GraphPassContext& context) override;
};

/// Shards the sequence over the context-parallel axis and gathers each
/// attention's keys and values (applyContextParallel, ContextParallel.cpp).
class ContextParallel : public GraphPass {
 public:
  std::string_view name() const override { return "context-parallel"; }
  std::string_view description() const override {
    return "shard the sequence on the cp axis; attention gathers keys and values (schema context_parallel)";
  }
  Status run(ir::ExportedProgram& program, GraphPassContext& context) override;
};

/// The graph passes `spmdc compile` runs, in order; append-optimizer only
/// with `optimizer`.
std::vector<std::unique_ptr<GraphPass>> defaultGraphPasses(bool optimizer = true);

}  // namespace spmd::passes
