// The IR verifier: checks every value's type and every node's arguments
// right after a program is read, so that no later code (sharding rules,
// cost model, expansion, runtime) ever sees a malformed graph. After it
// passes, those may treat violations as broken invariants; before it,
// nothing may abort.
//
//   SPMD_RETURN_IF_ERROR(ir::verifyProgram(program));
//   // "node %permute_3 (aten.permute.default): dims [0, 2] is not a
//   //  permutation of the 3 dims of its input; re-export the model"
//
// Values: sizes non-negative (symbolic sizes by their hint), the product
// of the sizes times the element size inside int64, one stride per dim,
// strides non-negative, the last element reachable (storage offset +
// sum((size - 1) * stride)) inside int64 bytes.
// Nodes: SSA (Graph::verify), argument values of the kind their argument
// says, and per op the arguments the sharding rules and the runtime index
// with: dims in [-rank, rank), permutations, size lists as long as the
// result's rank, matrix operands of the rank the op needs.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::ir {

/// What the verifier knows beyond the IR.
struct VerifyOptions {
  /// Storage offset (in elements) of a tensor value, when the source
  /// records one (a .pt2's tensor_values); 0 when null.
  std::function<int64_t(const Value&)> storageOffset;
};

/// Checks one tensor type (see the file comment); `what` names it in the
/// error ("input %x", "node %mm (aten.mm.default) result %mm").
Status verifyTensorType(const TensorType& type, int64_t storageOffset, std::string_view what);

/// Checks the arguments of one node against its op (see the file comment).
Status verifyNode(const Node& node);

/// Checks the whole program: SSA, every value's type, every node. Errors are
/// one line naming the value or node and ending with what to do.
Status verifyProgram(const ExportedProgram& program, const VerifyOptions& options = {});

}  // namespace spmd::ir
