// Parsing and evaluation of sympy srepr expressions, e.g.
//   "Mul(Integer(8), Symbol('s52', positive=True, integer=True))" -> 8*s52
#include "ir/SymExpr.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace spmd::ir {
namespace {

using ExprPtr = std::shared_ptr<const SymExpr>;

class SreprParser {
 public:
  explicit SreprParser(std::string_view text) : s_(text) {}

  Expected<ExprPtr> parse() {
    SPMD_ASSIGN_OR_RETURN(ExprPtr e, parseExpr());
    skipSpace();
    if (pos_ != s_.size()) return fail("trailing characters");
    return e;
  }

 private:
  Status fail(const std::string& what) const {
    return Status::error("cannot parse symbolic size '" + std::string(s_) + "': " + what + " at offset " +
                         std::to_string(pos_));
  }
  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string_view identifier() {
    skipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  Expected<int64_t> integer() {
    skipSpace();
    size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_) return fail("expected an integer");
    try {
      return static_cast<int64_t>(std::stoll(std::string(s_.substr(start, pos_ - start))));
    } catch (...) {
      return fail("integer out of range");
    }
  }
  // Skips keyword arguments like `positive=True` up to the closing paren.
  void skipKeywords() {
    int depth = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '(') ++depth;
      if (c == ')') {
        if (depth == 0) return;
        --depth;
      }
      ++pos_;
    }
  }

  Expected<ExprPtr> parseExpr() {
    skipSpace();
    if (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-')) {
      SPMD_ASSIGN_OR_RETURN(int64_t v, integer());
      return makeInt(v);
    }
    std::string_view head = identifier();
    if (head.empty()) return fail("expected an expression");
    if (!consume('(')) {
      // A bare symbol name in infix form ("s52").
      auto e = std::make_shared<SymExpr>();
      e->kind = SymExpr::Kind::Symbol;
      e->name = std::string(head);
      return ExprPtr(e);
    }
    auto e = std::make_shared<SymExpr>();
    if (head == "Integer") {
      SPMD_ASSIGN_OR_RETURN(int64_t v, integer());
      if (!consume(')')) return fail("expected ')'");
      return makeInt(v);
    }
    if (head == "Symbol") {
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return fail("expected a quoted name");
      char q = s_[pos_++];
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != q) ++pos_;
      if (pos_ >= s_.size()) return fail("unterminated symbol name");
      e->kind = SymExpr::Kind::Symbol;
      e->name = std::string(s_.substr(start, pos_ - start));
      ++pos_;
      skipKeywords();
      if (!consume(')')) return fail("expected ')'");
      return ExprPtr(e);
    }
    static const std::pair<std::string_view, SymExpr::Kind> kOps[] = {
        {"Add", SymExpr::Kind::Add},
        {"Mul", SymExpr::Kind::Mul},
        {"FloorDiv", SymExpr::Kind::FloorDiv},
        {"Mod", SymExpr::Kind::Mod},
        {"PythonMod", SymExpr::Kind::Mod},
        {"Max", SymExpr::Kind::Max},
        {"Min", SymExpr::Kind::Min},
        {"Pow", SymExpr::Kind::Pow},
        {"CeilingDiv", SymExpr::Kind::CeilDiv},
        {"CeilDiv", SymExpr::Kind::CeilDiv},
    };
    auto it = std::find_if(std::begin(kOps), std::end(kOps), [&](const auto& p) { return p.first == head; });
    if (it == std::end(kOps)) return fail("unsupported function '" + std::string(head) + "'");
    e->kind = it->second;
    while (true) {
      SPMD_ASSIGN_OR_RETURN(ExprPtr arg, parseExpr());
      e->args.push_back(std::move(arg));
      if (consume(',')) continue;
      if (consume(')')) break;
      return fail("expected ',' or ')'");
    }
    if (e->args.empty()) return fail("function without arguments");
    return ExprPtr(e);
  }

  static ExprPtr makeInt(int64_t v) {
    auto e = std::make_shared<SymExpr>();
    e->kind = SymExpr::Kind::Integer;
    e->value = v;
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

void collectSymbols(const SymExpr& e, std::set<std::string>& out) {
  if (e.kind == SymExpr::Kind::Symbol) out.insert(e.name);
  for (const auto& a : e.args) collectSymbols(*a, out);
}

}  // namespace

Expected<int64_t> evaluateSymExpr(const SymExpr& e, const SymBindings& bindings) {
  switch (e.kind) {
    case SymExpr::Kind::Integer:
      return e.value;
    case SymExpr::Kind::Symbol: {
      auto it = bindings.find(e.name);
      if (it == bindings.end()) return Status::error("symbol " + e.name + " is not bound");
      return it->second;
    }
    default:
      break;
  }
  std::vector<int64_t> v;
  v.reserve(e.args.size());
  for (const auto& a : e.args) {
    SPMD_ASSIGN_OR_RETURN(int64_t x, evaluateSymExpr(*a, bindings));
    v.push_back(x);
  }
  auto binary = [&]() -> Status {
    if (v.size() != 2) return Status::error("expected two operands in " + symExprStr(e));
    return Status::ok();
  };
  switch (e.kind) {
    case SymExpr::Kind::Add: {
      int64_t r = 0;
      for (int64_t x : v) r += x;
      return r;
    }
    case SymExpr::Kind::Mul: {
      int64_t r = 1;
      for (int64_t x : v) r *= x;
      return r;
    }
    case SymExpr::Kind::Max:
      return *std::max_element(v.begin(), v.end());
    case SymExpr::Kind::Min:
      return *std::min_element(v.begin(), v.end());
    case SymExpr::Kind::FloorDiv:
    case SymExpr::Kind::CeilDiv:
    case SymExpr::Kind::Mod:
    case SymExpr::Kind::Pow: {
      SPMD_RETURN_IF_ERROR(binary());
      if (e.kind == SymExpr::Kind::Pow) {
        int64_t r = 1;
        for (int64_t i = 0; i < v[1]; ++i) r *= v[0];
        return r;
      }
      if (v[1] == 0) return Status::error("division by zero in " + symExprStr(e));
      if (e.kind == SymExpr::Kind::FloorDiv) return floorDiv(v[0], v[1]);
      if (e.kind == SymExpr::Kind::CeilDiv) return -floorDiv(-v[0], v[1]);
      return v[0] - floorDiv(v[0], v[1]) * v[1];
    }
    default:
      break;
  }
  abortWithLocation(__FILE__, __LINE__, "unhandled SymExpr kind");
}

namespace {

// Whether `arg` needs parentheses as an operand of `parent` for the infix
// form to read back as the same tree (ir::parseDim): `+` binds loosest,
// then `*`, `//` and `%` from the left, then unary minus, then `**`.
bool needsParens(SymExpr::Kind parent, const SymExpr& arg) {
  using K = SymExpr::Kind;
  bool infix = arg.kind == K::Add || arg.kind == K::Mul || arg.kind == K::FloorDiv || arg.kind == K::Mod ||
               arg.kind == K::Pow;
  switch (parent) {
    case K::Add:
      return false;
    case K::Mul:
      return arg.kind == K::Add || arg.kind == K::FloorDiv || arg.kind == K::Mod;
    case K::FloorDiv:
    case K::Mod:
      return infix && arg.kind != K::Pow;
    case K::Pow:
      return infix || (arg.kind == K::Integer && arg.value < 0);
    default:
      return false;
  }
}

}  // namespace

std::string symExprStr(const SymExpr& e) {
  auto join = [&](const char* sep) {
    std::string s;
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) s += sep;
      const SymExpr& a = *e.args[i];
      bool paren = needsParens(e.kind, a);
      s += paren ? "(" + symExprStr(a) + ")" : symExprStr(a);
    }
    return s;
  };
  auto call = [&](const char* f) { return std::string(f) + "(" + join(", ") + ")"; };
  switch (e.kind) {
    case SymExpr::Kind::Integer:
      return std::to_string(e.value);
    case SymExpr::Kind::Symbol:
      return e.name;
    case SymExpr::Kind::Add:
      return join(" + ");
    case SymExpr::Kind::Mul:
      return join("*");
    case SymExpr::Kind::FloorDiv:
      return join(" // ");
    case SymExpr::Kind::Mod:
      return join(" % ");
    case SymExpr::Kind::Pow:
      return join("**");
    case SymExpr::Kind::Max:
      return call("max");
    case SymExpr::Kind::Min:
      return call("min");
    case SymExpr::Kind::CeilDiv:
      return call("ceildiv");
  }
  return "?";
}

Expected<Dim> parseSymExpr(std::string_view text, int64_t hint) {
  SreprParser p(text);
  SPMD_ASSIGN_OR_RETURN(std::shared_ptr<const SymExpr> e, p.parse());
  if (e->kind == SymExpr::Kind::Integer) return Dim(e->value);
  return Dim(std::move(e), hint);
}

Expected<int64_t> Dim::evaluate(const SymBindings& bindings) const {
  if (!expr_) return value_;
  return evaluateSymExpr(*expr_, bindings);
}

std::string Dim::str() const { return expr_ ? symExprStr(*expr_) : std::to_string(value_); }

std::vector<std::string> Dim::symbols() const {
  std::set<std::string> s;
  if (expr_) collectSymbols(*expr_, s);
  return {s.begin(), s.end()};
}

bool Dim::operator==(const Dim& other) const {
  if (isStatic() != other.isStatic()) return false;
  if (isStatic()) return value_ == other.value_;
  return str() == other.str();
}

std::shared_ptr<const SymExpr> symInteger(int64_t value) {
  auto e = std::make_shared<SymExpr>();
  e->kind = SymExpr::Kind::Integer;
  e->value = value;
  return e;
}

std::shared_ptr<const SymExpr> symSymbol(std::string name) {
  auto e = std::make_shared<SymExpr>();
  e->kind = SymExpr::Kind::Symbol;
  e->name = std::move(name);
  return e;
}

std::shared_ptr<const SymExpr> symOp(SymExpr::Kind kind, std::vector<std::shared_ptr<const SymExpr>> args) {
  auto e = std::make_shared<SymExpr>();
  e->kind = kind;
  e->args = std::move(args);
  return e;
}

}  // namespace spmd::ir
