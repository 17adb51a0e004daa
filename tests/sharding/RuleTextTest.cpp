// Rules written in the factor notation (a schema's "rules" for custom ops):
// parsing, sizing from a node's shapes, and one error per mistake.
//
//   "([m, k], [k, n]) -> ([m, n]) {k reduction(sum)}" on a[32, 64], b[64, 16]
//     -> "([i, j], [j, k]) -> ([i, k]) {i=32, j=64 reduction(sum), k=16}"
#include "../TestCatch.h"

#include "ir/Graph.h"
#include "sharding/RuleText.h"

using namespace spmd;
using namespace spmd::sharding;

namespace {

/// One node `target`(operands...) -> results, with these shapes.
struct OneNode {
  ir::Graph g;
  const ir::Node* node = nullptr;
  OneNode(const std::vector<std::vector<int64_t>>& ins, const std::vector<std::vector<int64_t>>& outs) {
    std::vector<ir::NamedArgument> args;
    auto value = [&](const std::string& name, const std::vector<int64_t>& shape) {
      auto v = g.addValue(name, ir::ValueKind::Tensor);
      REQUIRE(v.hasValue());
      (*v)->mutableType().dtype = ir::ScalarType::Float;
      for (int64_t s : shape) (*v)->mutableType().sizes.emplace_back(s);
      return *v;
    };
    for (size_t i = 0; i < ins.size(); ++i) {
      ir::Value* v = value("in" + std::to_string(i), ins[i]);
      g.addInput(v);
      args.push_back({"x" + std::to_string(i), ir::Argument::tensor(v), false});
    }
    std::vector<ir::Argument> results;
    for (size_t i = 0; i < outs.size(); ++i)
      results.push_back(ir::Argument::tensor(value("out" + std::to_string(i), outs[i])));
    auto n = g.addNode("n", "mylib.op.default", std::move(args), std::move(results));
    REQUIRE(n.hasValue());
    node = *n;
  }
};

std::string instantiate(const std::string& text, const OneNode& n) {
  auto t = parseRuleText(text);
  if (!t) return t.status().message();
  auto r = ruleFromTemplate(*t)(*n.node);
  return r ? r->str() : r.status().message();
}

}  // namespace

TEST_CASE("rule text: factors, reductions, merged dims and linearity", "[sharding][ruletext]") {
  OneNode mm({{32, 64}, {64, 16}}, {{32, 16}});
  CHECK(instantiate("([m, k], [k, n]) -> ([m, n]) {k reduction(sum)} linear-each(0, 1)", mm) ==
        "([i, j], [j, k]) -> ([i, k]) {i=32, j=64 reduction(sum), k=16} linear-each(0, 1)");
  OneNode rope({{2, 16, 4, 8}, {16, 8}}, {{2, 16, 4, 8}});
  CHECK(instantiate("([b, s, h, d], [s, d]) -> ([b, s, h, d])", rope) ==
        "([i, j, k, l], [j, l]) -> ([i, j, k, l]) {i=2, j=16, k=4, l=8}");
  OneNode merge({{2, 32}}, {{2, 4, 8}});
  CHECK(instantiate("([b, h d]) -> ([b, h, d])", merge) == "([i, j k]) -> ([i, j, k]) {i=2, j=4, k=8}");
  OneNode flat({{2, 32}}, {{2}});
  CHECK(instantiate("([b, h d]) -> ([b]) {h=4, d=8 replicated}", flat) ==
        "([i, j k]) -> ([i]) {i=2, j=4, k=8 replicated}");
  OneNode bcast({{8, 1}}, {{8, 5}});
  CHECK(instantiate("([i, 1]) -> ([i, j]) {j max}", bcast).find("expected") != std::string::npos);
  CHECK(instantiate("([i, 1]) -> ([i, j])", bcast) == "([i, 1]) -> ([i, j]) {i=8, j=5}");
}

TEST_CASE("rule text: each mistake is one error naming it", "[sharding][ruletext][bad]") {
  OneNode mm({{32, 64}, {64, 16}}, {{32, 16}});
  CHECK(instantiate("([m, k], [k, n]) ([m, n])", mm) ==
        "rule '([m, k], [k, n]) ([m, n])': at 17: expected '->'");
  CHECK(instantiate("([m, k], [k, n) -> ([m, n])", mm).find("expected ',' or ']'") != std::string::npos);
  CHECK(instantiate("([m, k]) -> ([m, k])", mm) ==
        "rule '([m, k]) -> ([m, k])' describes 1 tensor operands and 1 results; the node has 2 and 1");
  CHECK(instantiate("([m], [k, n]) -> ([m, n])", mm) ==
        "rule '([m], [k, n]) -> ([m, n])': operand 0 has rank 2, the rule gives it 1 dims");
  CHECK(instantiate("([m, k], [k, n]) -> ([m, n]) {k reduction(mean)}", mm)
            .find("expected sum, avg, max or min") != std::string::npos);
  CHECK(instantiate("([m, k], [k, n]) -> ([m, n]) linear-each(2)", mm) ==
        "rule '([m, k], [k, n]) -> ([m, n]) linear-each(2)': linearity names operand 2; the node has 2");
  OneNode merge({{2, 32}}, {{2}});
  CHECK(instantiate("([b, h d]) -> ([b])", merge) ==
        "rule '([b, h d]) -> ([b])': factor h is never alone in a dim; give its size, e.g. {h=8}");
  // Sizes that disagree with the shapes are RuleBuilder's error.
  CHECK(instantiate("([m, k], [n, k]) -> ([m, n])", mm) ==
        "sharding rule: factors of operand 1 dim 1 multiply to 64, but the dim has size 16");
}
