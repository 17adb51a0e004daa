// Checking real inputs against a program's input types, binding symbolic
// sizes on the way:
//
//   input %tokens: i64[s52, s27] user_input      ranges s52: 1..64, s27: 2..64
//   check({tensor i64 [3, 24]})  -> OK (s52 = 3, s27 = 24)
//   check({tensor i64 [1, 65]})  -> "input 'tokens' dim 1 is 65, but the
//                                    program allows 2..64 (symbol s27)"
//
// A dim that is a plain symbol binds it (the first input mentioning it wins;
// later ones must agree); static dims must match exactly; dims that are
// expressions must evaluate to the actual size. Symbols are never bound from
// trace-time hints.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <map>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Errors for an input tensor named neither "input.<i>" nor the signature
/// name `userNames[i]` of any user input, or for two tensors naming one
/// input. Both the one-device and the distributed paths call it, so they
/// accept the same files. Messages name the tensor and what the program takes:
///   "unknown input 'foo'; the program takes input.0 (x), input.1 (y)"
///   "input 'x' is given twice, as 'input.0' and 'x'"
Status checkInputNames(const std::vector<std::string>& given, const std::vector<std::string>& userNames);

/// Symbol ranges by symbol name.
using RangeMap = std::map<std::string, ir::RangeConstraint, std::less<>>;

/// Checks the inputs of one graph: kind, device, dtype, rank and sizes.
class InputChecker {
 public:
  InputChecker() = default;
  /// Prepares the checks for `graph`'s inputs. Errors: an input dtype the
  /// linked LibTorch lacks.
  static Expected<InputChecker> create(const ir::Graph& graph, const RangeMap& ranges, c10::Device device);

  /// Checks `inputs` (one per graph input, in order). Errors are one line
  /// naming the input: wrong count, not a tensor, wrong device, dtype, rank,
  /// a size that differs from a static size or from a symbol bound earlier,
  /// a symbol out of its range.
  Status check(const std::vector<c10::IValue>& inputs) const;

 private:
  struct DimRule {
    enum class Kind : uint8_t { Static, Symbol, Expr };
    Kind kind = Kind::Static;
    int64_t value = 0;  ///< Static: the size
    int symbol = -1;    ///< Symbol: index into symbols_
    ir::Dim expr;       ///< Expr: the expression
  };
  struct InputRule {
    std::string name;
    bool tensor = true;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    std::string typeStr;
    std::vector<DimRule> dims;
  };
  struct Symbol {
    std::string name;
    ir::RangeConstraint range;
  };

  int symbolIndex(const std::string& name, const RangeMap& ranges);

  std::vector<InputRule> inputs_;
  std::vector<Symbol> symbols_;
  c10::Device device_ = c10::kCPU;
  bool hasExprDims_ = false;
};

}  // namespace spmd::runtime
