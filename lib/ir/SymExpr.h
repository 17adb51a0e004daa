// Symbolic integer expressions for dynamic shapes.
//
// torch.export writes sizes as sympy `srepr` strings:
//   "Mul(Integer(8), Symbol('s52', positive=True, integer=True))"
// parseSymExpr turns that into a small tree; a Dim is a size that is either
// a constant or such a tree, and evaluates once symbols are bound from real
// input shapes:
//   Dim d = *parseSymExpr("Mul(Integer(8), Symbol('s52'))");
//   d.str() == "8*s52";  d.evaluate({{"s52", 3}}) == 24
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/Status.h"

namespace spmd::ir {

/// One node of a symbolic integer expression.
struct SymExpr {
  enum class Kind { Integer, Symbol, Add, Mul, FloorDiv, Mod, Max, Min, Pow, CeilDiv };
  Kind kind = Kind::Integer;
  int64_t value = 0;                                 ///< for Integer
  std::string name;                                  ///< for Symbol
  std::vector<std::shared_ptr<const SymExpr>> args;  ///< operands otherwise
};

/// Bindings from symbol name to value.
using SymBindings = std::map<std::string, int64_t, std::less<>>;

/// A size: a constant, or a symbolic expression.
class Dim {
 public:
  Dim() = default;
  /// A constant size.
  Dim(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  /// A symbolic size (`hint` is the trace-time value, informative only).
  Dim(std::shared_ptr<const SymExpr> expr, int64_t hint) : value_(hint), expr_(std::move(expr)) {}

  bool isStatic() const { return expr_ == nullptr; }
  /// The constant; for symbolic dims the trace-time hint.
  int64_t value() const { return value_; }
  const std::shared_ptr<const SymExpr>& expr() const { return expr_; }
  /// Evaluates with `bindings`; error names the unbound symbol.
  Expected<int64_t> evaluate(const SymBindings& bindings) const;
  /// "64", or the expression in infix form ("8*s52", "s27*s52").
  std::string str() const;
  /// Symbols the dim mentions, sorted.
  std::vector<std::string> symbols() const;
  /// Structural equality (constants by value, expressions by printed form).
  bool operator==(const Dim& other) const;

 private:
  int64_t value_ = 0;
  std::shared_ptr<const SymExpr> expr_;
};

/// Parses a sympy srepr string (Integer, Symbol, Add, Mul, FloorDiv,
/// CeilingDiv/CeilDiv, Mod, Max, Min, Pow) or a plain infix fallback of a
/// single symbol or integer. A bare Integer(...) yields a static Dim.
Expected<Dim> parseSymExpr(std::string_view text, int64_t hint = 0);

/// Evaluates a SymExpr tree.
Expected<int64_t> evaluateSymExpr(const SymExpr& e, const SymBindings& bindings);

/// Builders: an integer, a symbol, an operation over `args`.
std::shared_ptr<const SymExpr> symInteger(int64_t value);
std::shared_ptr<const SymExpr> symSymbol(std::string name);
std::shared_ptr<const SymExpr> symOp(SymExpr::Kind kind, std::vector<std::shared_ptr<const SymExpr>> args);

/// Infix form of a SymExpr tree.
std::string symExprStr(const SymExpr& e);

}  // namespace spmd::ir
