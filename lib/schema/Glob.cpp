// Glob matching and glob suggestions.
//
//   pattern "layers.*.wq.weigth" against "layers.0.wq.weight":
//     * eats "0" for free, "th" -> "ht" is one swap: distance 1,
//     suggestion "layers.*.wq.weight".
//
// Invariant of the alignment table D: D[i][j] is the fewest edits that make
// the first i pattern elements match the first j name characters.
#include "schema/Glob.h"

#include <fnmatch.h>

#include <algorithm>
#include <string>

#include "support/Status.h"

namespace spmd::schema {
namespace {

/// One element of a parsed glob.
struct Elem {
  enum class Kind { Literal, AnyOne, Star, Class };
  Kind kind = Kind::Literal;
  char c = 0;
  /// The element as written in the pattern ("a", "\\*", "[13]").
  std::string text;
};

/// The longest `[...]` class; a `[` with no `]` within it is a literal.
/// Keeps parsing linear (each `[` looks at most this far ahead).
constexpr size_t kMaxClassLength = 256;

/// Index one past the `]` closing the class that opens at `i`, or npos.
size_t classEnd(std::string_view p, size_t i) {
  const size_t stop = std::min(p.size(), i + kMaxClassLength);
  size_t j = i + 1;
  if (j < stop && (p[j] == '!' || p[j] == '^')) ++j;
  if (j < stop && p[j] == ']') ++j;
  while (j < stop && p[j] != ']') {
    if (p[j] == '[' && j + 1 < stop && p[j + 1] == ':') {
      size_t close = p.substr(0, stop).find(":]", j + 2);
      if (close == std::string_view::npos) return std::string_view::npos;
      j = close + 2;
      continue;
    }
    ++j;
  }
  return j < stop ? j + 1 : std::string_view::npos;
}

/// The element of `p` that starts at `i` (its text is p[i, end)).
struct Token {
  Elem::Kind kind = Elem::Kind::Literal;
  char c = 0;
  size_t end = 0;
};

Token tokenAt(std::string_view p, size_t i) {
  char ch = p[i];
  if (ch == '\\' && i + 1 < p.size()) return {Elem::Kind::Literal, p[i + 1], i + 2};
  if (ch == '*') return {Elem::Kind::Star, 0, i + 1};
  if (ch == '?') return {Elem::Kind::AnyOne, 0, i + 1};
  if (size_t end = ch == '[' ? classEnd(p, i) : std::string_view::npos; end != std::string_view::npos)
    return {Elem::Kind::Class, 0, end};
  return {Elem::Kind::Literal, ch, i + 1};
}

std::vector<Elem> parseGlob(std::string_view p) {
  std::vector<Elem> out;
  for (size_t i = 0; i < p.size();) {
    Token t = tokenAt(p, i);
    if (t.kind != Elem::Kind::Star || out.empty() || out.back().kind != Elem::Kind::Star)
      out.push_back({t.kind, t.c, std::string(p.substr(i, t.end - i))});
    i = t.end;
  }
  return out;
}

/// True when the non-star element `t` (text `text`) matches character `c`.
/// A class goes to fnmatch(3) on its own text (at most kMaxClassLength).
bool tokenMatches(const Token& t, std::string_view text, char c) {
  switch (t.kind) {
    case Elem::Kind::Literal:
      return t.c == c;
    case Elem::Kind::AnyOne:
    case Elem::Kind::Star:
      return true;
    case Elem::Kind::Class: {
      const char one[2] = {c, '\0'};
      return c != '\0' && fnmatch(std::string(text).c_str(), one, 0) == 0;
    }
  }
  return false;
}

bool elemMatches(const Elem& e, char c) { return tokenMatches({e.kind, e.c, 0}, e.text, c); }

/// 0 when element `e` matches character `c`, else 1 (substitution).
int matchCost(const Elem& e, char c) { return elemMatches(e, c) ? 0 : 1; }

/// `c` written as a glob literal.
std::string escaped(char c) {
  if (c == '*' || c == '?' || c == '[' || c == '\\') return std::string{'\\', c};
  return std::string(1, c);
}

using Table = std::vector<std::vector<int>>;

bool swappable(const std::vector<Elem>& e, std::string_view s, size_t i, size_t j) {
  return i >= 2 && j >= 2 && e[i - 1].kind == Elem::Kind::Literal && e[i - 2].kind == Elem::Kind::Literal &&
         e[i - 1].c != e[i - 2].c && e[i - 1].c == s[j - 2] && e[i - 2].c == s[j - 1];
}

Table alignTable(const std::vector<Elem>& e, std::string_view s) {
  size_t n = e.size(), m = s.size();
  Table d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t j = 1; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    bool star = e[i - 1].kind == Elem::Kind::Star;
    d[i][0] = d[i - 1][0] + (star ? 0 : 1);
    for (size_t j = 1; j <= m; ++j) {
      if (star) {
        d[i][j] = std::min(d[i - 1][j], d[i][j - 1]);
        continue;
      }
      int best = d[i - 1][j - 1] + matchCost(e[i - 1], s[j - 1]);
      best = std::min({best, d[i - 1][j] + 1, d[i][j - 1] + 1});
      if (swappable(e, s, i, j)) best = std::min(best, d[i - 2][j - 2] + 1);
      d[i][j] = best;
    }
  }
  return d;
}

/// Walks the table back from the corner and writes the corrected pattern.
std::string corrected(const std::vector<Elem>& e, std::string_view s, const Table& d) {
  std::vector<std::string> rev;
  size_t i = e.size(), j = s.size();
  while (i > 0 || j > 0) {
    if (i == 0) {
      rev.push_back(escaped(s[--j]));
    } else if (e[i - 1].kind == Elem::Kind::Star) {
      if (d[i][j] == d[i - 1][j]) {  // the star matches as little as it can
        rev.emplace_back("*");
        --i;
      } else {
        SPMD_CHECK(j > 0 && d[i][j] == d[i][j - 1]);
        --j;  // the star eats s[j]
      }
    } else if (j > 0 && d[i][j] == d[i - 1][j - 1] + matchCost(e[i - 1], s[j - 1])) {
      rev.push_back(matchCost(e[i - 1], s[j - 1]) == 0 ? e[i - 1].text : escaped(s[j - 1]));
      --i, --j;
    } else if (j > 0 && swappable(e, s, i, j) && d[i][j] == d[i - 2][j - 2] + 1) {
      rev.push_back(escaped(s[j - 1]));
      rev.push_back(escaped(s[j - 2]));
      i -= 2, j -= 2;
    } else if (d[i][j] == d[i - 1][j] + 1) {
      --i;  // drop the pattern element
    } else {
      SPMD_CHECK(j > 0 && d[i][j] == d[i][j - 1] + 1);
      rev.push_back(escaped(s[--j]));
    }
  }
  std::reverse(rev.begin(), rev.end());
  std::string out;
  for (const std::string& piece : rev) out += piece;
  return out;
}

/// Edit distance with adjacent swaps (optimal string alignment).
int editDistance(std::string_view a, std::string_view b) {
  Table d(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i >= 2 && j >= 2 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

bool globMatch(std::string_view pattern, std::string_view name) {
  // Greedy, with one backtrack point: the element after the last star. A
  // later star supersedes an earlier one, so the work is O(|pattern| *
  // |name|), and the pattern is read in place (no copy of a long one).
  constexpr size_t kNone = std::string_view::npos;
  size_t i = 0, j = 0, afterStar = kNone, starName = 0;
  while (j < name.size()) {
    if (i < pattern.size()) {
      Token t = tokenAt(pattern, i);
      if (t.kind == Elem::Kind::Star) {
        i = afterStar = t.end;
        starName = j;
        continue;
      }
      if (tokenMatches(t, pattern.substr(i, t.end - i), name[j])) {
        i = t.end, ++j;
        continue;
      }
    }
    if (afterStar == kNone) return false;
    i = afterStar, j = ++starName;
  }
  for (; i < pattern.size(); ++i)
    if (pattern[i] != '*') return false;
  return true;
}

int globDistance(std::string_view pattern, std::string_view name) {
  std::vector<Elem> e = parseGlob(pattern);
  return alignTable(e, name)[e.size()][name.size()];
}

std::optional<std::string> suggestGlob(std::string_view pattern, const std::vector<std::string>& names) {
  std::vector<Elem> e = parseGlob(pattern);
  int literals = static_cast<int>(
      std::count_if(e.begin(), e.end(), [](const Elem& x) { return x.kind == Elem::Kind::Literal; }));
  int limit = std::max(2, literals / 4);
  const std::string* best = nullptr;
  int bestDistance = limit + 1;
  for (const std::string& name : names) {
    if (globMatch(pattern, name)) return std::nullopt;
    int dist = alignTable(e, name)[e.size()][name.size()];
    if (dist < bestDistance) best = &name, bestDistance = dist;
  }
  if (best == nullptr) return std::nullopt;
  std::string fixed = corrected(e, *best, alignTable(e, *best));
  if (fixed == pattern || !globMatch(fixed, *best)) return std::nullopt;
  return fixed;
}

std::optional<std::string> closestWord(std::string_view word, const std::vector<std::string>& words) {
  int limit = std::max(1, static_cast<int>(word.size()) / 3);
  const std::string* best = nullptr;
  int bestDistance = limit + 1;
  for (const std::string& w : words) {
    int dist = editDistance(word, w);
    if (dist < bestDistance) best = &w, bestDistance = dist;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

}  // namespace spmd::schema
