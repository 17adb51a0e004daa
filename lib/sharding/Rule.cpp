// RuleBuilder and rule printing.
#include "sharding/Rule.h"

#include <algorithm>
#include <utility>

namespace spmd::sharding {

std::vector<ir::Value*> tensorOperands(const ir::Node& node) {
  std::vector<ir::Value*> out;
  for (ir::Value* v : node.inputValues())
    if (v->isTensor()) out.push_back(v);
  return out;
}

std::vector<ir::Value*> tensorResults(const ir::Node& node) {
  std::vector<ir::Value*> out;
  for (ir::Value* v : node.outputValues())
    if (v->isTensor()) out.push_back(v);
  return out;
}

std::vector<int64_t> shapeHint(const ir::Value& v) {
  std::vector<int64_t> s;
  s.reserve(v.type().sizes.size());
  for (const auto& d : v.type().sizes) s.push_back(d.value());
  return s;
}

int64_t normalizeDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

RuleBuilder::RuleBuilder(const ir::Node& node) {
  for (ir::Value* v : tensorOperands(node)) {
    operandShapes_.push_back(shapeHint(*v));
    rule_.operands.emplace_back(static_cast<size_t>(v->type().rank()));
  }
  for (ir::Value* v : tensorResults(node)) {
    resultShapes_.push_back(shapeHint(*v));
    rule_.results.emplace_back(static_cast<size_t>(v->type().rank()));
  }
}

int RuleBuilder::factor(int64_t size, FactorKind kind, ReduceOp reduce) {
  rule_.factors.push_back({size, kind, reduce});
  return static_cast<int>(rule_.factors.size()) - 1;
}

int RuleBuilder::exchangeFactor(int64_t size, int operand) {
  int f = factor(size);
  rule_.factors.back().exchange = true;
  rule_.factors.back().exchangeOperand = operand;
  return f;
}

// Appends `f` to dim `dim` of tensor `i` of `tensors`; out of range (a
// node the verifier did not see) records an error for build().
static void addToDim(std::vector<DimFactors>& tensors, int i, int64_t dim, int f, const char* what,
                     Status& error) {
  if (i < 0 || static_cast<size_t>(i) >= tensors.size() || dim < 0 ||
      dim >= static_cast<int64_t>(tensors[static_cast<size_t>(i)].size())) {
    if (error.isOk())
      error = Status::error(std::string("sharding rule: dim ") + std::to_string(dim) + " of " + what + " " +
                            std::to_string(i) + " is out of range");
    return;
  }
  tensors[static_cast<size_t>(i)][static_cast<size_t>(dim)].push_back(f);
}

RuleBuilder& RuleBuilder::operand(int i, int64_t dim, int f) {
  addToDim(rule_.operands, i, dim, f, "operand", error_);
  return *this;
}

RuleBuilder& RuleBuilder::result(int i, int64_t dim, int f) {
  addToDim(rule_.results, i, dim, f, "result", error_);
  return *this;
}

int RuleBuilder::addFactor(const std::vector<int64_t>& operandDims, const std::vector<int64_t>& resultDims,
                           int64_t size, FactorKind kind, ReduceOp reduce) {
  int f = factor(size, kind, reduce);
  for (size_t i = 0; i < operandDims.size(); ++i)
    if (operandDims[i] >= 0) operand(static_cast<int>(i), operandDims[i], f);
  for (size_t i = 0; i < resultDims.size(); ++i)
    if (resultDims[i] >= 0) result(static_cast<int>(i), resultDims[i], f);
  return f;
}

RuleBuilder& RuleBuilder::linear(Linearity l, const std::vector<int>& operands) {
  rule_.linearity = l;
  rule_.linearOperands.assign(static_cast<size_t>(numOperands()), operands.empty());
  for (int i : operands) rule_.linearOperands[static_cast<size_t>(i)] = true;
  return *this;
}

RuleBuilder& RuleBuilder::additive(int i) {
  rule_.additiveOperands.resize(static_cast<size_t>(numOperands()), false);
  rule_.additiveOperands[static_cast<size_t>(i)] = true;
  return *this;
}

RuleBuilder& RuleBuilder::replicateRest() {
  auto cover = [&](std::vector<std::vector<int>>& dims, const std::vector<int64_t>& shape) {
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d].empty() && shape[d] != 1) dims[d].push_back(factor(shape[d], FactorKind::NeedReplication));
  };
  for (size_t i = 0; i < rule_.operands.size(); ++i) cover(rule_.operands[i], operandShapes_[i]);
  for (size_t i = 0; i < rule_.results.size(); ++i) cover(rule_.results[i], resultShapes_[i]);
  return *this;
}

Expected<OpShardingRule> RuleBuilder::build() {
  SPMD_RETURN_IF_ERROR(error_);
  auto check = [&](const std::vector<DimFactors>& tensors, const std::vector<std::vector<int64_t>>& shapes,
                   const char* what) -> Status {
    for (size_t i = 0; i < tensors.size(); ++i) {
      for (size_t d = 0; d < tensors[i].size(); ++d) {
        int64_t product = 1;
        bool overflow = false;
        bool exchange = false;
        for (int f : tensors[i][d]) exchange |= rule_.factors[static_cast<size_t>(f)].exchange;
        if (exchange) continue;  // its dims differ in size by design
        for (int f : tensors[i][d])
          overflow |= __builtin_mul_overflow(product, rule_.factors[static_cast<size_t>(f)].size, &product);
        bool ok = tensors[i][d].empty() || (!overflow && product == shapes[i][d]);
        if (!ok)
          return Status::error(std::string("sharding rule: factors of ") + what + " " + std::to_string(i) +
                               " dim " + std::to_string(d) + " multiply to " + std::to_string(product) +
                               ", but the dim has size " + std::to_string(shapes[i][d]));
      }
    }
    return Status::ok();
  };
  SPMD_RETURN_IF_ERROR(check(rule_.operands, operandShapes_, "operand"));
  SPMD_RETURN_IF_ERROR(check(rule_.results, resultShapes_, "result"));
  // A dim of size 0 (x.repeat(0)) holds nothing to split: it and every
  // factor it shares with others stay whole (a zero-size strided shard
  // would have no rows to split).
  auto emptyDimsWhole = [&](const std::vector<DimFactors>& tensors) {
    for (const DimFactors& dims : tensors)
      for (const std::vector<int>& fs : dims) {
        bool empty = std::any_of(fs.begin(), fs.end(),
                                 [&](int f) { return rule_.factors[static_cast<size_t>(f)].size == 0; });
        for (int f : fs)
          if (empty) rule_.factors[static_cast<size_t>(f)].kind = FactorKind::NeedReplication;
      }
  };
  emptyDimsWhole(rule_.operands);
  emptyDimsWhole(rule_.results);
  if (rule_.linearOperands.empty()) rule_.linearOperands.assign(rule_.operands.size(), false);
  rule_.additiveOperands.resize(rule_.operands.size(), false);
  return std::move(rule_);
}

namespace {

// Factor f's name: i, j, ..., z, then i1, j1, ...
void appendFactorName(std::string& s, int f) {
  s += static_cast<char>('i' + f % 18);
  if (f >= 18) s += std::to_string(f / 18);
}

// "([i, j], [j, k])": each tensor's dims, "1" for a dim without factors.
void appendTensors(std::string& s, const std::vector<DimFactors>& ts) {
  s += '(';
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) s += ", ";
    s += '[';
    for (size_t d = 0; d < ts[i].size(); ++d) {
      if (d) s += ", ";
      if (ts[i][d].empty()) s += '1';
      for (size_t k = 0; k < ts[i][d].size(); ++k) {
        if (k) s += ' ';
        appendFactorName(s, ts[i][d][k]);
      }
    }
    s += ']';
  }
  s += ')';
}

}  // namespace

std::string OpShardingRule::str() const {
  std::string s;
  s.reserve(64);
  appendTensors(s, operands);
  s += " -> ";
  appendTensors(s, results);
  s += " {";
  for (size_t f = 0; f < factors.size(); ++f) {
    if (f) s += ", ";
    appendFactorName(s, static_cast<int>(f));
    s += '=';
    s += std::to_string(factors[f].size);
    if (factors[f].kind == FactorKind::Reduction) {
      s += " reduction(";
      s += reduceOpName(factors[f].reduce);
      s += ')';
    }
    if (factors[f].kind == FactorKind::NeedReplication) s += " replicated";
    if (factors[f].exchange) s += " exchange";
  }
  s += '}';
  if (linearity != Linearity::None) {
    s += linearity == Linearity::Each    ? " linear-each("
         : linearity == Linearity::Joint ? " linear-joint("
                                         : " value-independent(";
    bool first = true;
    for (size_t i = 0; i < linearOperands.size(); ++i)
      if (linearOperands[i]) {
        if (!first) s += ", ";
        s += std::to_string(i);
        first = false;
      }
    s += ')';
  }
  return s;
}

}  // namespace spmd::sharding
