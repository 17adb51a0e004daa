// Turning a node's export arguments into boxed call slots, once, at prepare
// time:
//
//   schema aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)
//   node   %add = aten.add.Tensor(%mean, 1e-06)
//   slots  [Value %mean] [Constant 0-d f64 wrapped-number tensor 1e-06]
//          [Constant 1 (alpha, from the schema default)]
//
// A slot is a constant IValue (ints, floats incl. inf/nan, bools, c10 dtype/
// layout/memory-format codes mapped from the export's own numbers, the
// target device, wrapped numbers), one runtime value, or a list reused on
// every run whose elements are filled from runtime values (Tensor[],
// Tensor?[], SymInt[] mixing constants and SymInt values).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::runtime {

/// How one schema argument of a node gets its IValue at run time.
struct ArgSlot {
  enum class Kind : uint8_t {
    Constant,  ///< `constant` as is
    Value,     ///< the runtime value `valueId`
    List,      ///< `constant` is a list; elements with elementIds[i] >= 0 are set at run time
  };
  Kind kind = Kind::Constant;
  /// Value: moved instead of copied (this is the value's last use).
  bool moveValue = false;
  /// List: elements are tensors, reset to `emptyElement` after each call so
  /// the list does not keep them alive.
  bool tensorElements = false;
  /// Value: the value id.
  int valueId = -1;
  /// Constant: the argument. List: the list reused on every run.
  c10::IValue constant;
  /// List: per element, the value id read at run time, or -1 (constant / None).
  std::vector<int> elementIds;
  /// List of tensors: the element a released slot holds (undefined tensor or None).
  c10::IValue emptyElement;
};

/// Converts node argument `arg` for schema argument `schemaArg`. Device
/// arguments (Device, Device?) become `device`, whether the export passed a
/// device (cpu when traced on the CPU) or None. Errors are one line without
/// the node prefix ("argument 'other': as_string cannot pass as Tensor").
Expected<ArgSlot> convertArgument(const c10::Argument& schemaArg, const ir::Argument& arg,
                                  const c10::Device& device);

/// The slot of an argument the node omitted: `device` for a device argument
/// (a factory op left without a device makes its tensor on the run's
/// device, not the CPU), else the schema's default. Error when the argument
/// has no default (a required argument is missing).
Expected<ArgSlot> defaultArgument(const c10::Argument& schemaArg, const c10::Device& device);

}  // namespace spmd::runtime
