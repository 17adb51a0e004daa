// Small text helpers shared by reports and summaries.
//
//   withCommas(1234567) == "1,234,567"
//   elided(std::string(100000, 'a'), 8) == "aaaaaaaa... (100,000 characters)"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spmd {

/// The integer with thousands separated by commas ("-1,234").
inline std::string withCommas(int64_t v) {
  std::string s = std::to_string(v);
  int stop = v < 0 ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > stop; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

/// `text` when it has at most `max` characters; else its first `max`
/// characters, "...", and its length, so a message quoting untrusted text
/// stays short.
inline std::string elided(std::string_view text, size_t max = 80) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + withCommas(static_cast<int64_t>(text.size())) +
         " characters)";
}

}  // namespace spmd
