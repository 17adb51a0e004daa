// Small text helpers shared by reports and summaries.
//
//   withCommas(1234567) == "1,234,567"
//   elided(std::string(100000, 'a'), 8) == "aaaaaaaa... (100,000 characters)"
//   parseByteSize("--max-shard-size", "5GB") == 5000000000
//   formatShape({256, 64}) == "[256, 64]"
//   joined({"dp", "tp"}) == "dp, tp"
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "support/Status.h"

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

/// A shape as users see it everywhere, the IR's form (`f32[256, 64]`
/// without the dtype): "[256, 64]", "[]" for a scalar. Also any list of
/// integers (indices, offsets).
std::string formatShape(std::span<const int64_t> sizes);

/// `items` separated by `separator` ("dp, tp"); "" when there are none.
std::string joined(std::span<const std::string> items, std::string_view separator = ", ");

/// Parses a byte size: "40GiB", "512MiB", "1.5GB", "5G" (binary K/M/G), or
/// a number of bytes; positive only. The error reads "<flag> <text>:
/// expected a positive size such as 40GiB, ...".
Expected<int64_t> parseByteSize(std::string_view flag, const std::string& text);

}  // namespace spmd
