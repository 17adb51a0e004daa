// Operators spmd_runtime implements itself, called boxed exactly like
// dispatcher kernels:
//
//   const LocalOp* op = findBuiltin("_operator.mul");   // SymInt arithmetic
//   stack = {c10::IValue(3), c10::IValue(8)};
//   op->kernel(stack);                                   // stack == {24}
//
// Builtins (aten.sym_size.int, _operator.*, torch.sym_*) are always
// evaluated here: their values are plain ints in the executor's value table.
// The collectives (spmd.*) are local ops too (CollectiveOps.h); every
// other op is the linked LibTorch's, called through the dispatcher.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <deque>
#include <string_view>
#include <unordered_map>

namespace spmd::runtime {

/// A boxed kernel: pops its schema's arguments from the end of the stack and
/// pushes its returns. Errors are thrown as c10::Error (the executor turns
/// them into a Status naming the node).
using BoxedKernel = void (*)(torch::jit::Stack& stack);

/// An operator implemented by spmd_runtime.
struct LocalOp {
  /// The schema the executor fills arguments from (names, defaults).
  const c10::FunctionSchema* schema = nullptr;
  BoxedKernel kernel = nullptr;
};

/// The builtin for an export target ("aten.sym_size.int", "_operator.mul",
/// "torch.sym_max", ...), or null when the target is not a builtin.
const LocalOp* findBuiltin(std::string_view target);

/// One entry of a table of local ops: target, schema text, kernel.
struct LocalOpDef {
  const char* target;
  const char* schema;
  BoxedKernel kernel;
};

/// Looks `target` up in a table built once from the array `Defs` (one table
/// per array; schemas parsed on first use and kept for the process).
template <const auto& Defs>
const LocalOp* findLocalOp(std::string_view target) {
  static const std::unordered_map<std::string_view, LocalOp> kTable = [] {
    static std::deque<c10::FunctionSchema> schemas;
    std::unordered_map<std::string_view, LocalOp> table;
    for (const LocalOpDef& d : Defs) {
      schemas.push_back(torch::jit::parseSchema(d.schema));
      table.emplace(d.target, LocalOp{&schemas.back(), d.kernel});
    }
    return table;
  }();
  auto it = kTable.find(target);
  return it == kTable.end() ? nullptr : &it->second;
}

}  // namespace spmd::runtime
