// Small text helpers shared by reports and summaries.
//
//   withCommas(1234567) == "1,234,567"
#pragma once

#include <cstdint>
#include <string>

namespace spmd {

/// The integer with thousands separated by commas ("-1,234").
inline std::string withCommas(int64_t v) {
  std::string s = std::to_string(v);
  int stop = v < 0 ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > stop; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace spmd
