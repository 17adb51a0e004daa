// Mixed precision of a train step, as FSDP2's MixedPrecisionPolicy runs it.
//
// The casts are in the exported graph already: `python -m spmdc_export
// --train --mixed-precision bf16` traces the step with float32 master
// parameters as inputs, each cast to param_dtype where the step starts
// (the cast's node metadata records the policy: custom
// {"spmdc.mixed_precision": {"param_dtype": ..., "reduce_dtype": ...}}),
// and each gradient cast to reduce_dtype and then to float32 for the
// optimizer. This pass checks the policy asked for (--mixed-precision or
// the schema's "mixed_precision") against the archive's and places the
// collectives as FSDP2 does:
//
//   (fsdp, after gather-params)              becomes
//   %w_gathered = aten.alias(%w) [R]         %w_cast = aten._to_copy(%w, bf16)
//   %w_cast = aten._to_copy(%w_gathered)     %w_gathered: bf16 = aten.alias(%w_cast) [R]
//   ... = aten.mm(%x, %w_cast)               ... = aten.mm(%x, %w_gathered)
//
// so the all-gather moves param_dtype bytes (the cast runs on the shard,
// just before the gather's first reader), and each gradient is read through
// a layout anchor (its parameter's layout) at the value of reduce_dtype in
// its cast chain, so it is reduced (all-reduce or reduce-scatter) in that
// dtype. The optimizer (Optimizer.h) updates the float32 masters.
#pragma once

#include <optional>

#include "ir/Graph.h"
#include "passes/GraphPass.h"
#include "schema/PlacementSchema.h"

namespace spmd::passes {

/// The node metadata key (inside "custom") of a parameter cast's policy.
inline constexpr const char* kMixedPrecisionKey = "spmdc.mixed_precision";

/// The policy an archive was exported with (read from its parameter casts),
/// or nullopt for a step exported without one.
std::optional<schema::MixedPrecisionRequest> archivePolicy(const ir::ExportedProgram& program);

/// The policy asked for: --mixed-precision (`flag`) or the schema's field;
/// error when both are given and differ.
Expected<std::optional<schema::MixedPrecisionRequest>> requestedPolicy(
    const std::optional<schema::MixedPrecisionRequest>& flag, const schema::PlacementSchema& schema);

/// Checks the requested policy against the archive's and moves each fsdp
/// gather after its parameter's cast and each gradient's reduction to
/// reduce_dtype (see above). A policy is applied when the archive has one
/// (with a note when none was asked for); error when one is asked for and
/// the archive has none or another.
class MixedPrecision : public GraphPass {
 public:
  std::string_view name() const override { return "mixed-precision"; }
  std::string_view description() const override {
    return "check the mixed-precision policy; all-gather parameters after their cast, reduce gradients in "
           "reduce_dtype";
  }
  Status run(ir::ExportedProgram& program, GraphPassContext& context) override;
};

}  // namespace spmd::passes
