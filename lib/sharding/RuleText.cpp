// Rules from the factor notation (see RuleText.h): a small recursive-descent
// parser, then a RuleFn that sizes the factors from each node's shapes.
//
//   "([m, k], [k, n]) -> ([m, n]) {k reduction(sum)}" on mm(a[32, 64], b[64, 16])
//     -> m=32 (a dim 0), k=64 (a dim 1), n=16: ([i, j], [j, k]) -> ([i, k]) {..., j=64 reduction(sum), ...}
#include "sharding/RuleText.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

namespace spmd::sharding {
namespace {

std::optional<ReduceOp> parseReduceOp(const std::string& name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min})
    if (reduceOpName(op) == name) return op;
  return std::nullopt;
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Expected<RuleTemplate> parse() {
    RuleTemplate t;
    t.text = std::string(s_);
    SPMD_ASSIGN_OR_RETURN(t.operands, tensors());
    if (!eat("->")) return expected("'->'");
    SPMD_ASSIGN_OR_RETURN(t.results, tensors());
    if (eat("{")) SPMD_RETURN_IF_ERROR(annotations(t));
    skip();
    if (pos_ < s_.size()) SPMD_RETURN_IF_ERROR(linearity(t));
    skip();
    if (pos_ != s_.size()) return expected("the end of the rule");
    return t;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(std::string_view token) {
    skip();
    if (s_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  Status expected(const std::string& what) const {
    return Status::error("rule '" + std::string(s_) + "': at " + std::to_string(pos_) + ": expected " + what);
  }
  std::string word() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '-'))
      ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // "(" [tensor {"," tensor}] ")", tensor = "[" [dim {"," dim}] "]".
  Expected<std::vector<std::vector<std::vector<std::string>>>> tensors() {
    std::vector<std::vector<std::vector<std::string>>> out;
    if (!eat("(")) return expected("'('");
    if (eat(")")) return out;
    do {
      if (!eat("[")) return expected("'['");
      std::vector<std::vector<std::string>> dims;
      if (!eat("]")) {
        do {
          std::vector<std::string> names;
          for (std::string w = word(); !w.empty(); w = word()) names.push_back(w);
          if (names.empty()) return expected("a factor name or 1");
          if (names == std::vector<std::string>{"1"}) names.clear();
          dims.push_back(std::move(names));
        } while (eat(","));
        if (!eat("]")) return expected("',' or ']'");
      }
      out.push_back(std::move(dims));
    } while (eat(","));
    if (!eat(")")) return expected("',' or ')'");
    return out;
  }

  // name ["=" size] ["reduction(" op ")" | "replicated"] {"," ...} "}".
  Status annotations(RuleTemplate& t) {
    if (eat("}")) return Status::ok();
    do {
      RuleTemplate::Annotation a;
      a.name = word();
      if (a.name.empty()) return expected("a factor name");
      if (eat("=")) {
        std::string n = word();
        if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit)) return expected("a size");
        a.size = std::stoll(n);
      }
      if (eat("reduction")) {
        if (!eat("(")) return expected("'('");
        auto op = parseReduceOp(word());
        if (!op) return expected("sum, avg, max or min");
        a.kind = FactorKind::Reduction;
        a.reduce = *op;
        if (!eat(")")) return expected("')'");
      } else if (eat("replicated")) {
        a.kind = FactorKind::NeedReplication;
      }
      t.annotations.push_back(a);
    } while (eat(","));
    if (!eat("}")) return expected("',' or '}'");
    return Status::ok();
  }

  Status linearity(RuleTemplate& t) {
    std::string kind = word();
    if (kind == "linear-each")
      t.linearity = Linearity::Each;
    else if (kind == "linear-joint")
      t.linearity = Linearity::Joint;
    else if (kind == "value-independent")
      t.linearity = Linearity::ValueIndependent;
    else
      return expected("linear-each(...), linear-joint(...) or value-independent(...)");
    if (!eat("(")) return expected("'('");
    do {
      std::string n = word();
      if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit)) return expected("an operand index");
      t.linearOperands.push_back(std::stoi(n));
    } while (eat(","));
    if (!eat(")")) return expected("')'");
    return Status::ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Factor sizes: annotated, else the size of a dim the factor is alone in.
Status sizeFactors(const RuleTemplate& t, const RuleBuilder& b, std::map<std::string, int64_t>& size) {
  for (const auto& a : t.annotations)
    if (a.size >= 0) size[a.name] = a.size;
  auto scan = [&](const auto& tensors, auto shapeOf) {
    for (size_t i = 0; i < tensors.size(); ++i)
      for (size_t d = 0; d < tensors[i].size(); ++d)
        if (tensors[i][d].size() == 1 && !size.count(tensors[i][d][0]))
          size[tensors[i][d][0]] = shapeOf(static_cast<int>(i))[d];
  };
  scan(t.operands, [&](int i) { return b.operandShape(i); });
  scan(t.results, [&](int i) { return b.resultShape(i); });
  for (const auto* side : {&t.operands, &t.results})
    for (const auto& tensor : *side)
      for (const auto& dim : tensor)
        for (const std::string& n : dim)
          if (!size.count(n))
            return Status::error("rule '" + t.text + "': factor " + n +
                                 " is never alone in a dim; give its size, e.g. {" + n + "=8}");
  return Status::ok();
}

Expected<OpShardingRule> instantiate(const RuleTemplate& t, const ir::Node& node) {
  RuleBuilder b(node);
  if (static_cast<int>(t.operands.size()) != b.numOperands() ||
      static_cast<int>(t.results.size()) != b.numResults())
    return Status::error("rule '" + t.text + "' describes " + std::to_string(t.operands.size()) +
                         " tensor operands and " + std::to_string(t.results.size()) +
                         " results; the node has " + std::to_string(b.numOperands()) + " and " +
                         std::to_string(b.numResults()));
  for (int i = 0; i < b.numOperands(); ++i)
    if (t.operands[static_cast<size_t>(i)].size() != b.operandShape(i).size())
      return Status::error("rule '" + t.text + "': operand " + std::to_string(i) + " has rank " +
                           std::to_string(b.operandShape(i).size()) + ", the rule gives it " +
                           std::to_string(t.operands[static_cast<size_t>(i)].size()) + " dims");
  for (int i = 0; i < b.numResults(); ++i)
    if (t.results[static_cast<size_t>(i)].size() != b.resultShape(i).size())
      return Status::error("rule '" + t.text + "': result " + std::to_string(i) + " has rank " +
                           std::to_string(b.resultShape(i).size()) + ", the rule gives it " +
                           std::to_string(t.results[static_cast<size_t>(i)].size()) + " dims");
  std::map<std::string, int64_t> size;
  SPMD_RETURN_IF_ERROR(sizeFactors(t, b, size));
  std::map<std::string, int> index;
  auto factorOf = [&](const std::string& n) {
    if (auto it = index.find(n); it != index.end()) return it->second;
    FactorKind kind = FactorKind::PassThrough;
    ReduceOp reduce = ReduceOp::Sum;
    for (const auto& a : t.annotations)
      if (a.name == n) kind = a.kind, reduce = a.reduce;
    return index[n] = b.factor(size[n], kind, reduce);
  };
  for (size_t i = 0; i < t.operands.size(); ++i)
    for (size_t d = 0; d < t.operands[i].size(); ++d)
      for (const std::string& n : t.operands[i][d])
        b.operand(static_cast<int>(i), static_cast<int64_t>(d), factorOf(n));
  for (size_t i = 0; i < t.results.size(); ++i)
    for (size_t d = 0; d < t.results[i].size(); ++d)
      for (const std::string& n : t.results[i][d])
        b.result(static_cast<int>(i), static_cast<int64_t>(d), factorOf(n));
  for (int op : t.linearOperands)
    if (op < 0 || op >= b.numOperands())
      return Status::error("rule '" + t.text + "': linearity names operand " + std::to_string(op) +
                           "; the node has " + std::to_string(b.numOperands()));
  if (t.linearity != Linearity::None) b.linear(t.linearity, t.linearOperands);
  return b.build();
}

}  // namespace

Expected<RuleTemplate> parseRuleText(std::string_view text) { return Parser(text).parse(); }

RuleFn ruleFromTemplate(RuleTemplate t) {
  return [t = std::move(t)](const ir::Node& node) { return instantiate(t, node); };
}

}  // namespace spmd::sharding
