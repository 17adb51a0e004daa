// Helpers for the op-rule tests: real archives (read once, without
// weights), hand-built graphs (only for nodes IR text cannot hold or the IR
// verifier refuses), rule text and propagation on a 1-D mesh.
//
//   TestGraph g;
//   ir::Value* w = g.input("w", {256, 64});
//   ir::Value* t = g.input("t", {2, 16}, ir::ScalarType::Long);
//   g.node("aten.embedding.default", {{"weight", T(w)}, {"indices", T(t)}}, {{"out", {2, 16, 64}}});
//   ruleText(g.last());                       // "([l, k], [i, j]) -> ([i, j, k]) {...}"
//   Placements(g.program(), {{"t", "S(0)"}}, 2).result()  // sharding::Propagation
#pragma once

#include "../TestCatch.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "pt2/Archive.h"
#include "sharding/Propagation.h"
#include "sharding/RuleRegistry.h"

namespace spmd::testing {

/// testdata/pt2/<model>/model.pt2, read once per test run (no weights).
inline const ir::ExportedProgram& model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<pt2::Archive>> cache;
  auto& slot = cache[name];
  if (!slot) {
    pt2::ReadOptions opts;
    opts.loadWeights = false;
    auto a = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/" + name + "/model.pt2", opts);
    INFO(a.status().message());
    REQUIRE(a.hasValue());
    slot = std::make_unique<pt2::Archive>(std::move(*a));
  }
  return slot->program;
}

/// The rule text of `node` from the default registry, or "error: <message>".
inline std::string ruleText(const ir::Node& node) {
  const sharding::RuleFn* fn = sharding::defaultRuleRegistry().find(node.target());
  if (!fn) return "no rule for " + node.target();
  auto rule = (*fn)(node);
  if (!rule) return "error: " + rule.status().message();
  return rule->str();
}

/// A tensor argument.
inline ir::Argument T(ir::Value* v) { return ir::Argument::tensor(v); }
/// An int argument.
inline ir::Argument I(int64_t v) { return ir::Argument::integer(v); }
/// One output of a hand-built node: a fresh tensor value, or None (empty name).
struct Out {
  std::string name;
  std::vector<int64_t> sizes;
  ir::ScalarType dtype = ir::ScalarType::Float;
};

/// Builds a small program: inputs (user inputs) and nodes; the last node's
/// results are the program's outputs.
class TestGraph {
 public:
  /// A user input tensor.
  ir::Value* input(const std::string& name, std::vector<int64_t> sizes,
                   ir::ScalarType dtype = ir::ScalarType::Float) {
    ir::Value* v = tensor(name, sizes, dtype);
    p_.graph.addInput(v);
    ir::InputSpec spec;
    spec.value = v;
    spec.name = name;
    p_.signature.inputs.push_back(spec);
    return v;
  }
  /// Appends a node with named arguments; returns its outputs (null for None).
  std::vector<ir::Value*> node(const std::string& target,
                               std::vector<std::pair<std::string, ir::Argument>> args,
                               const std::vector<Out>& outs) {
    std::vector<ir::NamedArgument> inputs;
    for (auto& [name, a] : args) inputs.push_back({name, std::move(a), false});
    std::vector<ir::Argument> outputs;
    std::vector<ir::Value*> values;
    for (const Out& o : outs) {
      values.push_back(o.name.empty() ? nullptr : tensor(o.name, o.sizes, o.dtype));
      outputs.push_back(o.name.empty() ? ir::Argument::none() : ir::Argument::tensor(values.back()));
    }
    auto n = p_.graph.addNode("n" + std::to_string(p_.graph.nodes().size()), target, std::move(inputs),
                              std::move(outputs));
    INFO(n.status().message());
    REQUIRE(n.hasValue());
    p_.graph.mutableOutputs().clear();
    for (ir::Value* v : values)
      if (v) p_.graph.addOutput(ir::Argument::tensor(v));
    return values;
  }
  /// The last node added.
  const ir::Node& last() const { return *p_.graph.nodes().back(); }
  const ir::ExportedProgram& program() const { return p_; }

 private:
  ir::Value* tensor(const std::string& name, const std::vector<int64_t>& sizes, ir::ScalarType dtype) {
    auto v = p_.graph.addValue(name, ir::ValueKind::Tensor);
    REQUIRE(v.hasValue());
    (*v)->mutableType().dtype = dtype;
    for (int64_t s : sizes) (*v)->mutableType().sizes.emplace_back(s);
    return *v;
  }
  ir::ExportedProgram p_;
};

/// Propagation of a program on a 1-D mesh, inputs placed by user input name
/// or parameter FQN (the rest replicated).
class Placements {
 public:
  Placements(const ir::ExportedProgram& p, const std::map<std::string, std::string>& inputs,
             int64_t meshSize) {
    auto mesh = sharding::Mesh::create({meshSize});
    REQUIRE(mesh.hasValue());
    std::vector<sharding::ShardingSpec> specs;
    std::map<std::string, std::string> unused = inputs;
    for (ir::Value* v : p.graph.inputs()) {
      sharding::ShardingSpec s = sharding::ShardingSpec::replicated(1);
      // Match a user input's name or a parameter's FQN.
      std::string key = v->name();
      for (const auto& spec : p.signature.inputs)
        if (spec.value == v && inputs.count(spec.target)) key = spec.target;
      if (auto it = inputs.find(key); it != inputs.end()) {
        auto pl = sharding::parsePlacement(it->second);
        REQUIRE(pl.hasValue());
        s.placements[0] = *pl;
        unused.erase(key);
      }
      specs.push_back(s);
    }
    INFO("unmatched input placements: " << unused.size());
    REQUIRE(unused.empty());
    auto r = sharding::propagate(p, specs, *mesh, sharding::defaultRuleRegistry());
    INFO(r.status().message());
    REQUIRE(r.hasValue());
    r_ = std::move(*r);
  }
  /// The layouts of every value and node.
  const sharding::Propagation& result() const { return r_; }

 private:
  sharding::Propagation r_;
};

}  // namespace spmd::testing
