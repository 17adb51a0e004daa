// Hand-built graphs for executor tests.
//
//   TestGraph t;
//   ir::Value* x = t.input("x", ir::ScalarType::Float, {2, 3});
//   ir::Value* r = t.node("relu", "aten.relu.default", {{"self", tensor(x)}});
//   t.output(r);
#pragma once

#include <string>
#include <vector>

#include "ir/Graph.h"

namespace spmd::runtime::test {

/// Shorthand for a tensor argument.
inline ir::Argument tensor(ir::Value* v) { return ir::Argument::tensor(v); }
inline ir::Argument integer(int64_t v) { return ir::Argument::integer(v); }
inline ir::Argument floating(double v) { return ir::Argument::floating(v); }
inline ir::Argument ints(std::vector<int64_t> v) { return ir::Argument::integers(std::move(v)); }

/// A symbolic dim on symbol `name` ("s0").
inline ir::Dim symbol(const std::string& name, int64_t hint = 4) {
  return *ir::parseSymExpr("Symbol('" + name + "', positive=True, integer=True)", hint);
}

/// A graph under construction; every helper aborts on error (tests only).
struct TestGraph {
  ir::Graph g;

  ir::Value* value(const std::string& name, ir::ValueKind kind = ir::ValueKind::Tensor) {
    return *g.addValue(name, kind);
  }
  ir::Value* input(const std::string& name, ir::ScalarType dtype, std::vector<ir::Dim> sizes) {
    ir::Value* v = value(name);
    v->mutableType().dtype = dtype;
    v->mutableType().sizes = std::move(sizes);
    g.addInput(v);
    return v;
  }
  /// A node with one tensor output named like the node.
  ir::Value* node(const std::string& name, const std::string& target, std::vector<ir::NamedArgument> inputs) {
    ir::Value* out = value(name);
    (void)*g.addNode(name, target, std::move(inputs), {ir::Argument::tensor(out)});
    return out;
  }
  /// A node with one SymInt output named like the node.
  ir::Value* symNode(const std::string& name, const std::string& target,
                     std::vector<ir::NamedArgument> inputs) {
    ir::Value* out = value(name, ir::ValueKind::SymInt);
    (void)*g.addNode(name, target, std::move(inputs), {ir::Argument::symInt(out)});
    return out;
  }
  /// A node with several outputs; returns the node.
  ir::Node* multi(const std::string& name, const std::string& target, std::vector<ir::NamedArgument> inputs,
                  std::vector<ir::Argument> outputs) {
    return *g.addNode(name, target, std::move(inputs), std::move(outputs));
  }
  void output(ir::Value* v) { g.addOutput(ir::Argument::tensor(v)); }
};

}  // namespace spmd::runtime::test
