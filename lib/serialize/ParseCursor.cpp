// Reading primitives of the IR text parser (see ParseCursor.h), and the
// infix size expressions of types ("8*s52", "(s0 + 1) // 2", "max(s0, 2)").
#include "serialize/ParseCursor.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "ir/SymExpr.h"
#include "serialize/FromText.h"

namespace spmd::serialize {

using namespace ir;  // NOLINT: the IR types throughout
namespace {

bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Infix size expressions, by precedence: + ; * // % ; unary - ; ** ; atoms.
class DimParser {
 public:
  explicit DimParser(std::string_view s) : s_(s) {}

  Expected<std::shared_ptr<const SymExpr>> parse() {
    SPMD_ASSIGN_OR_RETURN(auto e, sum());
    skip();
    if (p_ != s_.size()) return fail("unexpected '" + std::string(s_.substr(p_)) + "'");
    return e;
  }

 private:
  using E = std::shared_ptr<const SymExpr>;

  Status fail(const std::string& what) const {
    return Status::error("size '" + std::string(s_) + "': " + what);
  }
  void skip() {
    while (p_ < s_.size() && s_[p_] == ' ') ++p_;
  }
  bool eat(std::string_view t) {
    skip();
    if (s_.substr(p_, t.size()) != t) return false;
    p_ += t.size();
    return true;
  }

  Expected<E> sum() {
    SPMD_ASSIGN_OR_RETURN(E first, product());
    std::vector<E> terms = {first};
    while (eat("+")) {
      SPMD_ASSIGN_OR_RETURN(E t, product());
      terms.push_back(t);
    }
    return terms.size() == 1 ? terms[0] : symOp(SymExpr::Kind::Add, terms);
  }

  Expected<E> product() {
    SPMD_ASSIGN_OR_RETURN(E acc, unary());
    std::vector<E> factors = {acc};
    for (;;) {
      SymExpr::Kind k;
      skip();
      if (s_.substr(p_, 2) == "**") break;
      if (eat("//")) {
        k = SymExpr::Kind::FloorDiv;
      } else if (eat("*")) {
        k = SymExpr::Kind::Mul;
      } else if (eat("%")) {
        k = SymExpr::Kind::Mod;
      } else {
        break;
      }
      SPMD_ASSIGN_OR_RETURN(E rhs, unary());
      if (k == SymExpr::Kind::Mul) {
        factors.push_back(rhs);
        continue;
      }
      E lhs = factors.size() == 1 ? factors[0] : symOp(SymExpr::Kind::Mul, factors);
      factors = {symOp(k, {lhs, rhs})};
    }
    return factors.size() == 1 ? factors[0] : symOp(SymExpr::Kind::Mul, factors);
  }

  Expected<E> unary() {
    if (eat("-")) {
      SPMD_ASSIGN_OR_RETURN(E e, unary());
      if (e->kind == SymExpr::Kind::Integer) return symInteger(-e->value);
      return symOp(SymExpr::Kind::Mul, {symInteger(-1), e});
    }
    SPMD_ASSIGN_OR_RETURN(E base, atom());
    if (!eat("**")) return base;
    SPMD_ASSIGN_OR_RETURN(E exp, unary());
    return symOp(SymExpr::Kind::Pow, {base, exp});
  }

  Expected<E> atom() {
    skip();
    if (eat("(")) {
      SPMD_ASSIGN_OR_RETURN(E e, sum());
      if (!eat(")")) return fail("missing ')'");
      return e;
    }
    size_t start = p_;
    if (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      int64_t v = 0;
      auto res = std::from_chars(s_.data() + p_, s_.data() + s_.size(), v);
      if (res.ec != std::errc()) return fail("integer out of range");
      p_ = static_cast<size_t>(res.ptr - s_.data());
      return symInteger(v);
    }
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) ++p_;
    std::string name(s_.substr(start, p_ - start));
    if (name.empty()) return fail("expected a size at '" + std::string(s_.substr(start)) + "'");
    if (!eat("(")) return symSymbol(name);
    SymExpr::Kind k = name == "max"       ? SymExpr::Kind::Max
                      : name == "min"     ? SymExpr::Kind::Min
                      : name == "ceildiv" ? SymExpr::Kind::CeilDiv
                                          : SymExpr::Kind::Integer;
    if (k == SymExpr::Kind::Integer) return fail("unknown function '" + name + "'");
    std::vector<E> args;
    do {
      SPMD_ASSIGN_OR_RETURN(E a, sum());
      args.push_back(a);
    } while (eat(","));
    if (!eat(")")) return fail("missing ')'");
    return symOp(k, args);
  }

  std::string_view s_;
  size_t p_ = 0;
};

}  // namespace

Expected<Dim> parseDim(std::string_view text, const std::map<std::string, int64_t>& hints) {
  SPMD_ASSIGN_OR_RETURN(auto e, DimParser(text).parse());
  if (e->kind == SymExpr::Kind::Integer) return Dim(e->value);
  return withHint(Dim(e, 0), hints);
}

Dim withHint(const Dim& d, const std::map<std::string, int64_t>& hints) {
  if (d.isStatic()) return d;
  auto hint = evaluateSymExpr(*d.expr(), SymBindings(hints.begin(), hints.end()));
  return Dim(d.expr(), hint.hasValue() ? *hint : 0);
}

void Cursor::skipSpaces() {
  while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
}

bool Cursor::accept(std::string_view token) {
  skipSpaces();
  if (s_.substr(p_, token.size()) != token) return false;
  p_ += token.size();
  return true;
}

bool Cursor::acceptWord(std::string_view w) {
  skipSpaces();
  if (s_.substr(p_, w.size()) != w) return false;
  if (p_ + w.size() < s_.size() && nameChar(s_[p_ + w.size()])) return false;
  p_ += w.size();
  return true;
}

Status Cursor::expect(std::string_view token) {
  if (accept(token)) return Status::ok();
  std::string_view at = s_.substr(p_, 24);
  return error("expected '" + std::string(token) + "' at '" + std::string(at) + "'");
}

std::string Cursor::word() {
  skipSpaces();
  size_t start = p_;
  while (p_ < s_.size() && nameChar(s_[p_])) ++p_;
  return std::string(s_.substr(start, p_ - start));
}

Expected<std::string> Cursor::valueName() {
  SPMD_RETURN_IF_ERROR(expect("%"));
  size_t start = p_;
  while (p_ < s_.size() && nameChar(s_[p_])) ++p_;
  if (p_ == start) return error("a '%' without a value name");
  return std::string(s_.substr(start, p_ - start));
}

Expected<std::string> Cursor::balancedUntil(char close) {
  size_t start = p_;
  int depth = 0;
  for (; p_ < s_.size(); ++p_) {
    char c = s_[p_];
    if (c == '"') {
      ++p_;
      SPMD_RETURN_IF_ERROR(stringBody().status());
      --p_;
    } else if (c == '(' || c == '[') {
      ++depth;
    } else if (depth == 0 && c == close) {
      std::string inner(s_.substr(start, p_ - start));
      ++p_;
      return inner;
    } else if (c == ')' || c == ']') {
      --depth;
    }
  }
  return error(std::string("missing '") + close + "'");
}

std::string Cursor::until(std::string_view stops) {
  size_t start = p_;
  while (p_ < s_.size() && stops.find(s_[p_]) == std::string_view::npos) ++p_;
  return std::string(s_.substr(start, p_ - start));
}

size_t Cursor::findAssignment() const {
  int depth = 0;
  bool inString = false;
  for (size_t i = p_; i < s_.size(); ++i) {
    char c = s_[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == '#' && depth == 0)
      return std::string_view::npos;
    else if (depth == 0 && s_.substr(i, 3) == " = ")
      return i;
  }
  return std::string_view::npos;
}

Expected<std::string> Cursor::stringBody() {
  std::string out;
  while (p_ < s_.size()) {
    char c = s_[p_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (p_ >= s_.size()) break;
    char e = s_[p_++];
    if (e == 'n')
      out += '\n';
    else if (e == 't')
      out += '\t';
    else if (e == 'r')
      out += '\r';
    else if (e == 'x' && p_ + 1 < s_.size() && hexDigit(s_[p_]) >= 0 && hexDigit(s_[p_ + 1]) >= 0) {
      out += static_cast<char>(hexDigit(s_[p_]) * 16 + hexDigit(s_[p_ + 1]));
      p_ += 2;
    } else {
      out += e;
    }
  }
  return error("unterminated string");
}

Expected<Literal> Cursor::number() {
  Literal l;
  size_t start = p_;
  if (s_[p_] == '-') ++p_;
  if (s_.substr(p_, 3) == "inf") {
    p_ += 3;
    l.type = Literal::Float;
    l.f =
        s_[start] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return l;
  }
  bool isFloat = false;
  while (p_ < s_.size()) {
    char c = s_[p_];
    bool exponentSign = (c == '-' || c == '+') && p_ > start && (s_[p_ - 1] == 'e' || s_[p_ - 1] == 'E');
    if (c == '.' || c == 'e' || c == 'E') isFloat = true;
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != 'E' && !exponentSign)
      break;
    ++p_;
  }
  std::string_view text = s_.substr(start, p_ - start);
  const char* end = text.data() + text.size();
  std::from_chars_result res{};
  if (isFloat) {
    l.type = Literal::Float;
    res = std::from_chars(text.data(), end, l.f);
  } else {
    l.type = Literal::Int;
    res = std::from_chars(text.data(), end, l.i);
  }
  if (res.ec != std::errc() || res.ptr != end) return error("malformed number '" + std::string(text) + "'");
  return l;
}

Expected<Literal> Cursor::literal() {
  skipSpaces();
  Literal l;
  if (p_ >= s_.size()) return error("expected a value at the end of the line");
  char c = s_[p_];
  if (c == '%') {
    l.type = Literal::Ref;
    SPMD_ASSIGN_OR_RETURN(l.text, valueName());
    return l;
  }
  if (c == '"') {
    ++p_;
    l.type = Literal::String;
    SPMD_ASSIGN_OR_RETURN(l.text, stringBody());
    return l;
  }
  if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
  if (c == '[') {
    ++p_;
    return items(']', Literal::List);
  }
  l.text = word();
  if (l.text.empty()) return error("expected a value at '" + std::string(s_.substr(p_, 24)) + "'");
  if (l.text == "none") return l;
  if (l.text == "true" || l.text == "false") {
    l.type = Literal::Bool;
    l.i = l.text == "true" ? 1 : 0;
    return l;
  }
  if (l.text == "inf" || l.text == "nan") {
    l.type = Literal::Float;
    l.f = l.text == "inf" ? std::numeric_limits<double>::infinity() : std::nan("");
    return l;
  }
  if (p_ >= s_.size() || s_[p_] != '(') {
    l.type = Literal::Word;
    return l;
  }
  ++p_;
  if (l.text == "device") {
    l.type = Literal::Call;
    l.raw = until(")");
    SPMD_RETURN_IF_ERROR(expect(")"));
    return l;
  }
  SPMD_ASSIGN_OR_RETURN(Literal args, items(')', Literal::Call));
  args.text = l.text;
  return args;
}

Expected<Literal> Cursor::items(char close, Literal::Type type) {
  Literal l;
  l.type = type;
  if (accept(std::string(1, close))) return l;
  do {
    SPMD_ASSIGN_OR_RETURN(Literal item, literal());
    l.items.push_back(std::move(item));
  } while (accept(","));
  SPMD_RETURN_IF_ERROR(expect(std::string(1, close)));
  return l;
}

Status Cursor::error(const std::string& message) const {
  return Status::error(std::string(source_) + ":" + std::to_string(line_) + ": " + message);
}

std::vector<std::string> splitTopLevel(std::string_view text) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  auto push = [&](size_t end) {
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      push(i);
      start = i + 1;
    }
  }
  push(text.size());
  return out;
}

}  // namespace spmd::serialize
