// Ops from outside LibTorch: a graph may call an op registered from Python
// (transformers' MoE fallback is one), and the Python-free runtime has no
// kernel for it, so a program compiled around it would fail on every rank.
// Such an op compiles only when the schema gives it a rule, which says the
// user brings its kernel (spmd-run --load-library):
//
//   %moe = transformers.grouped_mm_fallback.default(...)    no rule: refused at compile time
//   %y   = spmdtest.scaled_add.default(%x, %b)              "rules": {"spmdtest.scaled_add.default": ...}:
//   compiled
#pragma once

#include <string_view>

#include "ir/Graph.h"
#include "schema/PlacementSchema.h"
#include "support/Status.h"

namespace spmd::schema {

/// True when `target` ("ns.op.overload") lies in a namespace LibTorch or
/// spmd-run itself provides kernels for (aten, _operator, torch, spmd, ...).
bool isLibTorchOp(std::string_view target);

/// Errors, in one line naming the node, its op and the fix, for the first
/// node of `program` whose op is not LibTorch's (isLibTorchOp) and that
/// neither a built-in rule nor `schema`'s "rules" cover. Independent of
/// --replicate-unknown: running such an op replicated fails just the same.
Status checkForeignOps(const ir::ExportedProgram& program, const PlacementSchema& schema);

}  // namespace spmd::schema
