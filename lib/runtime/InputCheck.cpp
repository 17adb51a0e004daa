// Input checks with symbol binding: static dims compare, plain-symbol dims
// bind (and are range-checked once), expression dims evaluate afterwards.
#include "runtime/InputCheck.h"

#include <ATen/core/Tensor.h>

#include <limits>
#include <optional>

#include "runtime/TypeMap.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

std::string rangeText(const ir::RangeConstraint& r) {
  if (r.max == std::numeric_limits<int64_t>::max()) return ">= " + std::to_string(r.min);
  return std::to_string(r.min) + ".." + std::to_string(r.max);
}

std::string dtypeName(c10::ScalarType t) {
  std::optional<ir::ScalarType> ours = fromC10ScalarType(t);
  return ours ? std::string(ir::scalarTypeName(*ours)) : std::string(c10::toString(t));
}

}  // namespace

Status checkInputNames(const std::vector<std::string>& given, const std::vector<std::string>& userNames) {
  std::vector<const std::string*> givenAs(userNames.size(), nullptr);
  for (const std::string& name : given) {
    size_t index = userNames.size();
    for (size_t i = 0; i < userNames.size() && index == userNames.size(); ++i)
      if (name == userNames[i] || name == "input." + std::to_string(i)) index = i;
    if (index == userNames.size()) {
      std::string known;
      for (size_t i = 0; i < userNames.size(); ++i)
        known += (i ? ", " : "") + ("input." + std::to_string(i)) + " (" + userNames[i] + ")";
      return Status::error("unknown input '" + elided(name) + "'; the program takes " +
                           (known.empty() ? "none" : known));
    }
    if (givenAs[index] != nullptr)
      return Status::error("input '" + userNames[index] + "' is given twice, as '" + *givenAs[index] +
                           "' and '" + name + "'");
    givenAs[index] = &name;
  }
  return Status::ok();
}

int InputChecker::symbolIndex(const std::string& name, const RangeMap& ranges) {
  for (size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i].name == name) return static_cast<int>(i);
  Symbol s{name, {}};
  if (auto it = ranges.find(name); it != ranges.end()) s.range = it->second;
  symbols_.push_back(std::move(s));
  return static_cast<int>(symbols_.size()) - 1;
}

Expected<InputChecker> InputChecker::create(const ir::Graph& graph, const RangeMap& ranges,
                                            c10::Device device) {
  InputChecker c;
  c.device_ = device;
  for (const ir::Value* v : graph.inputs()) {
    InputRule rule;
    rule.name = v->name();
    rule.tensor = v->isTensor();
    if (rule.tensor) {
      SPMD_ASSIGN_OR_RETURN(rule.dtype, toC10ScalarType(v->type().dtype));
      rule.typeStr = v->type().str();
      for (const ir::Dim& d : v->type().sizes) {
        DimRule dr;
        if (d.isStatic()) {
          dr.value = d.value();
        } else if (d.expr()->kind == ir::SymExpr::Kind::Symbol) {
          dr.kind = DimRule::Kind::Symbol;
          dr.symbol = c.symbolIndex(d.expr()->name, ranges);
        } else {
          dr.kind = DimRule::Kind::Expr;
          dr.expr = d;
          c.hasExprDims_ = true;
        }
        rule.dims.push_back(std::move(dr));
      }
    }
    c.inputs_.push_back(std::move(rule));
  }
  return c;
}

Status InputChecker::check(const std::vector<c10::IValue>& inputs) const {
  if (inputs.size() != inputs_.size())
    return Status::error("the program takes " + std::to_string(inputs_.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  struct Binding {
    int64_t value = 0;
    int input = -1;
    size_t dim = 0;
  };
  std::vector<Binding> bound(symbols_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputRule& rule = inputs_[i];
    const std::string what = "input '" + rule.name + "'";
    if (!rule.tensor) {
      if (!inputs[i].isInt() && !inputs[i].isDouble() && !inputs[i].isBool())
        return Status::error(what + " must be a number");
      continue;
    }
    if (!inputs[i].isTensor()) return Status::error(what + " must be a tensor");
    const at::Tensor& t = inputs[i].toTensor();
    if (!t.defined()) return Status::error(what + " is an undefined tensor");
    if (t.device() != device_)
      return Status::error(what + " is on " + t.device().str() + ", but the program runs on " +
                           device_.str());
    if (t.scalar_type() != rule.dtype)
      return Status::error(what + " has dtype " + dtypeName(t.scalar_type()) + ", but the program expects " +
                           dtypeName(rule.dtype) + " (" + rule.typeStr + ")");
    if (t.dim() != static_cast<int64_t>(rule.dims.size()))
      return Status::error(what + " has rank " + std::to_string(t.dim()) + ", but the program expects rank " +
                           std::to_string(rule.dims.size()) + " (" + rule.typeStr + ")");
    for (size_t d = 0; d < rule.dims.size(); ++d) {
      const DimRule& dr = rule.dims[d];
      const int64_t size = t.size(static_cast<int64_t>(d));
      const std::string where = what + " dim " + std::to_string(d) + " is " + std::to_string(size);
      if (dr.kind == DimRule::Kind::Static && size != dr.value)
        return Status::error(where + ", but the program expects " + std::to_string(dr.value) + " (" +
                             rule.typeStr + ")");
      if (dr.kind != DimRule::Kind::Symbol) continue;
      const Symbol& sym = symbols_[static_cast<size_t>(dr.symbol)];
      Binding& b = bound[static_cast<size_t>(dr.symbol)];
      if (b.input >= 0) {
        if (b.value != size)
          return Status::error(where + ", but symbol " + sym.name + " is " + std::to_string(b.value) +
                               " from input '" + inputs_[static_cast<size_t>(b.input)].name + "' dim " +
                               std::to_string(b.dim));
        continue;
      }
      if (size < sym.range.min || size > sym.range.max)
        return Status::error(where + ", but the program allows " + rangeText(sym.range) + " (symbol " +
                             sym.name + ")");
      b = Binding{size, static_cast<int>(i), d};
    }
  }
  if (!hasExprDims_) return Status::ok();
  ir::SymBindings bindings;
  for (size_t s = 0; s < symbols_.size(); ++s)
    if (bound[s].input >= 0) bindings[symbols_[s].name] = bound[s].value;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputRule& rule = inputs_[i];
    for (size_t d = 0; d < rule.dims.size(); ++d) {
      if (rule.dims[d].kind != DimRule::Kind::Expr) continue;
      Expected<int64_t> want = rule.dims[d].expr.evaluate(bindings);
      if (!want) continue;  // mentions a symbol no input binds: nothing to check against
      const int64_t size = inputs[i].toTensor().size(static_cast<int64_t>(d));
      if (size != *want)
        return Status::error("input '" + rule.name + "' dim " + std::to_string(d) + " is " +
                             std::to_string(size) + ", but the program expects " + rule.dims[d].expr.str() +
                             " = " + std::to_string(*want));
    }
  }
  return Status::ok();
}

}  // namespace spmd::runtime
