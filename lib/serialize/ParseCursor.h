// The IR text parser's reading position within one line, and the literals
// it reads (FromText.cpp):
//
//   Cursor c("[%x, none, 2]", 7, "m.ir");
//   Literal l = *c.literal();   // a List of a Ref, a None and an Int
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/SymExpr.h"
#include "support/Status.h"

namespace spmd::serialize {

/// One value as written, before it is given an argument kind.
struct Literal {
  enum Type : uint8_t { None, Ref, Int, Float, Bool, String, Word, Call, List };
  Type type = None;
  /// Ref: the value's name; String: the unquoted text; Word/Call: the word.
  std::string text;
  /// Call of `device(...)`: the text between the parentheses.
  std::string raw;
  int64_t i = 0;  ///< Int; Bool as 0/1
  double f = 0;   ///< Float
  /// List items; Call arguments.
  std::vector<Literal> items;
};

/// A position in one line of IR text, with errors that name the line.
class Cursor {
 public:
  Cursor(std::string_view line, int lineNumber, std::string_view source)
      : s_(line), line_(lineNumber), source_(source) {}

  size_t pos() const { return p_; }
  void seek(size_t p) { p_ = p; }
  bool atEnd() {
    skipSpaces();
    return p_ >= s_.size();
  }
  std::string_view rest() const { return s_.substr(p_); }
  void skipSpaces();
  /// Skips spaces; consumes `token` when the text continues with it.
  bool accept(std::string_view token);
  /// As accept, for a whole word (not followed by a name character).
  bool acceptWord(std::string_view word);
  /// accept, or an error naming what was expected.
  Status expect(std::string_view token);
  /// Skips spaces; the longest run of name characters ([A-Za-z0-9_.]).
  std::string word();
  /// `%name`.
  Expected<std::string> valueName();
  /// Text up to the `close` that balances the already consumed opener
  /// (parentheses and brackets nest; strings are skipped); consumes it.
  Expected<std::string> balancedUntil(char close);
  /// Text up to (not including) the first of `stops`, or the line's end.
  std::string until(std::string_view stops);
  /// Position of the first ` = ` outside brackets and strings, before any
  /// `#`; npos when none.
  size_t findAssignment() const;
  /// A literal: %ref, number, "string", word, call(...) or [list].
  Expected<Literal> literal();
  /// "<source>:<line>: <message>".
  Status error(const std::string& message) const;

 private:
  Expected<Literal> number();
  /// Literals separated by commas up to `close` (the opener consumed).
  Expected<Literal> items(char close, Literal::Type type);
  Expected<std::string> stringBody();

  std::string_view s_;
  size_t p_ = 0;
  int line_;
  std::string_view source_;
};

/// `d` with its hint evaluated from the symbols' `hints` (0 where one is
/// missing); a static dim as it is.
ir::Dim withHint(const ir::Dim& d, const std::map<std::string, int64_t>& hints);

/// Splits `text` at commas outside brackets and parentheses; items trimmed.
std::vector<std::string> splitTopLevel(std::string_view text);

}  // namespace spmd::serialize
